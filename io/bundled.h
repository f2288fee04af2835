// The data lowp ships: where the bundled checkpoint is.
#ifndef LOWP_IO_BUNDLED_H_
#define LOWP_IO_BUNDLED_H_

#include <string>

#include "absl/status/statusor.h"

namespace lowp {

// The bundled checkpoint (stories260K in float32): $LOWP_DATA_DIR if set,
// else the installed copy (share/lowp), else the source tree's.
// NotFound naming the places looked in.
absl::StatusOr<std::string> BundledCheckpoint();

// The bundled model in Hugging Face layout (stories260K-hf: config.json and
// model.safetensors), the evaluator's default: $LOWP_DATA_DIR/stories260K-hf
// (or its parent's) if set, else the installed copy, else the source tree's.
absl::StatusOr<std::string> BundledModel();

// The second bundled model, stories3M-hf (every row a multiple of 256, so
// llama.cpp's super-block types and mixes apply: lowp mix's default), found
// as BundledModel is.
absl::StatusOr<std::string> BundledMixModel();

// The bundled calibration text (tests/data/text/tinystories-calib.txt: the
// TinyStories stories stories3M-hf was trained on last, disjoint from the
// texts the quick start measures on), found as BundledCheckpoint is.
absl::StatusOr<std::string> BundledCalibrationText();

}  // namespace lowp

#endif  // LOWP_IO_BUNDLED_H_
