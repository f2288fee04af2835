#include "eval/evaluate.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <numeric>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "eval/head.h"
#include "eval/schedule.h"
#include "eval/stream.h"
#include "eval/tally.h"
#include "eval/tokens.h"
#include "eval/variant.h"
#include "kernels/thread_pool.h"
#include "model/batch.h"
#include "model/layer_reader.h"

namespace lowp {
namespace {

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

// How the layers are read: as the run says, but whole by size when a
// candidate calibrates (GPTQ and AWQ run on whole layers).
EvalRun::Reads Reads(const EvalRun& run, const std::vector<EvalCandidate>& candidates) {
  if (run.reads != EvalRun::Reads::kBySize) return run.reads;
  for (const EvalCandidate& c : candidates) {
    for (const WeightRule& r : c.weight_rules) {
      if (r.scheme != nullptr && r.calibration.active()) return EvalRun::Reads::kWhole;
    }
  }
  return run.reads;
}

// One pass over the checkpoint per batch of sequences: every stream through
// every decoder layer (read once, each variant's layer made from it), then
// the head; the sums in a Tally.
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
        reader_(reference, kResidentLayerBytes, ExpertsOneAtATime(c_, Reads(run, candidates)),
                MatricesOneAtATime(reference, Reads(run, candidates))),
        sequences_(static_cast<int64_t>(tokens.size()) / length),
        tally_(c_, sequences_, length, candidates.size(), run.scored_from) {}

  // For ReferenceLogits: the reference's logits are kept, [tokens, vocab].
  void KeepLogits(std::vector<float>* logits) { kept_logits_ = logits; }

  absl::StatusOr<EvalReport> Run() {
    if (absl::Status s = MakeStreams(); !s.ok()) return s;
    const int64_t per_batch =
        BatchSequences(c_, sequences_, length_, streams_.size(), run_.batch_tokens);
    batches_ = (sequences_ + per_batch - 1) / per_batch;
    steps_ = batches_ * (c_.num_layers * static_cast<int64_t>(1 + variants_.size()) + 1);
    for (auto& v : variants_) {
      if (absl::Status s = v->Prepare(threads_); !s.ok()) return s;
    }
    const LayerSchedule::Kind kind =
        run_.schedule == EvalRun::Schedule::kSideBySide   ? LayerSchedule::Kind::kSideBySide
        : run_.schedule == EvalRun::Schedule::kOneAtATime ? LayerSchedule::Kind::kOneAtATime
                                                          : LayerSchedule::For(c_);
    LayerSchedule schedule(kind, c_, streams_.size(), variants_.size(), threads_);
    for (int64_t first = 0; first < sequences_; first += per_batch) {
      const int64_t count = std::min(per_batch, sequences_ - first);
      const PassOptions pass{.first = first == 0, .another_follows = first + count < sequences_};
      if (absl::Status s = RunBatch(first, count, first / per_batch, pass, schedule); !s.ok()) {
        return s;
      }
    }
    if (absl::Status s = ref_.CheckIntact(); !s.ok()) return s;
    for (const auto& v : variants_) {
      if (absl::Status s = v->CheckIntact(); !s.ok()) return s;
    }
    return tally_.Report(streams_, candidates_, batches_);
  }

 private:
  // The reference stream, then one per candidate; a weight variant per
  // distinct weights (eval/candidates.h WeightsKey).
  absl::Status MakeStreams() {
    streams_.resize(1 + candidates_.size());
    streams_[0].inputs = run_.reference_inputs;
    std::map<std::string, WeightVariant*> by_key;
    for (size_t k = 0; k < candidates_.size(); ++k) {
      const EvalCandidate& cand = candidates_[k];
      Stream& s = streams_[k + 1];
      s.candidate = &cand;
      const std::string key = WeightsKey(cand);
      if (key.empty()) continue;
      auto it = by_key.find(key);
      if (it == by_key.end()) {
        absl::StatusOr<std::unique_ptr<WeightVariant>> v =
            cand.weights_file.empty()
                ? WeightVariant::FromRules(cand.weights, cand.weight_rules, ref_, cand.importance,
                                         cand.calibration)
                : WeightVariant::FromFile(cand.weights_file, ref_);
        if (!v.ok()) return v.status();
        variants_.push_back(*std::move(v));
        it = by_key.emplace(key, variants_.back().get()).first;
      }
      s.variant = it->second;
    }
    for (Stream& s : streams_) {
      const bool weights_only = s.candidate != nullptr && s.candidate->emulation.empty();
      if (!run_.share_prefix || !weights_only) continue;
      s.first_layer = s.variant != nullptr ? s.variant->FirstChangedLayer() : c_.num_layers;
    }
    return absl::OkStatus();
  }

