#include "optim/adamw.h"

#include <cmath>
#include <numbers>

#include "absl/strings/str_cat.h"
#include "formats/option_error.h"

namespace lowp {

absl::Status ValidateAdamW(const AdamWOptions& o) {
  if (!std::isfinite(o.lr) || o.lr <= 0) {
    return OptionError("lr", absl::StrCat("must be a positive number, not ", o.lr));
  }
  if (!(o.beta1 >= 0 && o.beta1 < 1)) {
    return OptionError("beta1", absl::StrCat("must be in [0, 1), not ", o.beta1));
  }
  if (!(o.beta2 >= 0 && o.beta2 < 1)) {
    return OptionError("beta2", absl::StrCat("must be in [0, 1), not ", o.beta2));
  }
  if (!std::isfinite(o.eps) || o.eps <= 0) {
    return OptionError("eps", absl::StrCat("must be a positive number, not ", o.eps));
  }
  if (!std::isfinite(o.weight_decay) || o.weight_decay < 0 || o.lr * o.weight_decay >= 1) {
    return OptionError("weight-decay", absl::StrCat("must be >= 0 with lr * weight-decay < 1, not ",
                                                    o.weight_decay));
  }
  if (o.steps < 1 || o.steps > kMaxSteps) {
    return OptionError("steps", absl::StrCat("must be 1 to ", kMaxSteps, ", not ", o.steps));
  }
  if (o.schedule != "constant" && o.schedule != "cosine") {
    return OptionError("schedule", absl::StrCat("'", o.schedule, "'; valid: constant, cosine"));
  }
  if (o.warmup < 0 || o.warmup >= o.steps) {
    return OptionError("warmup",
                       absl::StrCat("must be 0 to steps - 1 (", o.steps - 1, "), not ", o.warmup));
  }
  if (!(o.min_lr_ratio >= 0 && o.min_lr_ratio <= 1)) {
    return OptionError("min-lr-ratio", absl::StrCat("must be in [0, 1], not ", o.min_lr_ratio));
  }
  return absl::OkStatus();
}

double LearningRate(const AdamWOptions& o, int64_t t) {
  if (t <= o.warmup) return o.lr * static_cast<double>(t) / static_cast<double>(o.warmup + 1);
  if (o.schedule == "constant") return o.lr;
  // Cosine from lr at the first step after warmup to lr * min_lr_ratio at the last.
  const int64_t span = o.steps - o.warmup - 1;
  const double progress =
      span <= 0 ? 1.0 : static_cast<double>(t - o.warmup - 1) / static_cast<double>(span);
  const double low = o.lr * o.min_lr_ratio;
  return low + (o.lr - low) * 0.5 * (1 + std::cos(std::numbers::pi * progress));
}

AdamWCorrections::AdamWCorrections(const AdamWOptions& o, int64_t t)
    : c1(1 - std::pow(o.beta1, static_cast<double>(t))),
      c2(1 - std::pow(o.beta2, static_cast<double>(t))) {}

void AdamWStep64(const AdamWOptions& o, const AdamWCorrections& k, double lr, double g,
                 AdamWState64& s) {
  s.p -= lr * o.weight_decay * s.p;
  s.m = o.beta1 * s.m + (1 - o.beta1) * g;
  s.v = o.beta2 * s.v + (1 - o.beta2) * g * g;
  s.p -= lr * (s.m / k.c1) / (std::sqrt(s.v / k.c2) + o.eps);
}

}  // namespace lowp
