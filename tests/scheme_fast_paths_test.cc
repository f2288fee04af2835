// The schemes whose fake-quant values (Apply without a StoredChunk) go
// through the block kernels give the values and counts of their stored path
// (the codes and scales, or ggml's bytes encoded and decoded), bit for bit:
// FORMAT-channel and FORMAT-tensor for every signed float format of the
// catalog and every scale format, nvfp4, and the codec schemes q5_1,
// ggml-mxfp4 and ggml-nvfp4, on adversarial data (NaN, +-Inf, -0, blocks of
// zeros, subnormals, values near FLT_MAX, tiny and huge blocks, ties) and
// row lengths that leave short blocks.
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "formats/format.h"
#include "gtest/gtest.h"
#include "tests/scheme_run.h"

namespace lowp::testing {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

// Rows of mixed character: each stretch of 16 elements gets its own scale
// (1e-42 .. 1e37) or is all zero, with specials sprinkled in.
std::vector<float> Adversarial(uint32_t seed, size_t n) {
  static const float kSpecial[] = {kNaN, -kNaN, kInf, -kInf, 0.0f, -0.0f, 1e-45f, -1e-40f,
                                   3e38f, -3.4e38f, 6.0f, -5.0f, 2.5f, 0.75f, 448.0f, -0.0f};
  static const float kScales[] = {1, 1e-42f, 1e-39f, 1e-30f, 2e-38f, 0.02f, 1e10f, 1e37f, 0};
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0, 1);
  std::uniform_int_distribution<int> special(0, std::size(kSpecial) - 1);
  std::uniform_int_distribution<int> scale(0, std::size(kScales) - 1);
  std::uniform_real_distribution<float> u(0, 1);
  std::vector<float> v(n);
  float s = 1;
  for (size_t i = 0; i < n; ++i) {
    if (i % 16 == 0) s = kScales[scale(rng)];
    const float r = u(rng);
    v[i] = r < 0.03f ? kSpecial[special(rng)] : (r < 0.1f ? std::round(normal(rng) * 4) * s
                                                          : normal(rng) * s);
  }
  return v;
}

void ExpectSameRun(const std::string& name, const std::vector<float>& x, int64_t cols) {
  SCOPED_TRACE(name + " cols " + std::to_string(cols));
  const std::unique_ptr<Scheme> scheme = Make(name);
  ASSERT_NE(scheme, nullptr);
  const Result stored = RunScheme(*scheme, x, cols, /*keep_stored=*/true);
  const Result fast = RunScheme(*scheme, x, cols, /*keep_stored=*/false);
  EXPECT_EQ(stored.counts.clipped, fast.counts.clipped);
  EXPECT_EQ(stored.counts.subnormal, fast.counts.subnormal);
  for (size_t i = 0; i < x.size(); ++i) {
    ASSERT_EQ(std::bit_cast<uint32_t>(stored.out[i]), std::bit_cast<uint32_t>(fast.out[i]))
        << "at " << i << ": x " << x[i] << ", stored " << stored.out[i] << ", fast "
        << fast.out[i];
  }
}

const int64_t kCols[] = {1, 7, 16, 32, 48, 64, 100, 131, 256};

TEST(SchemeFastPaths, ScaledFloatEqualsItsStoredPath) {
  std::vector<std::string> names;
  for (const Format& f : Catalog()) {
    if (!f.is_float() || !f.is_signed || !f.has_zero) continue;
    for (const char* g : {"-channel", "-tensor"}) {
      for (const char* s : {"", ":scale=fp16", ":scale=bf16"}) names.push_back(f.name + g + s);
    }
  }
  ASSERT_GT(names.size(), 12u);
  uint32_t seed = 1;
  for (const std::string& name : names) {
    for (const int64_t cols : kCols) ExpectSameRun(name, Adversarial(seed++, 4 * 256), cols);
  }
}

TEST(SchemeFastPaths, BlockFormatsEqualTheirStoredPath) {
  uint32_t seed = 100;
  for (const char* name : {"nvfp4", "q5_1", "ggml-mxfp4", "ggml-nvfp4"}) {
    for (const int64_t cols : kCols) {
      for (int k = 0; k < 8; ++k) ExpectSameRun(name, Adversarial(seed++, 8 * 256), cols);
    }
  }
}

TEST(SchemeFastPaths, Q5_1WithTinyRangesEqualsGgml) {
  // Blocks whose (max - min) / 31 is below 2^-128 (1 / d overflows) or
  // subnormal, and ranges that overflow float32.
  const float kRanges[] = {1e-44f, 1e-40f, 3e-39f, 2e-38f, 1e-37f, 3e38f};
  std::vector<float> x;
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> u(-1, 1);
  for (const float r : kRanges) {
    for (int j = 0; j < 64; ++j) x.push_back(j == 0 ? -r : (j == 1 ? r : u(rng) * r));
  }
  for (const int64_t cols : {int64_t{32}, int64_t{64}, int64_t{48}}) {
    std::vector<float> y(x.begin(), x.begin() + x.size() / cols * cols);
    ExpectSameRun("q5_1", y, cols);
  }
}

TEST(SchemeFastPaths, Mxfp4ExponentEqualsGgmlForEveryBinade) {
  // One block per amax: every exponent field, significands at and around
  // the edges where floorf(log2f(amax)) is asked of the C library.
  const uint32_t kFractions[] = {0,        1,        0x1FFF,   0x2000,  0x400000,
                                 0x7FEFFF, 0x7FF000, 0x7FFFFE, 0x7FFFFF};
  std::vector<float> x;
  for (uint32_t biased = 0; biased < 255; ++biased) {
    for (const uint32_t fraction : kFractions) {
      const float amax = std::bit_cast<float>(biased << 23 | fraction);
      for (int j = 0; j < 32; ++j) {
        x.push_back(j == 0 ? amax : (j % 2 ? -amax : amax) * (static_cast<float>(j) / 37));
      }
    }
  }
  ExpectSameRun("ggml-mxfp4", x, 32);
  ExpectSameRun("ggml-nvfp4", x, 64);
}

}  // namespace
}  // namespace lowp::testing
