#include "calib/smooth.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace lowp {

absl::StatusOr<std::vector<float>> SmoothScales(std::span<const AwqMatrix> group,
                                                const Hessian& h, double alpha) {
  const int64_t n = h.dim();
  if (group.empty()) return absl::InvalidArgumentError("SmoothQuant: an empty group");
  if (h.count() == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("SmoothQuant of '", group[0].name, "': no calibration rows"));
  }
  if (!(alpha >= 0 && alpha <= 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("SmoothQuant of '", group[0].name, "': alpha ", alpha, " is not in [0, 1]"));
  }
  std::vector<float> wmax(static_cast<size_t>(n), 0.0f);
  for (const AwqMatrix& m : group) {
    if (m.rows < 1 || static_cast<int64_t>(m.weight.size()) != m.rows * n) {
      return absl::InvalidArgumentError(absl::StrCat("SmoothQuant of '", m.name, "': ",
                                                     m.weight.size(), " values are not ", m.rows,
                                                     " x ", n));
    }
    for (int64_t r = 0; r < m.rows; ++r) {
      for (int64_t j = 0; j < n; ++j) {
        float& w = wmax[static_cast<size_t>(j)];
        w = std::max(w, std::fabs(m.weight[static_cast<size_t>(r * n + j)]));
      }
    }
  }
  const std::vector<float>& xmax = h.AbsMax();
  std::vector<float> scale(static_cast<size_t>(n), 1.0f);
  for (size_t j = 0; j < scale.size(); ++j) {
    if (!(xmax[j] > 0) || !(wmax[j] > 0) || !std::isfinite(xmax[j])) continue;
    const double s = std::pow(static_cast<double>(xmax[j]), alpha) /
                     std::pow(static_cast<double>(wmax[j]), 1 - alpha);
    scale[j] = static_cast<float>(std::max(s, 1e-5));
  }
  return scale;
}

}  // namespace lowp
