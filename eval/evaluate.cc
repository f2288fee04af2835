#include "eval/evaluate.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <numeric>

#include "absl/strings/str_cat.h"
#include "eval/logit_stats.h"
#include "kernels/thread_pool.h"
#include "model/batch.h"
#include "model/layer_reader.h"

namespace lowp {
namespace {

// A chunk of lm_head rows and of logits stays within this many bytes.
constexpr int64_t kChunkBytes = int64_t{64} << 20;

// One model run through the layers: the reference (no candidate) or a
// candidate, and what it gathers.
struct Stream {
  const EvalCandidate* candidate = nullptr;
  WeightVariant* variant = nullptr;  // null: the reference's weights
  std::vector<float> hidden;         // [batch rows, hidden_size]
  Census census;
  std::vector<LogitStats> reference_logits;  // per row (the reference)
  // The first layer this stream runs (EvalRun::share_prefix): before it,
  // its hidden state is the reference's, copied in at that layer.
  int64_t first_layer = 0;
  std::vector<CandidateStats> logits;        // per row (a candidate)
};

// What a candidate gives one sequence, merged in sequence order.
struct SequenceResult {
  std::vector<double> layer_error, layer_norm;  // sums of squares per layer
  double cross_entropy = 0;
  uint64_t top1 = 0, nonfinite = 0;
};

absl::Status CheckTokens(const ModelConfig& c, std::span<const int32_t> tokens, int64_t length) {
  if (length < 1 || tokens.empty() || tokens.size() % static_cast<size_t>(length) != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(tokens.size(), " tokens do not make sequences of ", length));
  }
  if (absl::Status s = CheckSequenceLength(c, length); !s.ok()) return s;
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (tokens[i] < 0 || tokens[i] >= c.vocab_size) {
      return absl::InvalidArgumentError(
          absl::StrCat("token ", tokens[i], " at sequence ", i / length, ", position ", i % length,
                       " is not a token id of the model (vocab_size ", c.vocab_size, ")"));
    }
  }
  return absl::OkStatus();
}

// Sequences per pass over the checkpoint: whole groups (model/batch.h).
int64_t BatchSequences(const ModelConfig& c, int64_t sequences, int64_t length, size_t streams,
                       int64_t batch_tokens) {
  if (batch_tokens <= 0) {
    // Hidden states of every stream and one stream's scratch, per token.
    const int64_t d = c.head_dim;
    const int64_t per_token =
        4 * (static_cast<int64_t>(streams) * c.hidden_size + 3 * c.hidden_size +
             (2 * c.num_heads + 2 * c.num_kv_heads) * d + 3 * c.intermediate_size);
    batch_tokens = static_cast<int64_t>(kEvalActivationBytes) / std::max<int64_t>(per_token, 1);
  }
  const std::vector<int64_t> lengths(
      static_cast<size_t>(std::min<int64_t>(sequences, 2 * kGroupRows)), length);
  const std::vector<int64_t> starts = GroupSequences(lengths, ProductGroupRows(c));
  const int64_t group = starts.size() > 1 ? starts[1] : static_cast<int64_t>(lengths.size());
  const int64_t groups = std::max<int64_t>(1, batch_tokens / (group * length));
  return std::min(sequences, groups * group);
}

class Evaluator {
 public:
  Evaluator(const Checkpoint& reference, std::span<const int32_t> tokens, int64_t length,
            const std::vector<EvalCandidate>& candidates, const EvalRun& run)
      : ref_(reference),
        c_(reference.config()),
        tokens_(tokens),
        length_(length),
        candidates_(candidates),
        run_(run),
        threads_(ResolveThreads(run.threads)),
        reader_(reference),
        sequences_(static_cast<int64_t>(tokens.size()) / length) {}

  // For ReferenceLogits: the reference's logits are kept, [tokens, vocab].
  void KeepLogits(std::vector<float>* logits) { kept_logits_ = logits; }

