// A candidate's weights by rule (eval/variant.h): each matrix a WeightRule
// takes quantized with its scheme, or the choice a recipe makes for it, and
// dequantized.
#include <algorithm>
#include <map>
#include <mutex>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "eval/calibrator.h"
#include "eval/variant.h"
#include "eval/variant_parts.h"
#include "kernels/thread_pool.h"
#include "model/expert_pool.h"
#include "quant/recipe.h"

namespace lowp {
namespace {

// A chunk's stored form appended to the matrix's so far.
void Append(const StoredChunk& piece, StoredChunk& to) {
  to.bytes.insert(to.bytes.end(), piece.bytes.begin(), piece.bytes.end());
  to.scales.insert(to.scales.end(), piece.scales.begin(), piece.scales.end());
  to.offsets.insert(to.offsets.end(), piece.offsets.begin(), piece.offsets.end());
  to.tensor_scale = piece.tensor_scale;
}

using variant_parts::CompareInto;
using variant_parts::ExpertEntries;
using variant_parts::MatrixEntries;
using variant_parts::kEmbeddingKey;
using variant_parts::kHeadKey;
using variant_parts::LayerKey;

// The decoder layer of a matrix named "model.layers.N.<...>", kNoLayer for
// the embedding and lm_head, -1 for any other name (taken as layer 0).
constexpr int64_t kNoLayer = -2;
int64_t LayerOf(absl::string_view name) {
  constexpr absl::string_view kPrefix = "model.layers.";
  if (!absl::ConsumePrefix(&name, kPrefix)) {
    return name == "model.embed_tokens.weight" || name == "lm_head.weight" ? kNoLayer : -1;
  }
  int64_t layer = 0;
  const size_t dot = name.find('.');
  if (dot == absl::string_view::npos || !absl::SimpleAtoi(name.substr(0, dot), &layer)) return -1;
  return layer;
}

class RuleVariant : public WeightVariant {
 public:
  RuleVariant(std::string spec, std::vector<WeightRule> rules, const Checkpoint& reference,
              std::shared_ptr<const ImportanceMap> importance,
              std::shared_ptr<const CalibrationTokens> calibration)
      : WeightVariant(std::move(spec)),
        rules_(std::move(rules)),
        reference_(reference),
        importance_(std::move(importance)) {
    for (const WeightRule& r : rules_) {
      if (r.scheme != nullptr && r.calibration.active() && calibration != nullptr) {
        calibrator_ = std::make_unique<LayerCalibrator>(reference, calibration);
        break;
      }
    }
    const std::vector<TensorView> shapes = reference.MatrixShapes();
    model_ = RecipeModel::Of(shapes);
    model_.has_imatrix = importance_ != nullptr;
    const ModelConfig& c = reference.config();
    for (Table table : {Table::kEmbedding, Table::kLmHead}) {
      TableScheme& t = tables_[static_cast<int>(table)];
      if (table == Table::kLmHead && c.tie_word_embeddings) {
        t = tables_[0];  // the embedding's values serve as lm_head
        continue;
      }
      const std::string name = reference.TableName(table);
      t.view = F32View(name, c.vocab_size, c.hidden_size, {});
      if (const WeightRule* rule = RuleFor(rules_, name, false);
          rule != nullptr && rule->scheme != nullptr) {
        t.rule = rule->scheme.get();
        t.scheme = &SchemeForTensor(*rule->scheme, t.view, model_, &t.choice);
      }
    }
    first_changed_ = tables_[0].scheme != nullptr ? 0 : c.num_layers;
    for (const TensorView& m : shapes) {
      if (first_changed_ == 0) break;
      const int64_t layer = LayerOf(m.name);
      if (layer == kNoLayer) continue;  // the tables, handled above
      // Every matrix counted as linear: a pattern-less rule then also takes
      // a router, which only makes the first change earlier (still exact).
      const WeightRule* rule = RuleFor(rules_, m.name, /*linear=*/true);
      if (rule != nullptr && rule->scheme != nullptr) {
        first_changed_ = std::min(first_changed_, layer < 0 ? 0 : layer);
      }
    }
  }

  // A calibrated variant's calibration runs through every layer.
  int64_t FirstChangedLayer() const override { return calibrator_ != nullptr ? 0 : first_changed_; }

