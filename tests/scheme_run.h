// Shared by the scheme tests: make a scheme by name, and run it over a tensor
// the way the streaming driver does (Observe over every chunk when the scheme
// asks for a tensor pass, then Apply chunk by chunk of ChunkRows rows).
#ifndef LOWP_TESTS_SCHEME_RUN_H_
#define LOWP_TESTS_SCHEME_RUN_H_

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "quant/scheme.h"

namespace lowp::testing {

inline std::unique_ptr<Scheme> Make(const std::string& name) {
  absl::StatusOr<std::unique_ptr<Scheme>> scheme = ParseScheme(name);
  EXPECT_TRUE(scheme.ok()) << name << ": " << scheme.status();
  return scheme.ok() ? std::move(*scheme) : nullptr;
}

struct Result {
  std::vector<float> out;
  SchemeCounts counts;
  StoredChunk stored;
  TensorContext context;
};

inline Result RunScheme(const Scheme& scheme, const std::vector<float>& in, int64_t cols,
                        bool keep_stored = true) {
  Result r;
  r.out.assign(in.size(), -12345.0f);  // a value no scheme writes
  const int64_t rows = static_cast<int64_t>(in.size()) / cols;
  const int64_t chunk = scheme.ChunkRows(cols);
  if (scheme.NeedsTensorPass()) {
    for (int64_t row = 0; row < rows; row += chunk) {
      const int64_t n = std::min(chunk, rows - row) * cols;
      TensorContext part;
      scheme.Observe(std::span<const float>(in).subspan(row * cols, n), cols, part);
      r.context.Merge(part);
    }
  }
  for (int64_t row = 0; row < rows; row += chunk) {
    const int64_t n = std::min(chunk, rows - row) * cols;
    TensorContext context = r.context;
    context.first_element = row * cols;
    scheme.Apply(std::span<const float>(in).subspan(row * cols, n), cols, context,
                 std::span<float>(r.out).subspan(row * cols, n), r.counts,
                 keep_stored ? &r.stored : nullptr);
  }
  return r;
}

// Awkward data for the scalar checks: magnitudes spread over 2^-40..2^40
// eight elements at a time, exact ties, a stretch of zeros (elements
// 130..169), NaN (3, -NaN at 400), +-Inf (250, 251) and one huge value last
// (the last block's and the tensor's amax). rows * cols must exceed 400.
inline std::vector<float> AwkwardTensor(int64_t rows, int64_t cols, uint32_t seed = 20240607) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_int_distribution<int> shift(-40, 40);
  std::vector<float> x(static_cast<size_t>(rows * cols));
  int s = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    if (i % 8 == 0) s = shift(rng);
    x[i] = std::ldexp(normal(rng), s);
    if (i % 37 == 5) x[i] = std::ldexp(std::round(normal(rng) * 8) + 0.5f, s - 3);  // ties
  }
  std::fill(x.begin() + 130, x.begin() + 170, 0.0f);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  x[3] = nan;
  x[250] = inf;
  x[251] = -inf;
  x[400] = -nan;
  x.back() = 1e30f;
  return x;
}

}  // namespace lowp::testing

#endif  // LOWP_TESTS_SCHEME_RUN_H_
