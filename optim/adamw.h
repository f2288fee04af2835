// AdamW as the reference of `lowp update-error`: the hyperparameters, the
// learning-rate schedule, and one step in float64 (PyTorch's torch.optim.AdamW
// with its default foreach/for-loop order).
//
// Step t = 1, 2, ...: with g the gradient and lr_t the schedule's rate,
//   p = p - lr_t * weight_decay * p                  (decoupled decay, first)
//   m = beta1 * m + (1 - beta1) * g
//   v = beta2 * v + (1 - beta2) * g^2
//   p = p - lr_t * (m / (1 - beta1^t)) / (sqrt(v / (1 - beta2^t)) + eps)
#ifndef LOWP_OPTIM_ADAMW_H_
#define LOWP_OPTIM_ADAMW_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"

namespace lowp {

struct AdamWOptions {
  double lr = 1e-4;  // peak learning rate
  double beta1 = 0.9;
  double beta2 = 0.95;
  double eps = 1e-8;
  double weight_decay = 0.1;
  int64_t steps = 100;
  // "constant", or "cosine": linear warmup from 0 over `warmup` steps, then
  // a cosine from lr to lr * min_lr_ratio at the last step.
  std::string schedule = "constant";
  int64_t warmup = 0;
  double min_lr_ratio = 0.1;
};

inline constexpr int64_t kMaxSteps = 100000;

// InvalidArgument naming the field: lr not finite and > 0, a beta outside
// [0, 1), eps not finite and > 0, weight_decay negative or lr * weight_decay
// >= 1, steps outside 1..kMaxSteps, an unknown schedule, warmup outside
// 0..steps-1, min_lr_ratio outside [0, 1].
absl::Status ValidateAdamW(const AdamWOptions& options);

// The learning rate of step t (1-based).
double LearningRate(const AdamWOptions& options, int64_t t);

// One element's float64 state.
struct AdamWState64 {
  double p = 0, m = 0, v = 0;
};
// The bias corrections of step t: 1 - beta1^t and 1 - beta2^t.
struct AdamWCorrections {
  double c1 = 1, c2 = 1;
  AdamWCorrections(const AdamWOptions& options, int64_t t);
};
// One step of the reference, lr the step's rate, `k` the step's corrections.
void AdamWStep64(const AdamWOptions& options, const AdamWCorrections& k, double lr, double g,
                 AdamWState64& s);

}  // namespace lowp

#endif  // LOWP_OPTIM_ADAMW_H_