  absl::Status Prepare(int threads) override { return Prepare(threads, true); }
  absl::Status PrepareForTableBytes(int threads) override { return Prepare(threads, false); }

  absl::Status Prepare(int threads, bool embedding_statistics) {
    for (const WeightRule& r : rules_) {
      if (r.scheme != nullptr && r.calibration.active() && calibrator_ == nullptr) {
        return absl::InvalidArgumentError(absl::StrCat(
            "'", r.scheme->name(), r.calibration.Suffix(), "' needs calibration tokens"));
      }
    }
    // llama-quantize's refusal, before any work: a mix that gives a matrix a
    // type it makes only with an imatrix.
    for (const TensorView& m : reference_.MatrixShapes()) {
      const bool linear = LayerOf(m.name) != kNoLayer && !IsRouter(m.name);
      const WeightRule* rule = RuleFor(rules_, m.name, linear);
      if (rule == nullptr || rule->scheme == nullptr) continue;
      RecipeChoice choice;
      SchemeForTensor(*rule->scheme, m, model_, &choice);
      if (absl::Status s = CheckImatrixRequirement(*rule->scheme, choice, m.name,
                                                   importance_ != nullptr);
          !s.ok()) {
        return s;
      }
    }
    MeasureOptions options;
    options.threads = threads;
    options.importance = importance_;
    // Whole passes over a table: its pages leave this process's memory
    // batch by batch (the page cache keeps them for the rows read later).
    options.release = [this](std::span<const uint8_t> bytes) {
      reference_.set().Release(bytes, /*keep_cached=*/true);
    };
    for (int i = 0; i < 2; ++i) {
      TableScheme& t = tables_[i];
      if (t.scheme == nullptr) continue;
      const TensorView& stored = reference_.TableView(static_cast<Table>(i));
      absl::StatusOr<TensorContext> context = ObserveTensor(stored, *t.scheme, options);
      if (!context.ok()) return context.status();
      t.context = *context;
    }
    // An untied embedding is not otherwise read whole: its statistics in a
    // pass of their own (a tied one's come with lm_head's chunks).
    const TableScheme& e = tables_[0];
    if (embedding_statistics && e.scheme != nullptr && !reference_.config().tie_word_embeddings) {
      absl::StatusOr<QuantReport> r =
          MeasureTensor(reference_.TableView(Table::kEmbedding), *e.scheme, options);
      if (!r.ok()) return r.status();
      r->tensor = e.view.name;
      r->dtype = "F32";
      Keep(kEmbeddingKey, *e.rule, e.choice, *std::move(r));
    }
    return absl::OkStatus();
  }