  absl::StatusOr<EvalReport> Run() {
    if (absl::Status s = MakeStreams(); !s.ok()) return s;
    const int64_t per_batch =
        BatchSequences(c_, sequences_, length_, streams_.size(), run_.batch_tokens);
    batches_ = (sequences_ + per_batch - 1) / per_batch;
    steps_ = batches_ * (c_.num_layers * static_cast<int64_t>(1 + variants_.size()) + 1);
    const int64_t L = c_.num_layers;
    per_sequence_.assign(candidates_.size(), std::vector<SequenceResult>(sequences_));
    for (auto& r : per_sequence_) {
      for (SequenceResult& s : r) {
        s.layer_error.assign(L, 0);
        s.layer_norm.assign(L, 0);
      }
    }
    metrics_.assign(candidates_.size(), std::vector<PositionMetrics>(tokens_.size()));
    reference_ce_.assign(sequences_, 0);
    for (auto& v : variants_) {
      if (absl::Status s = v->Prepare(threads_); !s.ok()) return s;
    }
    variant_storage_.resize(std::max<size_t>(1, variants_.size()));
    for (int64_t first = 0; first < sequences_; first += per_batch) {
      const int64_t count = std::min(per_batch, sequences_ - first);
      const bool again = first + count < sequences_;
      if (absl::Status s = RunBatch(first, count, first / per_batch, first == 0, again); !s.ok()) {
        return s;
      }
    }
    if (absl::Status s = ref_.CheckIntact(); !s.ok()) return s;
    for (const auto& v : variants_) {
      if (absl::Status s = v->CheckIntact(); !s.ok()) return s;
    }
    return Report();
  }

 private:
  // The reference stream, then one per candidate; a weight variant per
  // distinct weight spec or file.
  absl::Status MakeStreams() {
    streams_.resize(1 + candidates_.size());
    std::map<std::string, WeightVariant*> by_spec;
    for (size_t k = 0; k < candidates_.size(); ++k) {
      const EvalCandidate& cand = candidates_[k];
      Stream& s = streams_[k + 1];
      s.candidate = &cand;
      if (cand.weight_rules.empty() && cand.weights_file.empty()) continue;
      const std::string key =
          cand.weights_file.empty() ? "rules " + cand.weights : "file " + cand.weights_file;
      auto it = by_spec.find(key);
      if (it == by_spec.end()) {
        absl::StatusOr<std::unique_ptr<WeightVariant>> v =
            cand.weights_file.empty()
                ? WeightVariant::FromRules(cand.weights, cand.weight_rules, ref_, cand.importance)
                : WeightVariant::FromFile(cand.weights_file, ref_);
        if (!v.ok()) return v.status();
        variants_.push_back(*std::move(v));
        it = by_spec.emplace(key, variants_.back().get()).first;
      }
      s.variant = it->second;
    }
    for (Stream& s : streams_) {
      const bool weights_only = s.candidate != nullptr && s.candidate->emulation.empty();
      if (!run_.share_prefix || !weights_only) continue;
      s.first_layer =
          s.variant != nullptr ? s.variant->FirstChangedLayer() : c_.num_layers;
    }
    return absl::OkStatus();
  }

  void Progress(const std::string& what) {
    if (run_.progress) run_.progress(step_++, steps_, what);
  }