  void Progress(const std::string& what) {
    if (run_.progress) run_.progress(step_++, steps_, what);
  }

  // Batch `index`, sequences [first_sequence, + count): the embedding,
  // every layer, the head.
  absl::Status RunBatch(int64_t first_sequence, int64_t count, int64_t index,
                        const PassOptions& pass, LayerSchedule& schedule) {
    const Batch batch = Batch::Make(std::vector<int64_t>(static_cast<size_t>(count), length_), {},
                                    ProductGroupRows(c_));
    const std::span<const int32_t> ids = tokens_.subspan(
        static_cast<size_t>(first_sequence * length_), static_cast<size_t>(count * length_));
    const std::string where =
        batches_ > 1 ? absl::StrCat("batch ", index + 1, "/", batches_, ", ") : "";
    if (absl::Status s = Embed(ids, batch.rows, pass); !s.ok()) return s;
    schedule.Begin(batch);
    std::vector<LayerWeights> made(variants_.size());  // live until the layer's flush
    for (int64_t layer = 0; layer < c_.num_layers; ++layer) {
      JoinAt(layer);
      const std::string at = absl::StrCat(where, "layer ", layer + 1, "/", c_.num_layers);
      Progress(absl::StrCat(at, ": float32"));
      absl::StatusOr<const LayerWeights*> w =
          reader_.Layer(layer, threads_, pass.another_follows);
      if (!w.ok()) return w.status();
      // A layer with experts: each stream's routes (a stream that does not
      // run the layer routes as the reference does).
      const bool moe = !(*w)->experts.empty();
      for (Stream& s : streams_) {
        if (moe) {
          s.routes.assign(static_cast<size_t>(batch.rows * c_.experts_per_token), -1);
        } else {
          s.routes.clear();
        }
      }
      if (absl::Status s = AddStreams(nullptr, **w, layer, schedule); !s.ok()) return s;
      for (size_t v = 0; v < variants_.size(); ++v) {
        Progress(absl::StrCat(at, ": ", variants_[v]->spec()));
        if (!Runs(*variants_[v], layer)) continue;
        absl::StatusOr<LayerWeights> vw = variants_[v]->Layer(
            {layer, **w, schedule.StorageFor(v), threads_, pass});
        if (!vw.ok()) return vw.status();
        made[v] = *std::move(vw);
        if (absl::Status s = AddStreams(variants_[v].get(), made[v], layer, schedule); !s.ok()) {
          return s;
        }
      }
      if (absl::Status s = schedule.Flush(layer); !s.ok()) return s;
      tally_.AddLayerErrors(batch, first_sequence, layer, streams_, threads_);
      if (moe) {
        for (Stream& s : streams_) {
          if (!s.Runs(layer)) s.routes = streams_[0].routes;
        }
        tally_.AddRouting(layer, streams_);
      }
    }
    JoinAt(c_.num_layers);
    Progress(absl::StrCat(where, "lm_head"));
    absl::StatusOr<std::span<const float>> norm = reader_.FinalNorm();
    if (!norm.ok()) return norm.status();
    const HeadRun head{.reference = ref_,
                       .final_norm = *norm,
                       .streams = streams_,
                       .variants = variants_,
                       .threads = threads_,
                       .head_rows = run_.head_rows,
                       .pass = pass,
                       .kept_logits = kept_logits_};
    std::vector<int64_t> next;
    if (absl::Status s = RunHead(head, batch, first_sequence, length_, ids, next); !s.ok()) {
      return s;
    }
    return tally_.AddPositions(batch, first_sequence, next, streams_, kept_logits_ == nullptr,
                               threads_);
  }

