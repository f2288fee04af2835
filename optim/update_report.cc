#include "optim/update_report.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"
#include "formats/option_error.h"

namespace lowp {

namespace internal {
uint64_t Mix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}
}  // namespace internal

using internal::Mix64;

double GradientDraw(uint64_t seed, uint64_t tensor_index, uint64_t i, uint64_t t) {
  const uint64_t h = Mix64(Mix64(Mix64(seed ^ 0x6C6F7770ull) + tensor_index) ^ Mix64(i * 2 + 1) ^
                           (t * 0xD1B54A32D192ED03ull));
  const double sum = static_cast<double>(h & 0xFFFF) + static_cast<double>((h >> 16) & 0xFFFF) +
                     static_cast<double>((h >> 32) & 0xFFFF) + static_cast<double>(h >> 48);
  // Four uniforms on [0, 1): mean 2, variance 1/3.
  return (sum / 65536.0 - 2.0) * std::sqrt(3.0);
}

absl::Status ValidateUpdateError(const UpdateErrorOptions& o) {
  if (absl::Status s = ValidateAdamW(o.adamw); !s.ok()) return s;
  if (!std::isfinite(o.grad_scale) || o.grad_scale <= 0) {
    return OptionError("grad-scale", absl::StrCat("must be a positive number, not ", o.grad_scale));
  }
  if (!(o.grad_signal >= 0 && o.grad_signal <= 1)) {
    return OptionError("grad-signal", absl::StrCat("must be in [0, 1], not ", o.grad_signal));
  }
  if (o.threads < 0 || o.threads > 1024) {
    return OptionError("threads", absl::StrCat("must be 0 to 1024, not ", o.threads));
  }
  return absl::OkStatus();
}

void StateCensus::Merge(const StateCensus& o) {
  grad_underflow += o.grad_underflow;
  grad_overflow += o.grad_overflow;
  moment_underflow += o.moment_underflow;
  moment_overflow += o.moment_overflow;
}

std::vector<int64_t> UpdateCheckpoints(int64_t steps) {
  std::vector<int64_t> out;
  for (int64_t q = 1; q <= 4; ++q) {
    const int64_t t = (steps * q + 3) / 4;
    if (t >= 1 && (out.empty() || out.back() != t)) out.push_back(t);
  }
  return out;
}

double UpdateReport::updates_lost() const {
  return reference_moves == 0 ? 0
                              : static_cast<double>(lost) / static_cast<double>(reference_moves);
}
double UpdateReport::update_ratio() const {
  return intended_squared == 0 ? 1 : applied_dot_intended / intended_squared;
}
double UpdateReport::weight_relative_error(size_t k) const {
  if (k >= movement_squared.size() || movement_squared[k] == 0) return 0;
  return std::sqrt(error_squared[k] / movement_squared[k]);
}
double UpdateReport::m_relative_error() const {
  return m_squared == 0 ? 0 : std::sqrt(m_error_squared / m_squared);
}
double UpdateReport::v_relative_error() const {
  return v_squared == 0 ? 0 : std::sqrt(v_error_squared / v_squared);
}

void UpdateReport::Merge(const UpdateReport& o) {
  elements += o.elements;
  reference_moves += o.reference_moves;
  lost += o.lost;
  applied_dot_intended += o.applied_dot_intended;
  intended_squared += o.intended_squared;
  if (error_squared.size() < o.error_squared.size()) {
    error_squared.resize(o.error_squared.size());
    movement_squared.resize(o.movement_squared.size());
    checkpoints = o.checkpoints;
  }
  for (size_t k = 0; k < o.error_squared.size(); ++k) {
    error_squared[k] += o.error_squared[k];
    movement_squared[k] += o.movement_squared[k];
  }
  m_error_squared += o.m_error_squared;
  m_squared += o.m_squared;
  v_error_squared += o.v_error_squared;
  v_squared += o.v_squared;
  census.Merge(o.census);
}

}  // namespace lowp