  absl::Status RunBatch(int64_t first_sequence, int64_t count, int64_t index, bool measure,
                        bool again) {
    const std::vector<int64_t> lengths(static_cast<size_t>(count), length_);
    const Batch batch = Batch::Make(lengths, {}, ProductGroupRows(c_));
    const std::span<const int32_t> ids = tokens_.subspan(
        static_cast<size_t>(first_sequence * length_), static_cast<size_t>(count * length_));
    const std::string where =
        batches_ > 1 ? absl::StrCat("batch ", index + 1, "/", batches_, ", ") : "";
    if (absl::Status s = Embed(batch, ids, again); !s.ok()) return s;
    // Small layers run every stream and group side by side, each on one
    // thread (all variants' layers made first); large ones one stream after
    // another with every thread on each product.
    const bool small = SmallLayer(c_);
    const std::vector<Batch> groups = small ? batch.Groups() : std::vector<Batch>{batch};
    const size_t caches = small ? streams_.size() * batch.sequences.size() : batch.sequences.size();
    std::vector<LayerKv> kv(caches);
    std::vector<LayerKv*> kv_of(kv.size());
    for (size_t i = 0; i < kv.size(); ++i) kv_of[i] = &kv[i];
    static const Emulation kNone;
    // The tasks of stream k on weights w.
    auto tasks_of = [&](size_t k, const LayerWeights& w, std::vector<LayerTask>& tasks) {
      Stream& s = streams_[k];
      const size_t kv_base = small ? k * batch.sequences.size() : 0;
      for (size_t g = 0; g < groups.size(); ++g) {
        const int64_t first_seq = small ? batch.group_starts[g] : 0;
        const int64_t first_row = batch.sequences[first_seq].first_row;
        LayerTask t;
        t.weights = &w;
        t.emulation = s.candidate != nullptr ? &s.candidate->emulation : &kNone;
        t.batch = &groups[g];
        t.hidden = std::span<float>(s.hidden).subspan(
            static_cast<size_t>(first_row * c_.hidden_size),
            static_cast<size_t>(groups[g].rows * c_.hidden_size));
        t.kv = std::span<LayerKv* const>(kv_of).subspan(kv_base + first_seq,
                                                        groups[g].sequences.size());
        t.census = &s.census;
        if (s.candidate == nullptr) t.inputs = run_.reference_inputs;
        tasks.push_back(t);
      }
    };
    // Small: every (stream, sequence) has a cache of its own; large: the
    // streams run one at a time on one set of caches.
    auto run = [&](std::vector<LayerTask>& tasks, int64_t layer) {
      absl::Status st;
      if (small) {
        for (LayerKv& cache : kv) cache.Clear();
        st = RunLayerTasks(c_, layer, tasks, buffers_, threads_);
      }
      for (size_t i = 0; i < tasks.size() && !small && st.ok(); ++i) {
        for (LayerKv& cache : kv) cache.Clear();
        st = RunLayerTasks(c_, layer, {&tasks[i], 1}, buffers_, threads_);
      }
      tasks.clear();
      return st;
    };
    std::vector<LayerTask> tasks;
    std::vector<LayerWeights> made(variants_.size());
    for (int64_t layer = 0; layer < c_.num_layers; ++layer) {
      JoinAt(layer);
      const std::string at = absl::StrCat(where, "layer ", layer + 1, "/", c_.num_layers);
      Progress(absl::StrCat(at, ": float32"));
      absl::StatusOr<const LayerWeights*> w = reader_.Layer(layer, threads_, again);
      if (!w.ok()) return w.status();
      for (size_t k = 0; k < streams_.size(); ++k) {
        if (streams_[k].variant == nullptr && layer >= streams_[k].first_layer) {
          tasks_of(k, **w, tasks);
        }
      }
      if (!small) {
        if (absl::Status st = run(tasks, layer); !st.ok()) return st;
      }
      for (size_t v = 0; v < variants_.size(); ++v) {
        Progress(absl::StrCat(at, ": ", variants_[v]->spec()));
        if (!Runs(*variants_[v], layer)) continue;
        // Small: each variant's layer kept for the side-by-side run; large:
        // one after another in one set of buffers.
        LayerStorage& storage = variant_storage_[small ? v : 0];
        absl::StatusOr<LayerWeights> vw =
            variants_[v]->Layer(layer, **w, storage, threads_, measure, again);
        if (!vw.ok()) return vw.status();
        made[v] = *std::move(vw);
        for (size_t k = 0; k < streams_.size(); ++k) {
          if (streams_[k].variant == variants_[v].get() && layer >= streams_[k].first_layer) {
            tasks_of(k, made[v], tasks);
          }
        }
        if (!small) {
          if (absl::Status st = run(tasks, layer); !st.ok()) return st;
        }
      }
      if (small) {
        if (absl::Status st = run(tasks, layer); !st.ok()) return st;
      }
      LayerErrors(batch, first_sequence, layer);
    }
    JoinAt(c_.num_layers);
    Progress(absl::StrCat(where, "lm_head"));
    return Head(batch, first_sequence, ids, measure, again);
  }

