// llama.cpp's quantization mixes as named recipes: the type llama-quantize
// gives each tensor of a llama-family model for an ftype (Q4_K_M, Q6_K,
// IQ2_XXS, ...), with or without an importance matrix: llama_tensor_get_type
// (src/llama-quant.cpp, llama.cpp 007dbbf) for a model of architecture llama. A recipe is a
// Scheme (ParseScheme returns one for "Q4_K_M"), usable wherever a scheme is:
// code that quantizes a set of tensors asks SchemeForTensor which scheme
// each tensor gets; Apply on its own quantizes with the mix's default type.
//
// Recipes know tensors by llama.cpp's names (blk.N.attn_v.weight,
// token_embd.weight, output.weight) and Hugging Face's
// (model.layers.N.self_attn.v_proj.weight, model.embed_tokens.weight,
// lm_head.weight). What they need of the model (layer count, grouped-query
// ratio, whether the output is tied to the embeddings) is read off the
// tensors' names and shapes (RecipeModel::Of).
#ifndef LOWP_QUANT_RECIPE_H_
#define LOWP_QUANT_RECIPE_H_

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "io/tensor.h"
#include "quant/scheme.h"

namespace lowp {
struct QuantReport;  // quant/measure.h
}

namespace lowp {

// The model facts llama_tensor_get_type consults.
struct RecipeModel {
  int layers = 0;            // n_layer: 1 + the largest layer index seen
  int attention_v = 0;       // n_attention_wv: tensors attn_v / v_proj / fused qkv
  int64_t gqa = 1;           // n_gqa: q rows / k rows (heads per kv head)
  bool has_output = false;   // an output.weight / lm_head.weight (else tied embeddings)
  int experts = 0;           // n_expert: merged experts' count, or distinct "experts.E."
  // Quantized with an importance matrix: llama-quantize then chooses
  // differently for IQ3_XXS, IQ4_NL, IQ4_XS, Q4_0 and Q5_0. Not read off the
  // tensors; the caller sets it.
  bool has_imatrix = false;

  // Read off the tensors of a whole model (names and shapes).
  static RecipeModel Of(std::span<const TensorView> tensors);
};

// What a recipe gives one tensor: a scheme name ("q6_K", "q5_0", "f16"; "f32"
// for a tensor llama.cpp does not quantize: norms, 1-D tensors, routers) and
// why, in llama.cpp's terms.
struct RecipeChoice {
  std::string scheme;
  std::string reason;
  // llama-quantize refuses to make this tensor without an importance matrix
  // (tensor_requires_imatrix: the grid types but token_embd and output, and
  // q2_K in a Q2_K_S file).
  bool requires_imatrix = false;
};

class Recipe : public Scheme {
 public:
  // The mix's default ggml type ("q4_K" for Q4_K_M).
  virtual const std::string& default_type() const = 0;
  // The choice for tensor `name` of `shape` (row-major: the last dimension
  // is ggml's ne[0]) in `model`.
  virtual RecipeChoice Choose(absl::string_view name, std::span<const int64_t> shape,
                              const RecipeModel& model) const = 0;
  // The parsed scheme of a choice, made once and kept by the recipe.
  virtual const Scheme& SchemeOf(const RecipeChoice& choice) const = 0;

 protected:
  using Scheme::Scheme;
};

// The recipe behind `scheme`, or null for an ordinary scheme.
const Recipe* AsRecipe(const Scheme& scheme);

// The scheme `scheme` applies to `tensor` of a model: itself, or a recipe's
// choice for it (the choice in `choice` when not null; left alone for an
// ordinary scheme).
const Scheme& SchemeForTensor(const Scheme& scheme, const TensorView& tensor,
                              const RecipeModel& model, RecipeChoice* choice = nullptr);

// InvalidArgument naming the tensor and the mix when `choice` (the recipe
// `scheme`'s for `tensor`) is one llama-quantize refuses to make without an
// importance matrix and `have_imatrix` is false; OK otherwise.
absl::Status CheckImatrixRequirement(const Scheme& scheme, const RecipeChoice& choice,
                                     absl::string_view tensor, bool have_imatrix);

// A report of `applied` (SchemeForTensor's) renamed for the recipe `scheme`:
// scheme its name, applied the choice and its reason. Ordinary schemes: as is.
void NameForRecipe(const Scheme& scheme, const RecipeChoice& choice, QuantReport& report);

// The recipe names, in llama-quantize's spelling: Q4_0 Q4_1 Q5_0 Q5_1 Q8_0
// Q2_K Q3_K_S Q3_K_M Q3_K_L Q4_K_S Q4_K_M Q5_K_S Q5_K_M Q6_K IQ4_NL IQ4_XS,
// then those made with an importance matrix: Q2_K_S IQ1_S IQ1_M IQ2_XXS
// IQ2_XS IQ2_S IQ2_M IQ3_XXS IQ3_XS IQ3_S IQ3_M.
std::vector<std::string> RecipeNames();

}  // namespace lowp

#endif  // LOWP_QUANT_RECIPE_H_
