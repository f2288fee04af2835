// The reference against the oracle of tests/oracle.h, and in the same pass
// the SIMD kernels (on the best target of the CPU, through EncodeArray's
// packed storage) against the reference's codes:
//  - NearestEvenAllInputs and Fp32AllInputs (label `exhaustive`): all 2^32
//    float32 inputs, every catalog format under nearest-even with its
//    default policies (fp16, bf16 and fp8_e4m3fn among them), and float32
//    to float32 the identity;
//  - EveryModeSampled (label `slow`): fp16, bf16 and fp8_e4m3fn under the
//    other five deterministic modes (nearest-away, toward-zero,
//    toward-positive, toward-negative, odd), each on every float32 input
//    within 4 ulps of a rounding boundary of the format
//    (RoundingBoundaryInputs: every value, every midpoint, the overflow and
//    underflow thresholds, both signs, and float32's own edges) plus 1 in 64
//    of all 2^32 inputs (StridedInput: i * 64 plus a 6-bit hash of i, so
//    every sign, exponent and top-17-bit mantissa pattern once and the low
//    6 bits spread evenly): 68.2M inputs per mode for fp16 and bf16, 67.1M
//    for fp8_e4m3fn, where until now each had all 2^32.
// The sampled modes share the reference's and the kernels' code path with
// nearest-even up to the one rounding decision, which depends only on where
// the input lies against its neighbours and their midpoint.
// reference_boundary_test checks that decision at the same boundaries for
// every mode and policy of every format, kernels_test the kernels on every
// target, and cpu_instructions_test (where the CPU has F16C) all 2^32 inputs
// of fp16 under toward-zero, toward-positive and toward-negative.
// ctest runs the two groups as separate tests with their own labels
// (tests/CMakeLists.txt).
#include <bit>
#include <cstdint>
#include <iostream>
#include <string>
#include <vector>

#include "formats/format.h"
#include "formats/reference.h"
#include "gtest/gtest.h"
#include "tests/inputs.h"
#include "tests/oracle.h"
#include "tests/sweep.h"

namespace lowp::testing {
namespace {

std::vector<ConvertOptions> DeterministicModes() {
  std::vector<ConvertOptions> cases;
  for (Rounding r : AllRoundings()) {
    if (r != Rounding::kStochastic) cases.push_back({.rounding = r});
  }
  return cases;
}

void ExpectAllInputsAgree(const std::string& name, const std::vector<ConvertOptions>& cases) {
  const Format f = *FindFormat(name);
  const Oracle oracle(f);
  SweepResult result(cases.size());
  CheckAllFloat32(f, oracle, cases, 1, &result, /*kernels=*/true);
  for (size_t c = 0; c < cases.size(); ++c) {
    EXPECT_EQ(result.mismatches(c), 0u) << name << " " << Describe(cases[c]);
  }
  EXPECT_EQ(result.total(), 0u) << result.Report();
}

// Every format under round-to-nearest-even with its default policies. The
// other policies are covered at every rounding boundary by
// reference_boundary_test.
class NearestEvenAllInputs : public ::testing::TestWithParam<std::string> {};

TEST_P(NearestEvenAllInputs, MatchesOracle) { ExpectAllInputsAgree(GetParam(), {{}}); }

INSTANTIATE_TEST_SUITE_P(Catalog, NearestEvenAllInputs,
                         ::testing::Values("fp16", "bf16", "fp8_e4m3fn", "tf32", "fp8_e5m2",
                                           "fp8_e4m3fnuz", "fp8_e5m2fnuz", "fp8_e4m3b11fnuz",
                                           "fp6_e2m3fn", "fp6_e3m2fn", "fp4_e2m1fn", "e8m0fnu",
                                           "int8", "uint8", "int4", "uint4"),
                         [](const auto& info) { return info.param; });

// fp16, bf16 and fp8_e4m3fn under the other deterministic modes, on the
// boundary inputs and 1 in kSampleStride of all inputs.
constexpr uint64_t kSampleStride = 64;

class EveryModeSampled : public ::testing::TestWithParam<std::string> {};

TEST_P(EveryModeSampled, OtherModesMatchOracle) {
  const Format f = *FindFormat(GetParam());
  const Oracle oracle(f);
  std::vector<ConvertOptions> cases;
  for (const ConvertOptions& o : DeterministicModes()) {
    if (o.rounding != Rounding::kNearestEven) cases.push_back(o);
  }
  ASSERT_EQ(cases.size(), 5u);
  const std::vector<uint32_t> boundary = RoundingBoundaryInputs(oracle);
  SweepResult result(cases.size());
  const uint64_t checked =
      CheckSampledFloat32(f, oracle, cases, boundary, kSampleStride, &result, /*kernels=*/true);
  std::cout << GetParam() << ": " << checked << " inputs per mode (" << boundary.size()
            << " at the boundaries, " << (uint64_t{1} << 32) / kSampleStride << " strided)\n";
  RecordProperty("inputs_per_mode", std::to_string(checked));
  EXPECT_GE(checked, (uint64_t{1} << 32) / kSampleStride);
  for (size_t c = 0; c < cases.size(); ++c) {
    EXPECT_EQ(result.mismatches(c), 0u) << GetParam() << " " << Describe(cases[c]);
  }
  EXPECT_EQ(result.total(), 0u) << result.Report();
}

INSTANTIATE_TEST_SUITE_P(Catalog, EveryModeSampled, ::testing::Values("fp16", "bf16", "fp8_e4m3fn"),
                         [](const auto& info) { return info.param; });

// float32 to float32 is the identity on every non-NaN input.
TEST(Fp32AllInputs, IsIdentity) {
  const Format f = *FindFormat("fp32");
  std::atomic<uint64_t> mismatches{0};
  ParallelFor(256, [&](uint32_t chunk) {
    for (uint64_t b = uint64_t{chunk} << 24; b < (uint64_t{chunk} + 1) << 24; ++b) {
      const uint32_t bits = static_cast<uint32_t>(b);
      const float x = std::bit_cast<float>(bits);
      const uint32_t expected = std::isnan(x) ? (bits & 0x80000000u) | 0x7FC00000u : bits;
      if (EncodeFloat32(f, x) != expected) ++mismatches;
    }
  });
  EXPECT_EQ(mismatches.load(), 0u);
}

}  // namespace
}  // namespace lowp::testing