  // The streams that start at `layer` take the reference's hidden state
  // (before the layer runs).
  void JoinAt(int64_t layer) {
    for (size_t k = 1; k < streams_.size(); ++k) {
      if (streams_[k].first_layer == layer && layer > 0) streams_[k].hidden = streams_[0].hidden;
    }
  }

  // Whether any stream of variant `v` runs `layer`.
  bool Runs(const WeightVariant& v, int64_t layer) const {
    for (const Stream& s : streams_) {
      if (s.variant == &v && layer >= s.first_layer) return true;
    }
    return false;
  }

  // Each stream's embedding rows of `ids` (a variant's own, or the
  // reference's), scaled and rounded.
  absl::Status Embed(const Batch& batch, std::span<const int32_t> ids, bool again) {
    const int64_t D = c_.hidden_size;
    Stream& reference = streams_[0];
    reference.hidden.resize(static_cast<size_t>(batch.rows * D));
    std::vector<absl::Status> errors(ids.size());
    ParallelFor(ids.size(), threads_, [&](size_t i) {
      errors[i] = ref_.ReadRows(Table::kEmbedding, ids[i], 1,
                                std::span<float>(reference.hidden).subspan(i * D, D), 1);
      ref_.ReleaseRows(Table::kEmbedding, ids[i], 1, again);
    });
    for (const absl::Status& s : errors) {
      if (!s.ok()) return s;
    }
    for (size_t k = 1; k < streams_.size(); ++k) {
      Stream& s = streams_[k];
      if (s.variant != nullptr && s.variant->Changes(Table::kEmbedding)) {
        s.hidden.resize(reference.hidden.size());
        if (absl::Status st = s.variant->EmbeddingRows(ids, s.hidden, threads_, again); !st.ok()) {
          return st;
        }
      } else {
        s.hidden = reference.hidden;
      }
    }
    for (Stream& s : streams_) {
      static const Emulation kNone;
      const Emulation& e = s.candidate != nullptr ? s.candidate->emulation : kNone;
      if (absl::Status st = lowp::Embed(c_, e, s.hidden, threads_, &s.census); !st.ok()) {
        return st;
      }
    }
    return absl::OkStatus();
  }

