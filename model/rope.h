// The rotary embedding's inverse frequencies and the factors around it, by
// rope_scaling type (none, linear, llama3, yarn, longrope): what the forward
// pass (model/forward.cc) rotates q and k by.
#ifndef LOWP_MODEL_ROPE_H_
#define LOWP_MODEL_ROPE_H_

#include <cstdint>
#include <vector>

#include "model/config.h"

namespace lowp {

// The inverse frequencies of the rotary embedding of `layer`, RotaryDim / 2
// of them, rope_scaling applied (Gemma 3's windowed layers:
// rope_local_base_freq, unscaled), and the factor cos and sin are scaled by
// (yarn's and longrope's attention factor; 1 otherwise). Hugging Face's
// modeling_rope_utils, in double.
struct RopeFrequencies {
  std::vector<double> inv_freq;
  double attention_factor = 1;
};
// `long_factors`: LongRoPE's long factors instead of its short ones (a
// sequence longer than original_max_position_embeddings).
RopeFrequencies InverseFrequencies(const ModelConfig& config, int64_t layer,
                                   bool long_factors = false);

// What the scores' 1/sqrt(key width) is multiplied by: DeepSeek-V3's
// mscale(factor, mscale_all_dim)^2 under yarn; else 1.
double AttentionScale(const ModelConfig& config);

}  // namespace lowp

#endif  // LOWP_MODEL_ROPE_H_
