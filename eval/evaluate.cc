#include "eval/evaluate.h"

#include <cmath>
#include <map>
#include <mutex>

#include "absl/strings/str_cat.h"
#include "kernels/thread_pool.h"

namespace lowp {
namespace {

// What one sequence gives one candidate, merged in sequence order.
struct SequenceResult {
  std::vector<double> layer_error, layer_norm;  // sums of squares per layer
  Census census;
  double cross_entropy = 0;
  uint64_t top1 = 0, nonfinite = 0;
};

}  // namespace

absl::StatusOr<EvalReport> Evaluate(const ModelWeights& reference,
                                    std::span<const int32_t> tokens, int64_t length,
                                    const std::vector<EvalCandidate>& candidates, int threads,
                                    const EvalProgress& progress) {
  const ModelConfig& c = reference.config;
  if (length < 1 || tokens.empty() || tokens.size() % static_cast<size_t>(length) != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(tokens.size(), " tokens do not make sequences of ", length));
  }
  const int64_t sequences = static_cast<int64_t>(tokens.size()) / length;
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (tokens[i] < 0 || tokens[i] >= c.vocab_size) {
      return absl::InvalidArgumentError(absl::StrCat(
          "token ", tokens[i], " at sequence ", i / length, ", position ", i % length,
          " is not a token id of the model (vocab_size ", c.vocab_size, ")"));
    }
  }
  // Each distinct weight spec quantized once.
  std::map<std::string, std::pair<ModelWeights, WeightReport>> weights;
  for (const EvalCandidate& candidate : candidates) {
    if (candidate.weight_rules.empty() || weights.count(candidate.weights) > 0) continue;
    WeightReport report;
    absl::StatusOr<ModelWeights> q =
        QuantizeWeights(reference, candidate.weight_rules, threads, &report);
    if (!q.ok()) return q.status();
    weights.emplace(candidate.weights, std::make_pair(*std::move(q), std::move(report)));
  }
  const size_t n_cand = candidates.size();
  const size_t positions = tokens.size();
  const int64_t V = c.vocab_size, layers = c.num_layers;
  // Per candidate and position; per candidate and sequence.
  std::vector<std::vector<PositionMetrics>> metrics(n_cand, std::vector<PositionMetrics>(positions));
  std::vector<std::vector<SequenceResult>> per_seq(n_cand,
                                                   std::vector<SequenceResult>(sequences));
  std::vector<double> ref_ce(sequences, 0);
  std::vector<Census> ref_census(sequences);
  std::vector<absl::Status> errors(sequences);
  std::mutex progress_mutex;
  int64_t done = 0;

  ParallelFor(static_cast<size_t>(sequences), ResolveThreads(threads), [&](size_t s) {
    std::span<const int32_t> seq = tokens.subspan(s * length, length);
    std::vector<float> ref_logits(static_cast<size_t>(length * V)), logits(ref_logits.size());
    LayerTrace ref_trace, trace;
    KvCache cache;
    absl::Status status =
        Forward(reference, {}, seq, cache, ref_logits, &ref_census[s], &ref_trace);
    if (!status.ok()) {
      errors[s] = status;
      return;
    }
    // The reference's argmax and cross-entropy per position; its
    // log-probabilities are recomputed per candidate from its logits, so
    // that a sequence holds logits, not [length, vocab] doubles.
    std::vector<int64_t> ref_top(length);
    std::vector<double> ref_logp;
    for (int64_t t = 0; t < length; ++t) {
      std::span<const float> row(ref_logits.data() + t * V, V);
      if (!LogSoftmax(row, ref_logp)) {
        errors[s] = absl::InternalError(absl::StrCat(
            "the float32 reference gives a non-finite logit at sequence ", s, ", position ", t));
        return;
      }
      ref_top[t] = ArgMax(row);
      if (t + 1 < length) ref_ce[s] -= ref_logp[seq[t + 1]];
    }
    std::vector<double> scratch;
    for (size_t k = 0; k < n_cand; ++k) {
      const EvalCandidate& candidate = candidates[k];
      const ModelWeights& w = candidate.weight_rules.empty()
                                  ? reference
                                  : weights.at(candidate.weights).first;
      SequenceResult& r = per_seq[k][s];
      KvCache kv;
      status = Forward(w, candidate.emulation, seq, kv, logits, &r.census, &trace);
      if (!status.ok()) {
        errors[s] = status;
        return;
      }
      for (int64_t t = 0; t < length; ++t) {
        const int64_t next = t + 1 < length ? seq[t + 1] : -1;
        LogSoftmax(std::span<const float>(ref_logits.data() + t * V, V), ref_logp);
        PositionMetrics m = ComparePosition(
            ref_logp, ref_top[t], std::span<const float>(logits.data() + t * V, V), next,
            scratch);
        r.top1 += m.top1;
        r.nonfinite += !m.finite;
        if (next >= 0) r.cross_entropy += m.ce_candidate;
        metrics[k][s * length + t] = m;
      }
      r.layer_error.assign(layers, 0);
      r.layer_norm.assign(layers, 0);
      for (int64_t l = 0; l < layers; ++l) {
        const std::vector<float>& a = ref_trace.hidden[l];
        const std::vector<float>& b = trace.hidden[l];
        for (size_t i = 0; i < a.size(); ++i) {
          const double e = static_cast<double>(b[i]) - a[i];
          r.layer_error[l] += e * e;
          r.layer_norm[l] += static_cast<double>(a[i]) * a[i];
        }
      }
    }
    if (progress) {
      std::lock_guard<std::mutex> lock(progress_mutex);
      progress(++done, sequences);
    }
  });
  for (const absl::Status& s : errors) {
    if (!s.ok()) return s;
  }

  EvalReport report;
  report.sequences = sequences;
  report.sequence_length = length;
  report.positions = positions;
  report.predictions = static_cast<uint64_t>(sequences * (length - 1));
  const double predictions = static_cast<double>(report.predictions);
  double ref_sum = 0;
  for (int64_t s = 0; s < sequences; ++s) {
    ref_sum += ref_ce[s];
    report.reference_census.Merge(ref_census[s]);
  }
  report.reference_cross_entropy = predictions > 0 ? ref_sum / predictions : NAN;
  report.reference_perplexity = std::exp(report.reference_cross_entropy);
  for (size_t k = 0; k < n_cand; ++k) {
    CandidateResult result;
    result.candidate = candidates[k];
    if (!candidates[k].weight_rules.empty()) {
      result.weights = weights.at(candidates[k].weights).second;
    }
    std::vector<double> kl, dp;
    kl.reserve(positions);
    uint64_t top1 = 0;
    double ce = 0;
    std::vector<double> error(layers, 0), norm(layers, 0);
    for (int64_t s = 0; s < sequences; ++s) {
      const SequenceResult& r = per_seq[k][s];
      top1 += r.top1;
      result.nonfinite_positions += r.nonfinite;
      ce += r.cross_entropy;
      result.census.Merge(r.census);
      for (int64_t l = 0; l < layers; ++l) {
        error[l] += r.layer_error[l];
        norm[l] += r.layer_norm[l];
      }
      for (int64_t t = 0; t < length; ++t) {
        const PositionMetrics& m = metrics[k][s * length + t];
        kl.push_back(m.kl);
        if (t + 1 < length) dp.push_back(m.delta_p);
      }
    }
    result.kl = Describe(std::move(kl));
    result.delta_p = Describe(std::move(dp));
    result.top1_agreement = static_cast<double>(top1) / static_cast<double>(positions);
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
