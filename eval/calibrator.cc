#include "eval/calibrator.h"

#include <algorithm>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "calib/awq.h"
#include "calib/smooth.h"
#include "calib/gptq.h"
#include "calib/hessian.h"

namespace lowp {
namespace {

// The stages of a dense layer, in the order it computes them: the site
// whose input each stage's matrices multiply.
enum class Stage { kQkv, kO, kGateUp, kDown, kNone };

Stage StageOf(const LayerWeights& w, const Matrix* m) {
  if (m == &w.q || m == &w.k || m == &w.v) return Stage::kQkv;
  if (m == &w.o) return Stage::kO;
  if (m == &w.gate || m == &w.up) return Stage::kGateUp;
  if (m == &w.down) return Stage::kDown;
  return Stage::kNone;
}

Site InputSite(Stage stage) {
  switch (stage) {
    case Stage::kQkv:
      return Site::kQProj;
    case Stage::kO:
      return Site::kOProj;
    case Stage::kGateUp:
      return Site::kGateProj;
    default:
      return Site::kDownProj;
  }
}

// Gathers the Hessian of one site's input (q, k and v report the same input
// three times, gate and up twice: the first site of each counts).
class StageInputs final : public LinearInputs {
 public:
  StageInputs(int64_t layer, Site site, int64_t cols, int threads)
      : layer_(layer), site_(site), hessian_(cols), threads_(threads) {}

  void Add(int64_t layer, Site site, int64_t expert, std::span<const float> in,
           int64_t cols) override {
    if (layer != layer_ || site != site_ || expert >= 0 || cols != hessian_.dim()) return;
    hessian_.Add(in, threads_);
  }

  const Hessian& hessian() const { return hessian_; }

 private:
  int64_t layer_;
  Site site_;
  Hessian hessian_;
  int threads_;
};

// GPTQ inside one run of the layer: when the input of a stage whose
// matrices are targets reaches its first product (LinearInputs are called
// before the product reads the weights), the stage's Hessian is gathered
// from it, GPTQ quantizes the stage's targets (one factor of H per column
// order they ask for) and their views are set to the stored values, so the
// stage's products and every later stage run on them: each stage sees the
// inputs the quantized stages before it give, as GPTQ's sequential mode
// does, in one forward of the layer instead of one per stage.
class StageQuantizer final : public LinearInputs {
 public:
  StageQuantizer(int64_t layer, LayerWeights& w, std::span<const LayerWeights::Entry> entries,
                 std::span<const LayerCalibrator::Target> targets, LayerStorage& storage,
                 int threads)
      : layer_(layer),
        w_(w),
        entries_(entries),
        targets_(targets),
        storage_(storage),
        threads_(threads) {}

  void Add(int64_t layer, Site site, int64_t expert, std::span<const float> in,
           int64_t cols) override {
    if (!status_.ok() || layer != layer_ || expert >= 0) return;
    std::optional<Stage> stage;
    for (Stage s : {Stage::kQkv, Stage::kO, Stage::kGateUp, Stage::kDown}) {
      if (InputSite(s) == site) stage = s;
    }
    if (!stage.has_value()) return;  // k and v: q's input, already taken
    status_ = Quantize(*stage, in, cols);
  }

  const absl::Status& status() const { return status_; }