  absl::StatusOr<LayerWeights> Layer(const LayerRequest& request) override {
    LayerWeights out = request.reference;
    std::vector<LayerWeights::Entry> entries = out.Matrices(reference_.config());
    const bool keep_stored = request.storage.keep_stored;
    if (keep_stored) {
      for (size_t j = 0; j < entries.size(); ++j) request.storage.Stored(j);
    }
    MeasureOptions options;
    options.threads = request.threads;
    options.importance = importance_;
    std::vector<LayerCalibrator::Target> targets;
    std::vector<RecipeChoice> target_choices;
    const bool experts_later = request.reference.expert_source != nullptr;
    const bool matrices_later = request.reference.matrix_source != nullptr;
    for (size_t j = 0; j < entries.size(); ++j) {
      Matrix& m = *entries[j].matrix;
      const WeightRule* rule = RuleFor(rules_, m.name, entries[j].linear);
      if (rule == nullptr || rule->scheme == nullptr) continue;
      // Read one at a time: made as the forward pass loads it.
      if ((experts_later || matrices_later) && m.values.empty()) continue;
      const TensorView view = F32View(m.name, m.rows, m.cols, m.values);
      RecipeChoice choice;
      const Scheme& scheme = SchemeForTensor(*rule->scheme, view, model_, &choice);
      // A tensor a recipe keeps in a float type (f16 where llama.cpp has no
      // fallback for its width, f32) is stored as the recipe says: there
      // are no codes for GPTQ or AWQ to choose.
      const bool kept_float = choice.scheme == "f16" || choice.scheme == "f32";
      if (rule->calibration.active() && !kept_float) {  // after the others, in Calibrate
        targets.push_back({j, &scheme, rule->calibration});
        target_choices.push_back(std::move(choice));
        continue;
      }
      // A caller of bytes or statistics alone needs no values; a
      // calibrating variant does (it runs the layer on the quantized
      // matrices).
      const bool values = !(request.storage.values_unused && calibrator_ == nullptr);
      std::span<float> q = values ? request.storage.Buffer(j, m.values.size()) : std::span<float>();
      size_t written = 0;
      QuantReport report;
      const auto to_values = [&](std::span<const float> piece) {
        if (values) std::copy(piece.begin(), piece.end(), q.begin() + static_cast<ptrdiff_t>(written));
        written += piece.size();
        return absl::OkStatus();
      };
      StoredChunk* kept = keep_stored ? &request.storage.Stored(j) : nullptr;
      const StoredSink to_stored = [kept](StoredChunk& piece) {
        Append(piece, *kept);
        return absl::OkStatus();
      };
      absl::Status s = kept != nullptr
                           ? QuantizeTensor(view, scheme, options, to_values, &report, to_stored)
                           : QuantizeTensor(view, scheme, options, to_values, &report);
      if (!s.ok()) return s;
      if (values) m.values = q;
      m.stored_type = scheme.GgmlLayout(m.cols);
      if (request.pass.first) {
        Keep(LayerKey(request.layer, j), *rule->scheme, choice, std::move(report));
      }
    }
    if ((experts_later || matrices_later) && calibrator_ != nullptr) {
      return absl::InvalidArgumentError(absl::StrCat(
          "'", spec(), "': calibrated rules (GPTQ, AWQ) on matrices read one at a time are not "
          "built; evaluate with matrices read whole"));
    }
    // Their buffers come from the request's storage, which the variants run
    // one after another share: one matrix's or expert's at a time.
    if (experts_later) {
      if (request.storage.expert_pool == nullptr) request.storage.expert_pool = ExpertPool::Make();
      out.expert_source = std::make_shared<RuleExperts>(
          *this, request.reference.expert_source, request.layer, ExpertEntries(out, entries),
          request.pass.first, request.storage.expert_pool);
    }
    if (matrices_later) {
      if (request.storage.matrix_pool == nullptr) request.storage.matrix_pool = MatrixPool::Make();
      out.matrix_source = std::make_shared<RuleMatrices>(
          *this, request.reference.matrix_source, request.layer, MatrixEntries(entries),
          request.pass.first, request.storage.matrix_pool);
    }
    if (calibrator_ != nullptr) {
      if (absl::Status s = Calibrate(request, out, targets, target_choices); !s.ok()) return s;
    }
    return out;
  }

  // A rule variant's experts made one at a time from the reference's as the
  // forward pass loads them: each matrix a rule takes quantized as Layer
  // quantizes the others, its statistics kept in the first pass.
  class RuleExperts : public ExpertSource {
   public:
    RuleExperts(RuleVariant& variant, std::shared_ptr<const ExpertSource> reference,
                int64_t layer, std::vector<size_t> entries, bool first,
                std::shared_ptr<ExpertPool> pool)
        : variant_(variant),
          reference_(std::move(reference)),
          layer_(layer),
          entries_(std::move(entries)),
          first_(first),
          pool_(std::move(pool)) {}

    absl::StatusOr<std::shared_ptr<const LoadedExpert>> Load(int64_t e,
                                                             int threads) const override {
      absl::StatusOr<std::shared_ptr<const LoadedExpert>> ref = reference_->Load(e, threads);
      if (!ref.ok()) return ref.status();
      std::shared_ptr<LoadedExpert> out = pool_->Get();
      out->matrices = (*ref)->matrices;  // views into `ref`'s buffers until replaced
      out->from = *ref;
      Matrix* ms[] = {&out->matrices.gate, &out->matrices.up, &out->matrices.down};
      int replaced = 0;
      for (size_t k = 0; k < 3; ++k) {
        absl::StatusOr<bool> done = variant_.QuantizeLoaded(
            *ms[k], /*linear=*/true, out->storage, k, threads,
            LayerKey(layer_, entries_[static_cast<size_t>(e)] + k), first_);
        if (!done.ok()) return done.status();
        replaced += *done;
      }
      // The reference's buffers go back to its pool as soon as nothing views
      // them (gpt-oss's biases do).
      const bool biases = !out->matrices.gate.bias.empty();
      if (replaced == 3 && !biases) out->from.reset();
      return std::shared_ptr<const LoadedExpert>(std::move(out));
    }