  // The streams on `variant`'s weights (null: the reference's) that run
  // `layer`, added to the schedule with `weights`.
  absl::Status AddStreams(const WeightVariant* variant, const LayerWeights& weights,
                          int64_t layer, LayerSchedule& schedule) {
    for (size_t k = 0; k < streams_.size(); ++k) {
      if (streams_[k].variant != variant || !streams_[k].Runs(layer)) continue;
      if (absl::Status s = schedule.Add(k, streams_[k], weights, layer); !s.ok()) return s;
    }
    return absl::OkStatus();
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
      if (s.variant == &v && s.Runs(layer)) return true;
    }
    return false;
  }

  // Each stream's embedding rows of `ids` (a variant's own, or the
  // reference's), scaled and rounded.
  absl::Status Embed(std::span<const int32_t> ids, int64_t rows, const PassOptions& pass) {
    const int64_t D = c_.hidden_size;
    Stream& reference = streams_[0];
    reference.hidden.resize(static_cast<size_t>(rows * D));
    std::vector<absl::Status> errors(ids.size());
    ParallelFor(ids.size(), threads_, [&](size_t i) {
      errors[i] = ref_.ReadRows(Table::kEmbedding, ids[i], 1,
                                std::span<float>(reference.hidden).subspan(i * D, D), 1);
      ref_.ReleaseRows(Table::kEmbedding, ids[i], 1, pass.another_follows);
    });
    for (const absl::Status& s : errors) {
      if (!s.ok()) return s;
    }
    for (size_t k = 1; k < streams_.size(); ++k) {
      Stream& s = streams_[k];
      if (s.variant != nullptr && s.variant->Changes(Table::kEmbedding)) {
        s.hidden.resize(reference.hidden.size());
        if (absl::Status st = s.variant->EmbeddingRows(ids, s.hidden, threads_, pass); !st.ok()) {
          return st;
        }
      } else {
        s.hidden = reference.hidden;
      }
    }
    for (Stream& s : streams_) {
      if (absl::Status st = lowp::Embed(c_, EmulationOf(s), s.hidden, threads_, &s.census);
          !st.ok()) {
        return st;
      }
    }
    return absl::OkStatus();
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
  int64_t batches_ = 0, steps_ = 0, step_ = 0;
  Tally tally_;
  std::vector<float>* kept_logits_ = nullptr;
};

}  // namespace

bool ExpertsOneAtATime(const ModelConfig& c, EvalRun::Reads reads) {
  if (reads != EvalRun::Reads::kBySize) return reads == EvalRun::Reads::kOneAtATime;
  const uint64_t bytes = 3 * sizeof(float) * static_cast<uint64_t>(c.num_experts) *
                         static_cast<uint64_t>(c.hidden_size) *
                         static_cast<uint64_t>(ExpertWidth(c));
  return c.num_experts > 0 && bytes > kWholeExpertBytes;
}

bool MatricesOneAtATime(const Checkpoint& checkpoint, EvalRun::Reads reads) {
  if (reads != EvalRun::Reads::kBySize) return reads == EvalRun::Reads::kOneAtATime;
  // The largest layer's matrices other than its routed experts.
  const ModelConfig& c = checkpoint.config();
  std::vector<uint64_t> bytes(static_cast<size_t>(c.num_layers), 0);
  for (const TensorView& m : checkpoint.MatrixShapes()) {
    const int64_t layer = DecoderLayerOf(m.name);
    if (layer < 0 || layer >= c.num_layers || absl::StrContains(m.name, ".experts.")) continue;
    bytes[static_cast<size_t>(layer)] += sizeof(float) * static_cast<uint64_t>(m.elements());
  }
  return !bytes.empty() && *std::max_element(bytes.begin(), bytes.end()) > kWholeMatrixBytes;
}

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
