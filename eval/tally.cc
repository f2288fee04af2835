#include "eval/tally.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "kernels/thread_pool.h"

namespace lowp {

Tally::Tally(const ModelConfig& config, int64_t sequences, int64_t length, size_t candidates,
             int64_t scored_from)
    : config_(config),
      sequences_(sequences),
      length_(length),
      scored_from_(scored_from),
      routing_(config, candidates) {
  const int64_t L = config.num_layers;
  per_sequence_.assign(candidates, std::vector<SequenceResult>(static_cast<size_t>(sequences)));
  for (auto& r : per_sequence_) {
    for (SequenceResult& s : r) {
      s.layer_error.assign(L, 0);
      s.layer_norm.assign(L, 0);
    }
  }
  metrics_.assign(candidates, std::vector<PositionMetrics>(static_cast<size_t>(sequences * length)));
  reference_ce_.assign(static_cast<size_t>(sequences), 0);
}

void Tally::AddLayerErrors(const Batch& batch, int64_t first_sequence, int64_t layer,
                           std::span<const Stream> streams, int threads) {
  const int64_t D = config_.hidden_size;
  const std::vector<float>& a = streams[0].hidden;
  const size_t candidates = per_sequence_.size();
  ParallelFor(batch.sequences.size() * candidates, threads, [&](size_t task) {
    const size_t s = task % batch.sequences.size(), k = task / batch.sequences.size();
    // A stream yet to start is the reference.
    const std::vector<float>& b = streams[k + 1].Runs(layer) ? streams[k + 1].hidden : a;
    const size_t first = static_cast<size_t>(batch.sequences[s].first_row * D);
    const size_t n = static_cast<size_t>(batch.sequences[s].rows * D);
    double error = 0, norm = 0;
    for (size_t i = first; i < first + n; ++i) {
      const double e = static_cast<double>(b[i]) - a[i];
      error += e * e;
      norm += static_cast<double>(a[i]) * a[i];
    }
    SequenceResult& r = per_sequence_[k][first_sequence + static_cast<int64_t>(s)];
    r.layer_error[layer] = error;
    r.layer_norm[layer] = norm;
  });
}

absl::Status Tally::AddPositions(const Batch& batch, int64_t first_sequence,
                                 std::span<const int64_t> next, std::span<const Stream> streams,
                                 bool reference_finite, int threads) {
  const Stream& reference = streams[0];
  for (int64_t r = 0; r < batch.rows && reference_finite; ++r) {
    if (!reference.reference_logits[r].finite) {
      return absl::InternalError(
          absl::StrCat("the float32 reference gives a non-finite logit at sequence ",
                       first_sequence + r / length_, ", position ", r % length_));
    }
  }
  const size_t base = static_cast<size_t>(first_sequence * length_);
  for (int64_t r = 0; r < batch.rows; ++r) {
    const LogitStats& p = reference.reference_logits[r];
    if (next[r] >= 0 && Scored(r % length_)) {
      reference_ce_[first_sequence + r / length_] += p.LogSumExp() - p.next;
    }
  }
  ParallelFor(per_sequence_.size(), threads, [&](size_t k) {
    for (int64_t r = 0; r < batch.rows; ++r) {
      PositionMetrics m =
          FinishPosition(reference.reference_logits[r], streams[k + 1].logits[r], next[r]);
      SequenceResult& s = per_sequence_[k][first_sequence + r / length_];
      if (Scored(r % length_)) {
        s.top1 += m.top1;
        s.nonfinite += !m.finite;
        if (next[r] >= 0) s.cross_entropy += m.ce_candidate;
      }
      metrics_[k][base + static_cast<size_t>(r)] = m;
    }
  });
  return absl::OkStatus();
}

EvalReport Tally::Report(std::span<const Stream> streams,
                         std::span<const EvalCandidate> candidates, int64_t batches) const {
  const int64_t layers = config_.num_layers;
  EvalReport report;
  report.sequences = sequences_;
  report.sequence_length = length_;
  report.scored_from = scored_from_;
  for (int64_t t = 0; t < length_; ++t) {
    report.positions += Scored(t) ? sequences_ : 0;
    report.predictions += Scored(t) && t + 1 < length_ ? sequences_ : 0;
  }
  report.batches = batches;
  const double predictions = static_cast<double>(report.predictions);
  double ref_sum = 0;
  for (int64_t s = 0; s < sequences_; ++s) ref_sum += reference_ce_[s];
  report.reference_census = streams[0].census;
  report.reference_cross_entropy = predictions > 0 ? ref_sum / predictions : NAN;
  report.reference_perplexity = std::exp(report.reference_cross_entropy);
  for (size_t k = 0; k < candidates.size(); ++k) {
    CandidateResult result;
    result.candidate = candidates[k];
    if (const WeightVariant* v = streams[k + 1].variant; v != nullptr) {
      result.weights = v->Report();
    }
    result.census = streams[k + 1].census;
    result.routing = routing_.Results(k);
    std::vector<double> kl, dp;
    std::vector<PositionMetrics> scored;
    kl.reserve(report.positions);
    scored.reserve(report.predictions);
    uint64_t top1 = 0;
    double ce = 0;
    std::vector<double> error(layers, 0), norm(layers, 0);
    for (int64_t s = 0; s < sequences_; ++s) {
      const SequenceResult& r = per_sequence_[k][s];
      top1 += r.top1;
      result.nonfinite_positions += r.nonfinite;
      ce += r.cross_entropy;
      for (int64_t l = 0; l < layers; ++l) {
        error[l] += r.layer_error[l];
        norm[l] += r.layer_norm[l];
      }
      for (int64_t t = 0; t < length_; ++t) {
        if (!Scored(t)) continue;
        const PositionMetrics& m = metrics_[k][s * length_ + t];
        kl.push_back(m.kl);
        if (t + 1 < length_) {
          dp.push_back(m.delta_p);
          scored.push_back(m);
        }
      }
    }
    result.llama_cpp = LlamaCppStatistics(scored);
    result.kl = Describe(std::move(kl));
    result.delta_p = Describe(std::move(dp));
    result.top1_agreement = static_cast<double>(top1) / static_cast<double>(report.positions);
    result.cross_entropy = predictions > 0 ? ce / predictions : NAN;
    result.perplexity = std::exp(result.cross_entropy);
    for (int64_t l = 0; l < layers; ++l) {
      result.layer_relative_rmse.push_back(norm[l] > 0 ? std::sqrt(error[l] / norm[l]) : NAN);
    }
    report.candidates.push_back(std::move(result));
  }
  return report;
}

}  // namespace lowp
