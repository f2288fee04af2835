#include "eval/calibrator.h"

#include <utility>

#include "absl/strings/str_cat.h"
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
  if (layer != next_layer_) {
    return absl::InternalError(absl::StrCat("calibration asked for layer ", layer, " after ",
                                            next_layer_ - 1, " (Start first)"));
  }
  const ModelConfig& c = reference_.config();
  std::vector<LayerWeights::Entry> entries = w.Matrices(c);
  for (Stage stage : {Stage::kQkv, Stage::kO, Stage::kGateUp, Stage::kDown}) {
    std::vector<const Target*> here;
    for (const Target& t : targets) {
      const Matrix* m = entries[t.entry].matrix;
      if (StageOf(w, m) == Stage::kNone) {
        return absl::InvalidArgumentError(
            absl::StrCat("GPTQ of '", m->name,
                         "': only a dense layer's q, k, v, o, gate, up and down "
                         "projections are calibrated (not a mixture of experts' "
                         "matrices yet)"));
      }
      if (StageOf(w, m) == stage) here.push_back(&t);
    }
    if (here.empty()) continue;
    const int64_t cols = entries[here[0]->entry].matrix->cols;
    StageInputs inputs(layer, InputSite(stage), cols, threads);
    scratch_ = hidden_;
    if (absl::Status s = Run(layer, w, scratch_, &inputs, threads); !s.ok()) return s;
    for (const Target* t : here) {
      Matrix& m = *entries[t->entry].matrix;
      TensorContext context;
      if (t->scheme->NeedsTensorPass()) t->scheme->Observe(m.values, m.cols, context);
      GptqOptions options;
      options.act_order = t->calibration.act_order;
      options.threads = threads;
      absl::StatusOr<GptqResult> q =
          Gptq(m.name, m.values, m.rows, m.cols, inputs.hessian(), *t->scheme, context, options);
      if (!q.ok()) return q.status();
      std::span<float> out = storage.Buffer(t->entry, q->values.size());
      std::copy(q->values.begin(), q->values.end(), out.begin());
      m.values = out;
    }
  }
  if (absl::Status s = Run(layer, w, hidden_, nullptr, threads); !s.ok()) return s;
  ++next_layer_;
  return absl::OkStatus();
}

}  // namespace lowp
