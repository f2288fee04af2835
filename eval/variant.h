// A candidate's weights, made a layer at a time from the reference's so that
// a candidate costs one layer's memory, not a model's:
//   rules  each matrix a WeightRule takes (model/weights.h) quantized with its
//          scheme, or the choice a recipe makes for it, and dequantized: the
//          values and statistics quant-error gives (QuantizeTensor). The
//          embedding is quantized by the rows a batch's tokens need, lm_head
//          a chunk of vocabulary rows at a time (QuantizeWindow), with the
//          same values and statistics as the whole tensor's.
//   file   the matrices of another checkpoint of the same model (a GGUF file
//          llama.cpp made from it, its q and k rows put back in order; or any
//          safetensors file with the reference's names), as that file stores
//          them; norms and biases are the reference's (llama.cpp keeps them in
//          float32, Gemma's norms with 1 added).
// (eval/rule_variant.cc and eval/file_variant.cc.) WeightVariant is the one
// way the evaluator gets a candidate's weights for a layer: a LayerRequest
// in, the layer's weights out. What comes next plugs in here: a candidate
// whose layer is computed from its own stream's inputs (GPTQ, AWQ: the
// request will carry them) and a layer read and made an expert at a time.
#ifndef LOWP_EVAL_VARIANT_H_
#define LOWP_EVAL_VARIANT_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "model/checkpoint.h"
#include "model/weights.h"
#include "quant/measure.h"

namespace lowp {

struct CalibrationTokens;  // eval/calibrator.h

// What a variant did to the matrices it changed, per matrix (checkpoint
// order: the embedding, the layers', lm_head) and in all.
struct WeightReport {
  std::vector<QuantReport> tensors;
  QuantReport total;  // tensor "(all)"; scheme the variant's one scheme, "" when mixed
};

// How a pass over the tokens reads: the first pass keeps the variants'
// statistics; when another pass follows, what is read stays in the page
// cache (it is read again).
struct PassOptions {
  bool first = false;
  bool another_follows = false;
};

// One decoder layer of a variant, asked for by the evaluator.
struct LayerRequest {
  int64_t layer = 0;
  const LayerWeights& reference;  // the reference's weights of the layer
  LayerStorage& storage;          // where the variant's own matrices go (reused)
  int threads = 1;
  PassOptions pass;
};

class WeightVariant {
 public:
  virtual ~WeightVariant() = default;

  // `spec` names the variant in reports (the --weights item as given);
  // `importance`, when set, gives each matrix its imatrix entry (and the
  // mixes llama-quantize's choices with an imatrix).
  // `calibration`, the tokens the rules that calibrate (":gptq") calibrate
  // on (eval/calibrator.h); Prepare refuses such a rule without them.
  static absl::StatusOr<std::unique_ptr<WeightVariant>> FromRules(
      std::string spec, std::vector<WeightRule> rules, const Checkpoint& reference,
      std::shared_ptr<const ImportanceMap> importance = nullptr,
      std::shared_ptr<const CalibrationTokens> calibration = nullptr);
  // A checkpoint file of the reference's model (GGUF or safetensors); errors
  // name the file and the tensor that does not match.
  static absl::StatusOr<std::unique_ptr<WeightVariant>> FromFile(const std::string& path,
                                                                 const Checkpoint& reference);

  const std::string& spec() const { return spec_; }

  // Once, before the first layer: the tensor-wide contexts of the tables'
  // schemes, and the statistics of an untied embedding it changes (one pass
  // over it).
  virtual absl::Status Prepare(int threads) = 0;
  // Prepare for a caller that makes each table it changes whole through
  // TableBytes (which keeps the table's statistics): the same, without the
  // untied embedding's statistics pass.
  virtual absl::Status PrepareForTableBytes(int threads) { return Prepare(threads); }
  // The request's layer from the reference's: the views of what it changes
  // point into the request's storage (the caller's: variants run one after
  // another share one, so that memory holds one variant's layer). In the
  // first pass the matrices' statistics are kept; what it reads of a file
  // is dropped from memory as read unless another pass follows.
  virtual absl::StatusOr<LayerWeights> Layer(const LayerRequest& request) = 0;

  // Whether the variant changes a table; where it does not, the reference's
  // rows serve.
  virtual bool Changes(Table table) const = 0;
  // The embedding rows of `ids` into `out` ([ids, hidden_size]); `pass` as
  // for Layer.
  virtual absl::Status EmbeddingRows(std::span<const int32_t> ids, std::span<float> out,
                                     int threads, const PassOptions& pass) = 0;
  // lm_head rows [first, first + count), given the reference's same rows:
  // valid until the next call. `first` must be a multiple of HeadChunkRows.
  // `pass` as for Layer.
  virtual absl::StatusOr<std::span<const float>> HeadRows(int64_t first, int64_t count,
                                                          std::span<const float> reference_rows,
                                                          int threads, const PassOptions& pass) = 0;
  virtual int64_t HeadChunkRows() const { return 1; }
  // The llama.cpp type lm_head's rows are stored in where the variant
  // changes them (Matrix::stored_type's meaning); null when none.
  virtual const ggml::TypeInfo* HeadType() const { return nullptr; }
  // The stored bytes of a table the variant changes (Changes(table)), the
  // whole table quantized as EmbeddingRows / HeadRows quantize it, handed to
  // `bytes` in pieces of whole rows, in order; the table's statistics kept
  // as a first pass keeps them. For a scheme with a llama.cpp layout
  // (Scheme::GgmlLayout; InvalidArgument naming the table for another);
  // Unimplemented for a variant that is not made by rules.
  virtual absl::Status TableBytes(Table table, int threads,
                                  const std::function<absl::Status(std::span<const uint8_t>)>& bytes);
  // The first decoder layer whose weights differ from the reference's (0
  // when the embedding does; the layer count when only lm_head does): a
  // stream of this variant equals the reference's, bit for bit, before it
  // (EvalRun::share_prefix).
  virtual int64_t FirstChangedLayer() const { return 0; }

  // The statistics kept so far, in checkpoint order.
  WeightReport Report() const;

  // DataLoss when a file the variant read shrank or changed while read
  // (TensorSet::CheckIntact); ask before reporting.
  virtual absl::Status CheckIntact() const { return absl::OkStatus(); }

 protected:
  explicit WeightVariant(std::string spec) : spec_(std::move(spec)) {}
  // Reports by their place in the checkpoint's order of matrices.
  std::map<int64_t, QuantReport> reports_;
  std::string scheme_names_;  // the one scheme's name, "mixed", or ""

 private:
  std::string spec_;
};

// Each matrix of `reference` that `rules` quantize (by the rule RuleFor
// picks, as a variant of those rules does), with the scheme it gets: the
// rule's, or a recipe's choice for the matrix (made as with an importance
// matrix when `with_importance`).
struct RuleMatch {
  TensorView matrix;  // name and shape, no bytes
  const Scheme* scheme = nullptr;
  const WeightRule* rule = nullptr;  // the rule that takes it (its calibration)
};
std::vector<RuleMatch> MatricesByRule(const Checkpoint& reference,
                                      std::span<const WeightRule> rules, bool with_importance);

// The decoder layer of a tensor named "model.layers.N.<...>"; -1 for any
// other name.
int64_t DecoderLayerOf(absl::string_view name);

}  // namespace lowp

#endif  // LOWP_EVAL_VARIANT_H_