   private:
    RuleVariant& variant_;
    std::shared_ptr<const ExpertSource> reference_;
    const int64_t layer_;
    const std::vector<size_t> entries_;
    const bool first_;
    std::shared_ptr<ExpertPool> pool_;
  };

  // A matrix loaded one at a time (RuleExperts, RuleMatrices): `m` quantized
  // by the rule that takes it into buffer `index` of `storage` (m then views
  // it), its statistics kept under `key` when `keep`. False: no rule takes
  // it (m left as it is).
  absl::StatusOr<bool> QuantizeLoaded(Matrix& m, bool linear, LayerStorage& storage,
                                      size_t index, int threads, int64_t key, bool keep) {
    const WeightRule* rule = RuleFor(rules_, m.name, linear);
    if (rule == nullptr || rule->scheme == nullptr) return false;
    const TensorView view = F32View(m.name, m.rows, m.cols, m.values);
    RecipeChoice choice;
    const Scheme& scheme = SchemeForTensor(*rule->scheme, view, model_, &choice);
    MeasureOptions options;
    options.threads = threads;
    options.importance = importance_;
    std::span<float> q = storage.Buffer(index, m.values.size());
    size_t written = 0;
    QuantReport report;
    absl::Status s = QuantizeTensor(view, scheme, options, [&](std::span<const float> piece) {
      std::copy(piece.begin(), piece.end(), q.begin() + static_cast<ptrdiff_t>(written));
      written += piece.size();
      return absl::OkStatus();
    }, &report);
    if (!s.ok()) return s;
    m.values = q;
    m.stored_type = scheme.GgmlLayout(m.cols);
    if (keep) {
      std::lock_guard<std::mutex> lock(keep_mutex_);
      Keep(key, *rule->scheme, choice, std::move(report));
    }
    return true;
  }

  // A rule variant's other matrices made one at a time from the
  // reference's as the forward pass loads them.
  class RuleMatrices : public MatrixSource {
   public:
    // `entries`: each matrix's place among the layer's and whether it is a
    // linear layer's, by name.
    RuleMatrices(RuleVariant& variant, std::shared_ptr<const MatrixSource> reference,
                 int64_t layer, std::map<std::string, std::pair<size_t, bool>> entries,
                 bool first, std::shared_ptr<MatrixPool> pool)
        : variant_(variant),
          reference_(std::move(reference)),
          layer_(layer),
          entries_(std::move(entries)),
          first_(first),
          pool_(std::move(pool)) {}

    absl::StatusOr<std::shared_ptr<const LoadedMatrix>> Load(const Matrix& m,
                                                             int threads) const override {
      absl::StatusOr<std::shared_ptr<const LoadedMatrix>> ref = reference_->Load(m, threads);
      if (!ref.ok()) return ref.status();
      const auto it = entries_.find(m.name);
      if (it == entries_.end()) return absl::InternalError(absl::StrCat("no matrix ", m.name));
      std::shared_ptr<LoadedMatrix> out = pool_->Get();
      out->matrix = (*ref)->matrix;
      absl::StatusOr<bool> done =
          variant_.QuantizeLoaded(out->matrix, it->second.second, out->storage, 0, threads,
                                  LayerKey(layer_, it->second.first), first_);
      if (!done.ok()) return done.status();
      if (!*done) return ref;  // no rule takes it: the reference's
      return std::shared_ptr<const LoadedMatrix>(std::move(out));
    }

   private:
    RuleVariant& variant_;
    std::shared_ptr<const MatrixSource> reference_;
    const int64_t layer_;
    const std::map<std::string, std::pair<size_t, bool>> entries_;
    const bool first_;
    std::shared_ptr<MatrixPool> pool_;
  };

  bool Changes(Table table) const override {
    return tables_[static_cast<int>(table)].scheme != nullptr;
  }

