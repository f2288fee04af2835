// lowp quantize --model DIR --weights RULES: a Hugging Face model written
// with its matrices as one `lowp eval` candidate's weights make them (a
// scheme, a recipe or PATTERN=SCHEME rules; calibrated by GPTQ or not, on
// the same calibration tokens eval takes), dequantized: the model whose
// outputs eval measured, for any tool that reads safetensors. Made a layer
// at a time, as the evaluator makes it (memory: one layer and, calibrating,
// the calibration tokens' hidden state).
#ifndef LOWP_API_QUANTIZE_MODEL_H_
#define LOWP_API_QUANTIZE_MODEL_H_

#include <string>

#include "absl/status/statusor.h"
#include "api/inputs.h"
#include "api/quant.h"

namespace lowp::api {

struct QuantizeModelOptions {
  // A Hugging Face snapshot directory whose matrices are stored under their
  // own names (safetensors; not a GGUF file).
  std::string model;
  std::string weights;  // eval's --weights grammar, one candidate
  // A .safetensors file (the matrices dequantized, in `dtype`), a .gguf
  // file (llama.cpp's model file: each matrix in its llama.cpp type, as
  // the candidate's own bytes; eval/gguf_export.h) or, with `format`, a new
  // model directory; written whole or not at all.
  std::string output;
  // "compressed-tensors" or "gptq": `output` is a new directory holding the
  // quantized checkpoint vLLM and transformers load, each matrix as the
  // candidate's own codes and scales (eval/checkpoint_export.h). Empty:
  // the output's extension decides (.gguf, else safetensors).
  std::string format;
  // The tokenizer a GGUF file's vocabulary is written from: the model
  // directory's (tokenizer.model, tokenizer.json or tok*.bin) when empty.
  std::string tokenizer;
  // Every matrix is written in this type: F32 (every dequantized value
  // exactly), F16 or BF16 (nearest-even). The other tensors (norms, biases)
  // are copied as stored.
  std::string dtype = "F32";
  std::string imatrix;  // as eval's
  TokenOptions calibration = DefaultCalibrationOptions();
  bool summary = false;
  int threads = 0;
  ProgressFn progress;  // before each layer
};

// The error of each matrix the rules change against the model's (for a
// calibrated one its weights' error, which GPTQ trades for the output's);
// errors name the field (model, weights, output, dtype, imatrix, calib_...)
// or the file and tensor. AWQ and SmoothQuant, which fold scales into the
// norms, are refused by name (not written yet).
absl::StatusOr<QuantErrorResult> QuantizeModel(const QuantizeModelOptions& options);

// lowp quant-error --model DIR --scheme S[,S...]: each matrix of the model
// as eval's --weights makes it from each scheme (one candidate per scheme:
// a plain scheme takes the decoder's linear layers, a recipe every matrix,
// ":gptq" calibrates on `calibration`; AWQ's and SmoothQuant's folded
// matrices as the model computes them), against the model's: a row per
// matrix and scheme, and one per scheme over them all. Nothing is written.
struct ModelQuantErrorOptions {
  std::string model;
  std::vector<std::string> schemes;
  std::string imatrix;
  TokenOptions calibration = DefaultCalibrationOptions();
  bool summary = false;
  int threads = 0;
  ProgressFn progress;  // before each layer of each scheme
};
absl::StatusOr<QuantErrorResult> ModelQuantError(const ModelQuantErrorOptions& options);

}  // namespace lowp::api

#endif  // LOWP_API_QUANTIZE_MODEL_H_
