// Every format x rounding mode x policy, on the inputs where rounding
// decisions change: every representable value and every midpoint between
// neighbours (and the would-be values past the ends), each with the float32
// values up to 4 ulps either side (for tf32 in every 8th binade and at the
// ends), plus a stride of 1/4099 of all float32 bit patterns. Complements
// the exhaustive sweeps, which cover fewer pairs.
#include <bit>
#include <cmath>
#include <set>
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

class BoundaryInputs_ : public ::testing::TestWithParam<std::string> {};

TEST_P(BoundaryInputs_, EveryModeAndPolicyMatchesOracle) {
  const Format f = *FindFormat(GetParam());
  const Oracle oracle(f);
  // tf32's 2^19 values would give 10.5M inputs (38 of this test's 54 s on
  // two cores); every 8th binade and the ends keep theirs: 2.5M, as many as
  // fp16 has.
  const int binade_stride = oracle.values().size() > (size_t{1} << 17) ? 8 : 1;
  const std::vector<uint32_t> inputs = BoundaryInputs(oracle, 4099, binade_stride);
  const std::vector<ConvertOptions> cases = AllCases(f);
  SweepResult result(cases.size());
  ParallelFor(64, [&](uint32_t chunk) {
    for (size_t k = chunk; k < inputs.size(); k += 64) {
      CheckRange(f, oracle, cases, inputs[k], uint64_t{inputs[k]} + 1, 1, &result);
    }
  });
  for (size_t c = 0; c < cases.size(); ++c) {
    EXPECT_EQ(result.mismatches(c), 0u) << f.name << " " << Describe(cases[c]);
  }
  EXPECT_EQ(result.total(), 0u) << result.Report();
}

INSTANTIATE_TEST_SUITE_P(AllFormats, BoundaryInputs_,
                         ::testing::Values("tf32", "fp16", "bf16", "fp8_e4m3fn", "fp8_e5m2",
                                           "fp8_e4m3fnuz", "fp8_e5m2fnuz", "fp8_e4m3b11fnuz",
                                           "fp6_e2m3fn", "fp6_e3m2fn", "fp4_e2m1fn", "e8m0fnu",
                                           "int8", "uint8", "int4", "uint4", "e3m4", "e2m5fn",
                                           "e6m1fnuz", "float(e=3,m=0,inf=fn)",
                                           "float(e=4,m=3,bias=3,inf=none)", "int3", "uint12"),
                         [](const auto& info) {
                           std::string name;
                           for (char c : info.param)
                             name += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
                           return name;
                         });

}  // namespace
}  // namespace lowp::testing