  absl::Status EmbeddingRows(std::span<const int32_t> ids, std::span<float> out, int threads,
                             const PassOptions& pass) override {
    const TableScheme& t = tables_[0];
    const int64_t D = reference_.config().hidden_size;
    // Whole groups of ChunkRows rows (NF4's double quantization spans rows).
    const int64_t group = std::max<int64_t>(1, t.scheme->ChunkRows(D));
    const int64_t V = reference_.config().vocab_size;
    std::vector<absl::Status> errors(ids.size());
    ParallelFor(ids.size(), threads, [&](size_t i) {
      const int64_t first = ids[i] / group * group, rows = std::min(group, V - first);
      thread_local std::vector<float> x, q;
      x.resize(static_cast<size_t>(rows * D));
      q.resize(x.size());
      errors[i] = reference_.ReadRows(Table::kEmbedding, first, rows, x, 1);
      if (!errors[i].ok()) return;
      reference_.ReleaseRows(Table::kEmbedding, first, rows, pass.another_follows);
      MeasureOptions options;
      options.threads = 1;
      errors[i] = QuantizeWindow(F32View(t.view.name, rows, D, x), first, *t.scheme, t.context,
                                 options, q, nullptr);
      if (!errors[i].ok()) return;
      std::copy_n(q.data() + (ids[i] - first) * D, D, out.data() + static_cast<int64_t>(i) * D);
    });
    for (const absl::Status& s : errors) {
      if (!s.ok()) return s;
    }
    return absl::OkStatus();
  }

  const ggml::TypeInfo* HeadType() const override {
    const TableScheme& t = tables_[1];
    return t.scheme != nullptr ? t.scheme->GgmlLayout(reference_.config().hidden_size) : nullptr;
  }

  absl::Status TableBytes(Table table, int threads, const ByteSink& bytes) override {
    const TableScheme& t = tables_[static_cast<int>(table)];
    if (t.scheme == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat(reference_.TableName(table), ": no rule of '", spec(), "' changes it"));
    }
    MeasureOptions options;
    options.threads = threads;
    options.importance = importance_;
    options.release = [this](std::span<const uint8_t> b) {
      reference_.set().Release(b, /*keep_cached=*/false);
    };
    QuantReport report;
    absl::Status s = QuantizeTensor(
        reference_.TableView(table), *t.scheme, options,
        [](std::span<const float>) { return absl::OkStatus(); }, &report, &bytes);
    if (!s.ok()) return s;
    report.tensor = t.view.name;
    report.dtype = "F32";
    const bool head = table == Table::kLmHead && !reference_.config().tie_word_embeddings;
    Keep(head ? kHeadKey : kEmbeddingKey, *t.rule, t.choice, std::move(report));
    return absl::OkStatus();
  }

  absl::StatusOr<std::span<const float>> HeadRows(int64_t first, int64_t count,
                                                  std::span<const float> reference_rows,
                                                  int threads, const PassOptions& pass) override {
    const bool measure = pass.first;
    TableScheme& t = tables_[1];
    const int64_t D = reference_.config().hidden_size;
    head_.resize(reference_rows.size());
    MeasureOptions options;
    options.threads = threads;
    options.importance = importance_;
    if (measure && first == 0) head_report_ = StartReport(t.view, *t.scheme);
    absl::Status s =
        QuantizeWindow(F32View(t.view.name, count, D, reference_rows), first, *t.scheme, t.context,
                       options, head_, measure ? &head_report_ : nullptr);
    if (!s.ok()) return s;
    if (measure && first + count == reference_.config().vocab_size) {
      const int64_t key = reference_.config().tie_word_embeddings ? kEmbeddingKey : kHeadKey;
      head_report_.dtype = "F32";
      Keep(key, *t.rule, t.choice, std::move(head_report_));
    }
    return std::span<const float>(head_);
  }

  int64_t HeadChunkRows() const override {
    const TableScheme& t = tables_[1];
    return t.scheme == nullptr ? 1 : QuantizeWindowRows(reference_.config().hidden_size, *t.scheme);
  }

 private:
  struct TableScheme {
    TensorView view;                 // name and shape
    const Scheme* rule = nullptr;    // the rule's scheme (a recipe, say)
    const Scheme* scheme = nullptr;  // what it applies to this table
    RecipeChoice choice;
    TensorContext context;
  };

