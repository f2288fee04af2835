// Every float32 input (all 2^32 bit patterns) through the reference, checked
// against the oracle of tests/oracle.h; in the same pass the SIMD kernels (on
// the best target of the CPU) must give the reference's codes and events on
// every input. Labelled `exhaustive` in CMake.
#include <bit>
#include <cstdint>
#include <string>
#include <vector>

#include "formats/format.h"
#include "formats/reference.h"
#include "gtest/gtest.h"
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
                         ::testing::Values("tf32", "fp8_e5m2", "fp8_e4m3fnuz", "fp8_e5m2fnuz",
                                           "fp8_e4m3b11fnuz", "fp6_e2m3fn", "fp6_e3m2fn",
                                           "fp4_e2m1fn", "e8m0fnu", "int8", "uint8", "int4",
                                           "uint4"),
                         [](const auto& info) { return info.param; });

// fp16, bf16 and fp8_e4m3fn under every deterministic rounding mode.
class EveryModeAllInputs : public ::testing::TestWithParam<std::string> {};

TEST_P(EveryModeAllInputs, MatchesOracle) {
  ExpectAllInputsAgree(GetParam(), DeterministicModes());
}

INSTANTIATE_TEST_SUITE_P(Catalog, EveryModeAllInputs,
                         ::testing::Values("fp16", "bf16", "fp8_e4m3fn"),
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
