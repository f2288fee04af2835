// How a weight scheme's codes are chosen: by the scheme alone (rounding to
// nearest, ggml's searches), or calibrated on the inputs its matrix sees
// when the model runs on calibration text (calib/): ":gptq" on any scheme
// whose codes are chosen one element at a time once a block's scales are
// (quant/rounder.h), ":gptq=actorder" to take the columns by descending
// input energy (integer groups only: GPTQ checkpoints store the order as
// g_idx); ":awq" to scale each input channel by its activations before
// rounding to nearest, the scales folded into the operation before (AWQ,
// calib/awq.h; ":awq=ALPHA" takes that alpha instead of searching);
// ":smooth[=ALPHA]" to migrate the activations' outliers into the weights
// before both are quantized (SmoothQuant, calib/smooth.h; alpha 0.5 by
// default), for candidates whose activations are quantized too. The option
// belongs to where a model runs (lowp eval's --weights; mix and plan --eval
// do not take it yet); ParseScheme alone refuses it.
#ifndef LOWP_QUANT_CALIBRATION_H_
#define LOWP_QUANT_CALIBRATION_H_

#include <string>
#include <utility>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace lowp {

struct Calibration {
  enum class Method { kNone, kGptq, kAwq, kSmooth };
  Method method = Method::kNone;
  bool act_order = false;
  // AWQ's alpha when given (":awq=0.5"), in [0, 1], negative: searched;
  // SmoothQuant's migration strength (":smooth=0.8"; 0.5 when not given).
  double alpha = -1;

  bool active() const { return method != Method::kNone; }
  // Whether the method scales input channels and folds the scales into the
  // operation before (AWQ, SmoothQuant) rather than choosing codes (GPTQ).
  bool folds() const { return method == Method::kAwq || method == Method::kSmooth; }
  // ":gptq", ":gptq=actorder", ":awq", ":awq=ALPHA", ":smooth", ":smooth=ALPHA",
  // or "" (how names carry it).
  std::string Suffix() const;
};

// Splits "SCHEME[:OPTION...]" into the scheme's name without its calibration
// option and the calibration it asks for. InvalidArgument naming the scheme
// for a value the option does not take or an option given twice.
absl::StatusOr<std::pair<std::string, Calibration>> SplitCalibration(absl::string_view name);

// True for the options SplitCalibration takes ("gptq", "awq", "smooth"), so that ParseScheme
// can say where they belong.
bool IsCalibrationOption(absl::string_view key);

}  // namespace lowp

#endif  // LOWP_QUANT_CALIBRATION_H_
