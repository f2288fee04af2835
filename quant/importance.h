// Importance weights by tensor, from a llama.cpp importance matrix
// (io/imatrix.h): what llama-quantize hands ggml_quantize_chunk for each
// tensor (tools/quantize/quantize.cpp: each column's in_sum2 divided by its
// matrix's token count), found by the tensor's llama.cpp name or its Hugging
// Face counterpart. The schemes receive them in TensorContext::importance.
#ifndef LOWP_QUANT_IMPORTANCE_H_
#define LOWP_QUANT_IMPORTANCE_H_

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "io/imatrix.h"
#include "io/tensor.h"
#include "quant/scheme.h"

namespace lowp {

class ImportanceMap {
 public:
  // The weights of every entry of `imatrix`, read from `source` (for
  // messages). Entries whose matrices all counted no token are kept as
  // absent (llama-quantize then quantizes without).
  static ImportanceMap FromImatrix(const Imatrix& imatrix, std::string source);

  // One entry: `weights` (one per column) for the tensor called `name`.
  static ImportanceMap ForTensor(const std::string& name, std::vector<float> weights);

  const std::string& source() const { return source_; }
  size_t size() const { return entries_.size(); }

  // Puts the weights for `tensor` into `context`: the entry of its own name,
  // its llama.cpp or Hugging Face counterpart, or for one of Mixtral's
  // experts by Hugging Face's name its vector of the merged entry
  // ("blk.N.ffn_down_exps.weight"). No entry: `context` is left alone.
  // InvalidArgument naming the tensor and the file when the entry's columns
  // are not the tensor's, or its matrices neither 1 nor the tensor's leading
  // dimension (a merged experts tensor [experts, rows, cols]).
  absl::Status Fill(const TensorView& tensor, TensorContext& context) const;
  // The entries' names, in order.
  std::vector<std::string> Names() const;

 private:
  struct Entry {
    int64_t columns = 0, matrices = 0;
    std::shared_ptr<const std::vector<float>> weights;  // [matrices, columns]
  };
  const Entry* Find(const std::string& name) const;

  std::string source_;
  std::map<std::string, Entry> entries_;
};

// InvalidArgument when `scheme` cannot quantize `tensor` without importance
// weights and `context` has none ("... needs an importance matrix (--imatrix)").
absl::Status CheckImportance(const Scheme& scheme, const TensorView& tensor,
                             const TensorContext& context);

// One tensor a command quantizes and the scheme it quantizes it with.
struct QuantizedTensor {
  const TensorView* tensor = nullptr;
  const Scheme* scheme = nullptr;
};
// OK when `importance` (null: none given) changes something: some tensor of
// `quantized` has a scheme that uses importance weights and an entry in it.
// Otherwise an option error on "imatrix" saying which is missing: a scheme
// that uses it (`why_none` explains an empty `quantized`), or an entry for
// the tensors quantized (naming some of each).
absl::Status CheckImportanceUsed(const ImportanceMap* importance,
                                 std::span<const QuantizedTensor> quantized,
                                 absl::string_view why_none = "");

}  // namespace lowp

#endif  // LOWP_QUANT_IMPORTANCE_H_
