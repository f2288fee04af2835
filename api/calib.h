// GPTQ on one matrix from the inputs it multiplies (Python's lowp.gptq): for
// a researcher's own activations, or to check lowp's GPTQ against another.
// The model-level use is eval's ":gptq" (api/eval.h).
#ifndef LOWP_API_CALIB_H_
#define LOWP_API_CALIB_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "io/tensor.h"

namespace lowp::api {

struct GptqArrayOptions {
  double damp = 0.01;  // of the mean of diag(H)
  bool act_order = false;
  int threads = 0;
};

struct GptqArrayResult {
  std::vector<float> values;   // [rows, cols]: the quantized weight, dequantized
  std::vector<uint8_t> bytes;  // ggml's blocks for llama.cpp's types, else empty
  std::vector<int32_t> order;  // the columns' order with act_order, else empty
};

// `weight` [rows, cols] and `inputs` [tokens, cols] (any floating dtypes,
// read as float32); `scheme` any scheme GPTQ rounds (calib/gptq.h).
// Errors name the argument: weight, inputs, scheme, damp.
absl::StatusOr<GptqArrayResult> GptqArray(const TensorView& weight, const TensorView& inputs,
                                          const std::string& scheme,
                                          const GptqArrayOptions& options);

}  // namespace lowp::api

#endif  // LOWP_API_CALIB_H_
