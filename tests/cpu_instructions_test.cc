// The reference against the CPU's own conversion instructions on all 2^32
// float32 inputs, where the CPU has them (skipped visibly where it has not):
//  - F16C vcvtps2ph, in each of its four rounding modes, is fp16 with
//    --nan keep-payload (it keeps the top payload bits and sets the quiet bit);
//  - AVX512-BF16 vcvtneps2bf16 is bf16 nearest-even with --subnormals ftz-daz
//    and --nan keep-payload.
#include <immintrin.h>

#include <atomic>
#include <bit>
#include <cstdint>
#include <cstring>

#include "formats/format.h"
#include "formats/reference.h"
#include "gtest/gtest.h"
#include "tests/sweep.h"

namespace lowp::testing {
namespace {

template <int kImm>
__attribute__((target("avx,f16c"))) void ConvertF16c(const uint32_t* in, uint16_t* out) {
  const __m256 x = _mm256_loadu_ps(reinterpret_cast<const float*>(in));
  _mm_storeu_si128(reinterpret_cast<__m128i*>(out), _mm256_cvtps_ph(x, kImm));
}

template <int kImm>
uint64_t CountF16cMismatches(const ConvertOptions& options) {
  const Format fp16 = *FindFormat("fp16");
  std::atomic<uint64_t> mismatches{0};
  ParallelFor(256, [&](uint32_t chunk) {
    uint32_t in[8];
    uint16_t out[8];
    for (uint64_t b = uint64_t{chunk} << 24; b < (uint64_t{chunk} + 1) << 24; b += 8) {
      for (int k = 0; k < 8; ++k) in[k] = static_cast<uint32_t>(b + k);
      ConvertF16c<kImm>(in, out);
      for (int k = 0; k < 8; ++k) {
        if (EncodeFloat32(fp16, std::bit_cast<float>(in[k]), options) != out[k]) ++mismatches;
      }
    }
  });
  return mismatches.load();
}

class F16c : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!__builtin_cpu_supports("f16c")) GTEST_SKIP() << "this CPU has no F16C";
  }
};

TEST_F(F16c, NearestEven) {
  EXPECT_EQ(CountF16cMismatches<_MM_FROUND_TO_NEAREST_INT>(
                {.rounding = Rounding::kNearestEven, .nan = NanPolicy::kKeepPayload}),
            0u);
}
TEST_F(F16c, TowardZero) {
  EXPECT_EQ(CountF16cMismatches<_MM_FROUND_TO_ZERO>(
                {.rounding = Rounding::kTowardZero, .nan = NanPolicy::kKeepPayload}),
            0u);
}
TEST_F(F16c, TowardPositive) {
  EXPECT_EQ(CountF16cMismatches<_MM_FROUND_TO_POS_INF>(
                {.rounding = Rounding::kTowardPositive, .nan = NanPolicy::kKeepPayload}),
            0u);
}
TEST_F(F16c, TowardNegative) {
  EXPECT_EQ(CountF16cMismatches<_MM_FROUND_TO_NEG_INF>(
                {.rounding = Rounding::kTowardNegative, .nan = NanPolicy::kKeepPayload}),
            0u);
}

__attribute__((target("avx512f,avx512bf16"))) void ConvertBf16(const uint32_t* in, uint16_t* out) {
  const __m512 x = _mm512_loadu_ps(reinterpret_cast<const float*>(in));
  const __m256bh y = _mm512_cvtneps_pbh(x);
  std::memcpy(out, &y, sizeof(y));
}

TEST(Avx512Bf16, NearestEvenFlushingBothWays) {
  if (!__builtin_cpu_supports("avx512bf16")) GTEST_SKIP() << "this CPU has no AVX512-BF16";
  const Format bf16 = *FindFormat("bf16");
  const ConvertOptions options{.subnormals = Subnormals::kFlushBoth,
                               .nan = NanPolicy::kKeepPayload};
  std::atomic<uint64_t> mismatches{0};
  ParallelFor(256, [&](uint32_t chunk) {
    uint32_t in[16];
    uint16_t out[16];
    for (uint64_t b = uint64_t{chunk} << 24; b < (uint64_t{chunk} + 1) << 24; b += 16) {
      for (int k = 0; k < 16; ++k) in[k] = static_cast<uint32_t>(b + k);
      ConvertBf16(in, out);
      for (int k = 0; k < 16; ++k) {
        if (EncodeFloat32(bf16, std::bit_cast<float>(in[k]), options) != out[k]) ++mismatches;
      }
    }
  });
  EXPECT_EQ(mismatches.load(), 0u);
}

}  // namespace
}  // namespace lowp::testing