  // GPTQ or AWQ for the layer's calibrated matrices (eval/calibrator.h), the
  // calibration started over at layer 0 of every pass (the same values).
  absl::Status Calibrate(const LayerRequest& request, LayerWeights& out,
                         std::span<const LayerCalibrator::Target> targets,
                         std::span<const RecipeChoice> choices) {
    if (request.layer == 0) {
      const auto embed = [&](std::span<const int32_t> ids, std::span<float> rows) {
        if (Changes(Table::kEmbedding)) {
          return EmbeddingRows(ids, rows, request.threads, {});
        }
        const int64_t D = reference_.config().hidden_size;
        for (size_t i = 0; i < ids.size(); ++i) {
          if (absl::Status s = reference_.ReadRows(Table::kEmbedding, ids[i], 1,
                                                   rows.subspan(i * D, D), request.threads);
              !s.ok()) {
            return s;
          }
        }
        return absl::OkStatus();
      };
      if (absl::Status s = calibrator_->Start(embed, request.threads); !s.ok()) return s;
    }
    std::vector<LayerWeights::Entry> entries = out.Matrices(reference_.config());
    std::vector<std::span<const float>> originals;
    for (const LayerCalibrator::Target& t : targets) originals.push_back(entries[t.entry].matrix->values);
    if (absl::Status s = calibrator_->Layer(request.layer, out, targets, request.storage,
                                            request.threads);
        !s.ok()) {
      return s;
    }
    if (!request.pass.first) return absl::OkStatus();
    entries = out.Matrices(reference_.config());
    for (size_t k = 0; k < targets.size(); ++k) {
      const Matrix& m = *entries[targets[k].entry].matrix;
      QuantReport report = StartReport(F32View(m.name, m.rows, m.cols, {}), *targets[k].scheme);
      report.dtype = "F32";
      const std::span<const float> effective = calibrator_->Effective(k);
      CompareInto(originals[k], effective.empty() ? m.values : effective, m.cols,
                  request.threads, report.stats);
      const WeightRule* rule = RuleFor(rules_, m.name, entries[targets[k].entry].linear);
      Keep(LayerKey(request.layer, targets[k].entry), *rule->scheme, choices[k], std::move(report),
           rule->calibration);
    }
    return absl::OkStatus();
  }

  void Keep(int64_t key, const Scheme& rule, const RecipeChoice& choice, QuantReport report,
            const Calibration& calibration = {}) {
    NameForRecipe(rule, choice, report);
    const std::string name = absl::StrCat(rule.name(), calibration.Suffix());
    if (calibration.active()) absl::StrAppend(&report.scheme, calibration.Suffix());
    if (scheme_names_.empty()) {
      scheme_names_ = name;
    } else if (scheme_names_ != name) {
      scheme_names_ = "mixed";
    }
    reports_[key] = std::move(report);
  }

  std::vector<WeightRule> rules_;
  const Checkpoint& reference_;
  RecipeModel model_;
  std::shared_ptr<const ImportanceMap> importance_;
  TableScheme tables_[2];
  std::vector<float> head_;
  QuantReport head_report_;
  int64_t first_changed_ = 0;
  std::unique_ptr<LayerCalibrator> calibrator_;  // when a rule calibrates
  std::mutex keep_mutex_;  // Keep from RuleExperts::Load, on the forward pass's threads
};

}  // namespace

absl::StatusOr<std::unique_ptr<WeightVariant>> WeightVariant::FromRules(
    std::string spec, std::vector<WeightRule> rules, const Checkpoint& reference,
    std::shared_ptr<const ImportanceMap> importance,
    std::shared_ptr<const CalibrationTokens> calibration) {
  return std::unique_ptr<WeightVariant>(new RuleVariant(std::move(spec), std::move(rules),
                                                        reference, std::move(importance),
                                                        std::move(calibration)));
}

int64_t DecoderLayerOf(absl::string_view name) {
  const int64_t layer = LayerOf(name);
  return layer == kNoLayer ? -1 : layer;
}

std::vector<RuleMatch> MatricesByRule(const Checkpoint& reference,
                                      std::span<const WeightRule> rules, bool with_importance) {
  const std::vector<TensorView> shapes = reference.MatrixShapes();
  RecipeModel model = RecipeModel::Of(shapes);
  model.has_imatrix = with_importance;
  std::vector<RuleMatch> out;
  for (const TensorView& m : shapes) {
    const WeightRule* rule = RuleFor(rules, m.name, LayerOf(m.name) != kNoLayer && !IsRouter(m.name));
    if (rule == nullptr || rule->scheme == nullptr) continue;
    out.push_back({m, &SchemeForTensor(*rule->scheme, m, model), rule});
  }
  return out;
}

}  // namespace lowp