 private:
  absl::Status Quantize(Stage stage, std::span<const float> in, int64_t cols) {
    std::vector<const LayerCalibrator::Target*> here;
    for (const LayerCalibrator::Target& t : targets_) {
      if (StageOf(w_, entries_[t.entry].matrix) == stage) here.push_back(&t);
    }
    if (here.empty()) return absl::OkStatus();
    // One factor of H per column order the targets ask for (in column
    // order, by descending H_jj); the last one made takes H's storage.
    bool wanted[2] = {false, false};
    for (const LayerCalibrator::Target* t : here) wanted[t->calibration.act_order ? 1 : 0] = true;
    std::optional<GptqFactor> factors[2];
    Hessian h(cols);
    h.Add(in, threads_);
    for (int k = 0; k < 2; ++k) {
      if (!wanted[k]) continue;
      GptqOptions options;
      options.act_order = k == 1;
      const std::string& name = entries_[here[0]->entry].matrix->name;
      absl::StatusOr<GptqFactor> made = k == 0 && wanted[1]
                                            ? FactorHessian(name, h, options)
                                            : FactorHessian(name, std::move(h), options);
      if (!made.ok()) return made.status();
      factors[k] = *std::move(made);
    }
    for (const LayerCalibrator::Target* t : here) {
      Matrix& m = *entries_[t->entry].matrix;
      TensorContext context;
      if (t->scheme->NeedsTensorPass()) t->scheme->Observe(m.values, m.cols, context);
      GptqOptions options;
      options.act_order = t->calibration.act_order;
      options.threads = threads_;
      std::span<float> out = storage_.Buffer(t->entry, m.values.size());
      absl::StatusOr<GptqResult> q = Gptq(m.name, m.values, m.rows, m.cols,
                                          *factors[options.act_order ? 1 : 0], *t->scheme,
                                          context, options, out);
      if (!q.ok()) return q.status();
      m.values = out;
      m.stored_type = t->scheme->GgmlLayout(m.cols);
      if (storage_.keep_stored) {
        StoredChunk& kept = storage_.Stored(t->entry);
        kept = std::move(q->parameters);
        kept.bytes = std::move(q->bytes);
        kept.column_order = std::move(q->order);
      }
    }
    return absl::OkStatus();
  }

  int64_t layer_;
  LayerWeights& w_;
  std::span<const LayerWeights::Entry> entries_;
  std::span<const LayerCalibrator::Target> targets_;
  LayerStorage& storage_;
  int threads_;
  absl::Status status_;
};

// Gathers the Hessians of every stage's input in one run (AWQ).
class AllInputs final : public LinearInputs {
 public:
  AllInputs(int64_t layer, const LayerWeights& w, int threads) {
    const Stage stages[] = {Stage::kQkv, Stage::kO, Stage::kGateUp, Stage::kDown};
    const Matrix* first[] = {&w.q, &w.o, &w.gate, &w.down};
    for (int i = 0; i < 4; ++i) {
      inputs_.emplace_back(layer, InputSite(stages[i]), first[i]->cols, threads);
    }
  }

  void Add(int64_t layer, Site site, int64_t expert, std::span<const float> in,
           int64_t cols) override {
    for (StageInputs& s : inputs_) s.Add(layer, site, expert, in, cols);
  }

  const Hessian& of(Stage stage) const { return inputs_[static_cast<size_t>(stage)].hessian(); }