  // ||h_q - h||^2 and ||h||^2 per sequence after `layer`.
  void LayerErrors(const Batch& batch, int64_t first_sequence, int64_t layer) {
    const int64_t D = c_.hidden_size;
    const std::vector<float>& a = streams_[0].hidden;
    ParallelFor(batch.sequences.size() * candidates_.size(), threads_, [&](size_t task) {
      const size_t s = task % batch.sequences.size(), k = task / batch.sequences.size();
      // A stream yet to start is the reference.
      const std::vector<float>& b = layer < streams_[k + 1].first_layer ? a : streams_[k + 1].hidden;
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

  // The final norm and lm_head, a chunk of vocabulary rows at a time.
  absl::Status Head(const Batch& batch, int64_t first_sequence, std::span<const int32_t> ids,
                    bool measure, bool again) {
    const int64_t D = c_.hidden_size, V = c_.vocab_size, rows = batch.rows;
    absl::StatusOr<std::span<const float>> norm = reader_.FinalNorm();
    if (!norm.ok()) return norm.status();
    for (Stream& s : streams_) {
      static const Emulation kNone;
      const Emulation& e = s.candidate != nullptr ? s.candidate->emulation : kNone;
      FinalNorm(c_, *norm, e, s.hidden, s.hidden, threads_, &s.census);
      if (s.candidate == nullptr && run_.reference_inputs != nullptr) {
        run_.reference_inputs->Add(c_.num_layers, Site::kLogits, -1,
                                   std::span<const float>(s.hidden).first(
                                       static_cast<size_t>(rows * D)),
                                   D);
      }
      s.reference_logits.assign(static_cast<size_t>(rows), LogitStats());
      s.logits.assign(static_cast<size_t>(rows), CandidateStats());
    }
    // The next token of each row (-1 at a sequence's end).
    std::vector<int64_t> next(static_cast<size_t>(rows));
    for (int64_t r = 0; r < rows; ++r) next[r] = r % length_ + 1 < length_ ? ids[r + 1] : -1;
    int64_t align = 1;
    for (auto& v : variants_) {
      if (v->Changes(Table::kLmHead)) align = std::lcm(align, v->HeadChunkRows());
    }
    int64_t chunk = run_.head_rows > 0 ? run_.head_rows
                                       : std::min(kChunkBytes / 4 / std::max<int64_t>(rows, 1),
                                                  kChunkBytes / 4 / D);
    chunk = std::min(V, std::max(align, (chunk + align - 1) / align * align));
    std::vector<float> head(static_cast<size_t>(chunk * D));
    std::vector<float> x(static_cast<size_t>(rows * chunk)), y(x.size());
    std::vector<double> old_max(static_cast<size_t>(rows));
    for (int64_t first = 0; first < V; first += chunk) {
      const int64_t count = std::min(chunk, V - first);
      std::span<float> head_rows(head.data(), static_cast<size_t>(count * D));
      if (absl::Status s = ref_.ReadRows(Table::kLmHead, first, count, head_rows, threads_);
          !s.ok()) {
        return s;
      }
      Stream& reference = streams_[0];
      float* out = kept_logits_ != nullptr
                       ? kept_logits_->data() + first_sequence * length_ * V + first
                       : x.data();
      const int64_t ldc = kept_logits_ != nullptr ? V : count;
      Logits(c_, Emulation(), batch, reference.hidden, head_rows, count, out, ldc, threads_,
             &reference.census);
      ParallelFor(static_cast<size_t>(rows), threads_, [&](size_t r) {
        old_max[r] = reference.reference_logits[r].Add(
            std::span<const float>(out + r * ldc, static_cast<size_t>(count)), first, next[r]);
      });
      // A candidate's logits of the chunk from lm_head rows `w`, into its states.
      auto candidate = [&](Stream& s, std::span<const float> w) {
        Logits(c_, s.candidate->emulation, batch, s.hidden, w, count, y.data(), count, threads_,
               &s.census);
        ParallelFor(static_cast<size_t>(rows), threads_, [&](size_t r) {
          s.logits[r].Add(std::span<const float>(out + r * ldc, static_cast<size_t>(count)),
                          std::span<const float>(y.data() + r * count, static_cast<size_t>(count)),
                          first, next[r], old_max[r], reference.reference_logits[r]);
        });
      };
      for (size_t k = 1; k < streams_.size(); ++k) {
        Stream& s = streams_[k];
        if (s.variant == nullptr || !s.variant->Changes(Table::kLmHead)) candidate(s, head_rows);
      }
      // A variant's rows are made once for all its streams.
      for (auto& v : variants_) {
        if (!v->Changes(Table::kLmHead)) continue;
        absl::StatusOr<std::span<const float>> w =
            v->HeadRows(first, count, head_rows, threads_, measure, again);
        if (!w.ok()) return w.status();
        for (size_t k = 1; k < streams_.size(); ++k) {
          if (streams_[k].variant == v.get()) candidate(streams_[k], *w);
        }
      }
      ref_.ReleaseRows(Table::kLmHead, first, count, again);
    }
    return Finish(batch, first_sequence, next);
  }

  // The batch's positions' metrics from the finished states.
  absl::Status Finish(const Batch& batch, int64_t first_sequence,
                      const std::vector<int64_t>& next) {
    const Stream& reference = streams_[0];
    for (int64_t r = 0; r < batch.rows && kept_logits_ == nullptr; ++r) {
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
    ParallelFor(candidates_.size(), threads_, [&](size_t k) {
      for (int64_t r = 0; r < batch.rows; ++r) {
        PositionMetrics m =
            FinishPosition(reference.reference_logits[r], streams_[k + 1].logits[r], next[r]);
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

  EvalReport Report() const {
    const int64_t layers = c_.num_layers;
    EvalReport report;
    report.sequences = sequences_;
    report.sequence_length = length_;
    report.scored_from = run_.scored_from;
    for (int64_t t = 0; t < length_; ++t) {
      report.positions += Scored(t) ? sequences_ : 0;
      report.predictions += Scored(t) && t + 1 < length_ ? sequences_ : 0;
    }
    report.batches = batches_;
    const double predictions = static_cast<double>(report.predictions);
    double ref_sum = 0;
    for (int64_t s = 0; s < sequences_; ++s) ref_sum += reference_ce_[s];
    report.reference_census = streams_[0].census;
    report.reference_cross_entropy = predictions > 0 ? ref_sum / predictions : NAN;
    report.reference_perplexity = std::exp(report.reference_cross_entropy);
    for (size_t k = 0; k < candidates_.size(); ++k) {
      CandidateResult result;
      result.candidate = candidates_[k];
      if (const WeightVariant* v = streams_[k + 1].variant; v != nullptr) {
        result.weights = v->Report();
      }
      result.census = streams_[k + 1].census;
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

  // Whether position t of a sequence counts in the metrics: every one, or
  // with EvalRun::scored_from, those from it to the last but one.
  bool Scored(int64_t t) const {
    return run_.scored_from < 0 || (t >= run_.scored_from && t + 1 < length_);
  }

  const Checkpoint& ref_;
  const ModelConfig& c_;
  std::span<const int32_t> tokens_;
  const int64_t length_;
  const std::vector<EvalCandidate>& candidates_;
  const EvalRun& run_;
  const int threads_;
  LayerReader reader_;
  const int64_t sequences_;
  std::vector<Stream> streams_;
  std::vector<std::unique_ptr<WeightVariant>> variants_;
  ForwardBuffers buffers_;
  std::vector<LayerStorage> variant_storage_;  // one per variant (small), or one
  int64_t batches_ = 0, steps_ = 0, step_ = 0;
  std::vector<std::vector<SequenceResult>> per_sequence_;  // [candidate][sequence]
  std::vector<std::vector<PositionMetrics>> metrics_;      // [candidate][position]
  std::vector<double> reference_ce_;                       // per sequence
  std::vector<float>* kept_logits_ = nullptr;
};

}  // namespace

absl::StatusOr<EvalReport> Evaluate(const Checkpoint& reference, std::span<const int32_t> tokens,
                                    int64_t length, const std::vector<EvalCandidate>& candidates,
                                    const EvalRun& run) {
  if (absl::Status s = CheckTokens(reference.config(), tokens, length); !s.ok()) return s;
  return Evaluator(reference, tokens, length, candidates, run).Run();
}

absl::StatusOr<std::vector<float>> ReferenceLogits(const Checkpoint& model,
                                                   std::span<const int32_t> tokens, int64_t length,
                                                   const EvalRun& run) {
  if (absl::Status s = CheckTokens(model.config(), tokens, length); !s.ok()) return s;
  std::vector<float> logits(tokens.size() * static_cast<size_t>(model.config().vocab_size));
  const std::vector<EvalCandidate> none;
  Evaluator e(model, tokens, length, none, run);
  e.KeepLogits(&logits);
  absl::StatusOr<EvalReport> r = e.Run();
  if (!r.ok()) return r.status();
  return logits;
}

}  // namespace lowp
