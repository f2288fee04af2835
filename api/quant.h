// What quantizing loses: the error of schemes on tensors (`lowp quant-error`,
// lowp.quant_error), tensors written quantized (`lowp quantize`,
// lowp.quantize) and what each format's range does to them (`lowp range`,
// lowp.range_study).
#ifndef LOWP_API_QUANT_H_
#define LOWP_API_QUANT_H_

#include <cstddef>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "api/inputs.h"
#include "io/tensor.h"
#include "nlohmann/json.hpp"
#include "quant/measure.h"
#include "quant/range.h"

namespace lowp::api {

// Called before each tensor with (tensors in all, its name), from the
// calling thread.
using ProgressFn = std::function<void(size_t total, const std::string& name)>;

struct QuantErrorOptions {
  TensorInputs inputs;
  std::vector<std::string> schemes;  // names (lowp schemes), at least one; none with reference
  // Files of the original checkpoint (safetensors, sharded, a float GGUF).
  // When set, each input tensor is taken as the stored, quantized form of its
  // counterpart there (same name, or llama.cpp's name mapped to Hugging
  // Face's) and its decoded values are measured against it: what a GGUF file
  // lost against the weights it was made from.
  std::vector<std::string> reference;
  std::string tensors;               // comma-separated globs on names; empty: all
  bool summary = false;              // only the rows over all tensors
  double relative_floor = 1e-3;      // relative errors over |x| >= this, in [0, float32 max]
  bool histogram = false;            // |e| by binade in each row
  int threads = 0;                   // per tensor, 0 (every core) to kMaxThreads
  // An importance matrix (llama.cpp's imatrix, .gguf or legacy .dat): the
  // llama.cpp types quantize each tensor with its entry, and each row gets
  // weighted_relative_rmse. Not with `reference`.
  std::string imatrix;
  ProgressFn progress;
};

// With a reference: which original tensor a stored one was measured
// against, and in which row order.
struct ReferenceMatch {
  std::string reference;  // its name in the reference
  // True when llama.cpp's q/k row permutation (LlamaRopeRowOrder) was undone:
  // attn_q/attn_k are compared under both orders and the closer one kept.
  bool rope_permuted = false;
};

struct QuantErrorResult {
  std::vector<QuantReport> results;     // per tensor and scheme (empty with summary)
  std::vector<QuantReport> aggregates;  // per scheme, tensor "(all)"; with a reference
                                        // per stored type, then scheme "(file)" over all
  std::vector<std::string> skipped;     // selected but not floating
  bool reference = false;               // measured against a reference
  std::vector<ReferenceMatch> matches;  // with a reference: one per result
  std::vector<std::string> unmatched;   // with a reference: tensors with no counterpart
  float relative_floor = 1e-3f;
  bool histogram = false;
  std::string imatrix;  // the file used, "" for none
  // What a written file holds that differs from what was measured, and why
  // (quantize --model --format compressed-tensors with NVFP4).
  std::vector<std::string> notes;
};

// Errors name the field (scheme, tensors, relative_floor, threads) or the
// file and tensor.
absl::StatusOr<QuantErrorResult> QuantError(const QuantErrorOptions& options);
nlohmann::json ToJson(const QuantErrorResult& result);

struct QuantizeOptions {
  std::string input;   // one checkpoint file
  std::string scheme;  // one name
  std::string output;  // a .safetensors file, written whole or not at all
  std::string tensors;
  // F32 (every dequantized value exactly), F16, BF16 (nearest-even) or
  // "same" (the input's; F64 and 8-bit inputs become F32).
  std::string dtype = "F32";
  bool summary = false;
  int threads = 0;
  std::string imatrix;  // as QuantErrorOptions::imatrix
  ProgressFn progress;
};


// The error of each quantized tensor as QuantError reports it (no skipped:
// the other tensors are copied).
absl::StatusOr<QuantErrorResult> Quantize(const QuantizeOptions& options);

// An array quantized and dequantized, in place of `out` (its element count);
// what Quantize writes for it as F32.
// `importance`, when not empty, holds one weight per column (the last
// dimension): what ggml_quantize_chunk's `imatrix` gets.
absl::Status QuantizeArray(const TensorView& tensor, const std::string& scheme,
                           std::span<float> out, int threads = 0,
                           std::span<const float> importance = {});

struct RangeStudyOptions {
  TensorInputs inputs;
  // Format names; empty takes DefaultRangeFormats().
  std::vector<std::string> formats;
  double fraction = 0.999;  // in (0, 1]
  std::string tensors;
  int threads = 0;
  ProgressFn progress;
};

struct RangeStudyResult {
  double fraction = 0.999;
  std::vector<RangeRow> rows;  // per tensor and format
  std::vector<std::string> skipped;
};

const std::vector<std::string>& DefaultRangeFormats();  // fp16, bf16, fp8_e4m3fn, fp8_e5m2
absl::StatusOr<RangeStudyResult> RangeStudy(const RangeStudyOptions& options);
nlohmann::json ToJson(const RangeStudyResult& result);

}  // namespace lowp::api

#endif  // LOWP_API_QUANT_H_