 private:
  std::vector<StageInputs> inputs_;  // in Stage order
};

}  // namespace

LayerCalibrator::LayerCalibrator(const Checkpoint& reference,
                                 std::shared_ptr<const CalibrationTokens> tokens)
    : reference_(reference), tokens_(std::move(tokens)) {
  const int64_t sequences = static_cast<int64_t>(tokens_->ids.size()) / tokens_->length;
  batch_ = Batch::Make(std::vector<int64_t>(static_cast<size_t>(sequences), tokens_->length), {},
                       ProductGroupRows(reference.config()));
  kv_.resize(static_cast<size_t>(sequences));
}

absl::Status LayerCalibrator::Start(
    const std::function<absl::Status(std::span<const int32_t>, std::span<float>)>& embed,
    int threads) {
  const ModelConfig& c = reference_.config();
  hidden_.assign(static_cast<size_t>(rows() * c.hidden_size), 0.0f);
  if (absl::Status s = embed(tokens_->ids, hidden_); !s.ok()) return s;
  if (absl::Status s = Embed(c, Emulation{}, hidden_, threads, nullptr); !s.ok()) return s;
  next_layer_ = 0;
  return absl::OkStatus();
}

absl::Status LayerCalibrator::Run(int64_t layer, const LayerWeights& w, std::span<float> hidden,
                                  LinearInputs* inputs, int threads) {
  std::vector<LayerKv*> kv;
  for (LayerKv& k : kv_) {
    k.Clear();
    kv.push_back(&k);
  }
  return ForwardLayer(reference_.config(), layer, w, Emulation{}, batch_, hidden, kv, buffers_,
                      threads, nullptr, inputs);
}

absl::Status LayerCalibrator::Layer(int64_t layer, LayerWeights& w, std::span<const Target> targets,
                                    LayerStorage& storage, int threads) {
  effective_.clear();
  if (layer != next_layer_) {
    return absl::InternalError(absl::StrCat("calibration asked for layer ", layer, " after ",
                                            next_layer_ - 1, " (Start first)"));
  }
  const ModelConfig& c = reference_.config();
  std::vector<LayerWeights::Entry> entries = w.Matrices(c);
  const bool folds = std::any_of(targets.begin(), targets.end(),
                                 [](const Target& t) { return t.calibration.folds(); });
  if (folds) {
    if (absl::Status s = Awq(layer, w, targets, storage, threads); !s.ok()) return s;
    if (absl::Status s = Run(layer, w, hidden_, nullptr, threads); !s.ok()) return s;
    ++next_layer_;
    ReleaseScratch();
    return absl::OkStatus();
  }
  for (const Target& t : targets) {
    const Matrix* m = entries[t.entry].matrix;
    if (StageOf(w, m) == Stage::kNone) {
      return absl::InvalidArgumentError(
          absl::StrCat("GPTQ of '", m->name,
                       "': only a dense layer's q, k, v, o, gate, up and down "
                       "projections are calibrated (not a mixture of experts' "
                       "matrices yet)"));
    }
  }
  // One run of the layer: each stage's matrices quantized as its input
  // reaches them, before the product reads them.
  StageQuantizer quantizer(layer, w, entries, targets, storage, threads);
  if (absl::Status s = Run(layer, w, hidden_, &quantizer, threads); !s.ok()) return s;
  if (!quantizer.status().ok()) return quantizer.status();
  ++next_layer_;
  ReleaseScratch();
  return absl::OkStatus();
}

void LayerCalibrator::ReleaseScratch() {
  buffers_ = ForwardBuffers();
  scratch_ = std::vector<float>();
  for (LayerKv& kv : kv_) kv = LayerKv();
}

absl::Status LayerCalibrator::Awq(int64_t layer, LayerWeights& w, std::span<const Target> targets,
                                  LayerStorage& storage, int threads) {
  const ModelConfig& c = reference_.config();
  std::vector<LayerWeights::Entry> entries = w.Matrices(c);
  // Every target of the layer takes the first one's method.
  const Calibration::Method method = targets[0].calibration.method;
  const bool smooth = method == Calibration::Method::kSmooth;
  const std::string method_name = smooth ? "SmoothQuant" : "AWQ";
  auto named = [&](const std::string& what) {
    return absl::InvalidArgumentError(absl::StrCat(
        method_name, " of '", entries[targets[0].entry].matrix->name, "': ", what));
  };
  if (c.num_experts > 0 || c.norm_adds_one || c.norm_bias || c.norms_per_layer != 2 ||
      !c.gated_mlp || c.mlp_bias) {
    return named(absl::StrCat(method_name,
                              " folds its scales into Llama-style layers (RMSNorm weights, a "
                              "gated MLP without biases, no experts); this model's layers are "
                              "not"));
  }
  for (const Target& t : targets) {
    if (t.calibration.method != method) {
      return named(
          "a layer is calibrated by one method: give its matrices one of ':awq', ':smooth' "
          "and ':gptq', not two");
    }
  }
  // The target of each matrix, or null.
  auto target_of = [&](const Matrix* m) -> const Target* {
    for (const Target& t : targets) {
      if (entries[t.entry].matrix == m) return &t;
    }
    return nullptr;
  };
  AllInputs inputs(layer, w, threads);
  scratch_ = hidden_;
  if (absl::Status s = Run(layer, w, scratch_, &inputs, threads); !s.ok()) return s;

  // The groups that share an input, and where their scales fold.
  struct Group {
    Stage stage;
    std::vector<Matrix*> matrices;
    std::vector<float> scale;  // empty: not scaled
  };
  std::vector<Group> groups = {{Stage::kQkv, {&w.q, &w.k, &w.v}, {}},
                               {Stage::kO, {&w.o}, {}},
                               {Stage::kGateUp, {&w.gate, &w.up}, {}},
                               {Stage::kDown, {&w.down}, {}}};
  for (Group& g : groups) {
    int targeted = 0;
    for (Matrix* m : g.matrices) targeted += target_of(m) != nullptr;
    if (targeted == 0) continue;
    if (targeted != static_cast<int>(g.matrices.size())) {
      return named(
          "the matrices that share an input are scaled together: give q, k and v (or "
          "gate and up) the same rule");
    }
    // o's input folds into v's rows only when every head has its own value
    // head; down's into up's rows only when up is scaled with it (AWQ's
    // reference leaves o alone under grouped-query attention too).
    if (g.stage == Stage::kO && (c.num_kv_heads != c.num_heads || target_of(&w.v) == nullptr)) {
      continue;
    }
    if (g.stage == Stage::kDown && target_of(&w.up) == nullptr) continue;
    std::vector<AwqMatrix> group;
    for (Matrix* m : g.matrices) {
      group.push_back({m->name, m->values, m->rows, target_of(m)->scheme});
    }
    if (smooth) {
      // SmoothQuant's reference smooths what the norms feed (q, k and v;
      // gate and up); o and down are quantized as they are.
      if (g.stage == Stage::kO || g.stage == Stage::kDown) continue;
      const double alpha = target_of(g.matrices[0])->calibration.alpha;
      absl::StatusOr<std::vector<float>> s =
          SmoothScales(group, inputs.of(g.stage), alpha < 0 ? kSmoothDefaultAlpha : alpha);
      if (!s.ok()) return s.status();
      g.scale = *std::move(s);
      continue;
    }
    AwqOptions options;
    options.threads = threads;
    options.alpha = target_of(g.matrices[0])->calibration.alpha;
    absl::StatusOr<AwqScales> s = SearchAwqScales(group, inputs.of(g.stage), options);
    if (!s.ok()) return s.status();
    g.scale = std::move(s->scale);
  }
  // Fold: the inputs divided by the scales (norm weights, v's and up's
  // rows), then each target stored as its scheme stores W diag(s).
  const size_t extra = entries.size();
  auto divided = [&](std::span<const float> v, std::span<const float> scale, size_t buffer,
                     int64_t cols) {
    std::span<float> out = storage.Buffer(buffer, v.size());
    for (size_t i = 0; i < v.size(); ++i) out[i] = v[i] / scale[i / static_cast<size_t>(cols)];
    return std::span<const float>(out);
  };
  std::vector<std::vector<float>> folded(entries.size());  // float rows of v and up, divided
  if (!groups[0].scale.empty()) {
    w.input_norm = divided(w.input_norm, groups[0].scale, extra, 1);
  }
  if (!groups[2].scale.empty()) {
    w.post_attention_norm = divided(w.post_attention_norm, groups[2].scale, extra + 1, 1);
  }
  for (auto [g, m] : {std::pair{1, &w.v}, std::pair{3, &w.up}}) {
    if (groups[static_cast<size_t>(g)].scale.empty()) continue;
    const std::vector<float>& scale = groups[static_cast<size_t>(g)].scale;
    for (size_t j = 0; j < entries.size(); ++j) {
      if (entries[j].matrix != m) continue;
      folded[j].resize(m->values.size());
      for (size_t i = 0; i < m->values.size(); ++i) {
        folded[j][i] = m->values[i] / scale[i / static_cast<size_t>(m->cols)];
      }
      m->values = folded[j];
    }
  }
  // The effective weight of each target, for its report: what it stores with
  // its scales undone (the columns' and, for v and up, the rows').
  effective_.assign(targets.size(), {});
  for (const Group& g : groups) {
    for (Matrix* m : g.matrices) {
      const Target* t = target_of(m);
      if (t == nullptr) continue;
      std::span<float> out = storage.Buffer(t->entry, m->values.size());
      const std::vector<float> ones(static_cast<size_t>(m->cols), 1.0f);
      const std::span<const float> scale =
          g.scale.empty() ? std::span<const float>(ones) : std::span<const float>(g.scale);
      QuantizeScaled(m->values, scale, *t->scheme, out, threads);
      m->values = out;
      const std::vector<float>* rows = m == &w.v    ? &groups[1].scale
                                       : m == &w.up ? &groups[3].scale
                                                    : nullptr;
      std::vector<float>& e = effective_[static_cast<size_t>(t - targets.data())];
      e.resize(out.size());
      const size_t cols = static_cast<size_t>(m->cols);
      for (size_t i = 0; i < out.size(); ++i) {
        e[i] = out[i] / scale[i % cols];
        if (rows != nullptr && !rows->empty()) e[i] *= (*rows)[i / cols];
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace lowp
