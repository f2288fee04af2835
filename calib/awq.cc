#include "calib/awq.h"

#include <cblas.h>

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "kernels/thread_pool.h"
#include "model/blas.h"

namespace lowp {
namespace {

// Rows of D per OpenBLAS call (fixed: the sums do not depend on threads).
constexpr int64_t kRowTile = 64;

// tr(D H D^T) for D = w - q ([rows, n]), H full [n, n]: per row d H d^T,
// row tiles' sums added in order.
double OutputError(std::span<const float> w, std::span<const float> q, int64_t rows, int64_t n,
                   const std::vector<double>& h, int threads) {
  const size_t tiles = static_cast<size_t>((rows + kRowTile - 1) / kRowTile);
  std::vector<double> sums(tiles, 0.0);
  ParallelFor(tiles, threads, [&](size_t t) {
    const int64_t r0 = static_cast<int64_t>(t) * kRowTile, r1 = std::min(rows, r0 + kRowTile);
    std::vector<double> d(static_cast<size_t>((r1 - r0) * n)), dh(d.size());
    for (int64_t i = 0; i < (r1 - r0) * n; ++i) {
      d[static_cast<size_t>(i)] = static_cast<double>(w[static_cast<size_t>(r0 * n + i)]) -
                                  q[static_cast<size_t>(r0 * n + i)];
    }
    cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, static_cast<int>(r1 - r0),
                static_cast<int>(n), static_cast<int>(n), 1.0, d.data(), static_cast<int>(n),
                h.data(), static_cast<int>(n), 0.0, dh.data(), static_cast<int>(n));
    double s = 0;
    for (size_t i = 0; i < d.size(); ++i) s += d[i] * dh[i];
    sums[t] = s;
  });
  double total = 0;
  for (double s : sums) total += s;
  return total;
}

}  // namespace

void QuantizeScaled(std::span<const float> weight, std::span<const float> scale,
                    const Scheme& scheme, std::span<float> out, int threads) {
  const int64_t n = static_cast<int64_t>(scale.size());
  std::vector<float> scaled(weight.size());
  for (size_t i = 0; i < weight.size(); ++i) scaled[i] = weight[i] * scale[i % n];
  TensorContext context;
  if (scheme.NeedsTensorPass()) scheme.Observe(scaled, n, context);
  const int64_t rows = static_cast<int64_t>(weight.size()) / n;
  const int64_t chunk = std::max<int64_t>(scheme.ChunkRows(n), 1);
  const size_t chunks = static_cast<size_t>((rows + chunk - 1) / chunk);
  ParallelFor(chunks, ResolveThreads(threads), [&](size_t c) {
    const int64_t r0 = static_cast<int64_t>(c) * chunk, r1 = std::min(rows, r0 + chunk);
    TensorContext here = context;
    here.first_element = r0 * n;
    SchemeCounts counts;
    const size_t at = static_cast<size_t>(r0 * n), size = static_cast<size_t>((r1 - r0) * n);
    scheme.Apply(std::span<const float>(scaled).subspan(at, size), n, here, out.subspan(at, size),
                 counts);
  });
}

absl::StatusOr<AwqScales> SearchAwqScales(std::span<const AwqMatrix> group, const Hessian& h,
                                          const AwqOptions& options) {
  const int64_t n = h.dim();
  if (h.count() == 0) {
    return absl::InvalidArgumentError(absl::StrCat("AWQ of '", group.empty() ? "" : group[0].name,
                                                   "': no calibration rows reached it"));
  }
  for (const AwqMatrix& m : group) {
    if (m.rows < 1 || static_cast<int64_t>(m.weight.size()) != m.rows * n || m.scheme == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat("AWQ of '", m.name, "': not ", m.rows, " rows of ", n, " columns"));
    }
  }
  if (options.grid < 1 || options.grid > 1000) {
    return absl::InvalidArgumentError(absl::StrCat("AWQ: a grid of ", options.grid, " points"));
  }
  BlasSetup();
  std::vector<double> full(static_cast<size_t>(n * n));
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t j = i; j < n; ++j) {
      full[static_cast<size_t>(i * n + j)] = full[static_cast<size_t>(j * n + i)] = h.at(i, j);
    }
  }
  const std::vector<double> mean_abs = h.MeanAbs();
  const int threads = ResolveThreads(options.threads);
  AwqScales best;
  std::vector<float> s(static_cast<size_t>(n)), q, back;
  const int trials = options.alpha >= 0 ? 1 : options.grid;
  for (int k = 0; k < trials; ++k) {
    const double alpha = options.alpha >= 0 ? options.alpha : static_cast<double>(k) / options.grid;
    float lo = INFINITY, hi = 0;
    for (int64_t j = 0; j < n; ++j) {
      const float v =
          std::max(static_cast<float>(std::pow(mean_abs[static_cast<size_t>(j)], alpha)), 1e-4f);
      s[static_cast<size_t>(j)] = v;
      lo = std::min(lo, v);
      hi = std::max(hi, v);
    }
    const float norm = std::sqrt(hi * lo);
    for (float& v : s) v /= norm;
    double error = 0;
    for (const AwqMatrix& m : group) {
      q.resize(m.weight.size());
      QuantizeScaled(m.weight, s, *m.scheme, q, threads);
      back.resize(q.size());
      for (size_t i = 0; i < q.size(); ++i) back[i] = q[i] / s[i % static_cast<size_t>(n)];
      error += OutputError(m.weight, back, m.rows, n, full, threads);
    }
    error /= static_cast<double>(h.count());
    if (k == 0) best.nearest_error = options.alpha >= 0 ? NAN : error;
    if (k == 0 || error < best.error) {
      best.error = error;
      best.alpha = alpha;
      best.scale = s;
    }
  }
  return best;
}

}  // namespace lowp
