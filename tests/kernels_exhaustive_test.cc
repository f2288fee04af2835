// The SIMD kernels against the scalar reference on a quarter of all 2^32
// float32 inputs (every sign, exponent and top-30-bit mantissa pattern, the
// low bits hashed: StridedInput), for the cases that
// reference_exhaustive_test (which checks the kernels under every catalog
// format at nearest-even on all inputs, and under every deterministic mode
// of fp16, bf16 and fp8_e4m3fn on a sample, on the best target) leaves out:
// stochastic rounding (fp16; fp4 through the packed 4-bit path) and the
// non-default policies at once (bf16, fp8_e4m3fn). All inputs cost ~50 s of
// reference calls each on two cores, a quarter of the suite's serial time
// for these four; the rest of the format x mode x policy product is sampled
// too: kernels_test checks all of it on every target at the rounding
// boundaries, and the other targets get every 256th input here. Labelled
// `exhaustive` (they run alone, on every core).
#include <bit>
#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "formats/format.h"
#include "formats/packing.h"
#include "formats/reference.h"
#include "gtest/gtest.h"
#include "hwy/targets.h"
#include "kernels/convert.h"
#include "tests/sweep.h"

namespace lowp::testing {
namespace {

// Inputs StridedInput(i, stride) for i in [0, 2^32 / stride), stride a
// power of two: the kernel's codes for element i (stochastic index i)
// against EncodeFloat32(x, o, i).
void SweepAgainstReference(const Format& f, const std::vector<ConvertOptions>& cases,
                           uint64_t stride, SweepResult* result) {
  const uint64_t total = ((uint64_t{1} << 32) + stride - 1) / stride;
  constexpr uint64_t kBlock = uint64_t{1} << 16;
  const uint64_t blocks = (total + kBlock - 1) / kBlock;
  ParallelFor(static_cast<uint32_t>(blocks), [&](uint32_t block) {
    const uint64_t first = uint64_t{block} * kBlock;
    const size_t n = static_cast<size_t>(std::min(kBlock, total - first));
    thread_local std::vector<float> in;
    thread_local std::vector<uint8_t> stored;
    thread_local std::vector<uint32_t> codes;
    in.resize(n);
    for (size_t i = 0; i < n; ++i) {
      in[i] = std::bit_cast<float>(StridedInput(first + i, stride));
    }
    stored.resize(StorageBytes(f, n));
    for (size_t c = 0; c < cases.size(); ++c) {
      if (!EncodeArray(f, in, stored, cases[c], {.first_index = first, .threads = 1}).ok()) {
        std::abort();
      }
      codes.clear();
      if (!UnpackCodes(f, stored, 0, &codes).ok()) std::abort();
      for (size_t i = 0; i < n; ++i) {
        const uint32_t expected = EncodeFloat32(f, in[i], cases[c], first + i);
        if (codes[i] != expected) {
          result->Record(c, std::bit_cast<uint32_t>(in[i]), expected, codes[i]);
        }
      }
    }
  });
}

void ExpectAgreement(const std::string& name, const std::vector<ConvertOptions>& cases,
                     uint64_t stride) {
  const Format f = *FindFormat(name);
  SweepResult result(cases.size());
  SweepAgainstReference(f, cases, stride, &result);
  for (size_t c = 0; c < cases.size(); ++c) {
    EXPECT_EQ(result.mismatches(c), 0u) << name << " " << Describe(cases[c]);
  }
  EXPECT_EQ(result.total(), 0u) << result.Report();
}

const ConvertOptions kStochastic{.rounding = Rounding::kStochastic, .seed = 0xC0FFEE};
// Every non-default policy at once: saturation, flushing both ways, payloads.
const ConvertOptions kPolicies{.overflow = Overflow::kSaturate,
                               .subnormals = Subnormals::kFlushBoth,
                               .nan = NanPolicy::kKeepPayload};

struct Case {
  std::string format;
  ConvertOptions options;
  std::string label;
};

void PrintTo(const Case& c, std::ostream* os) { *os << c.format << " " << c.label; }

class QuarterOfInputs : public ::testing::TestWithParam<Case> {};

TEST_P(QuarterOfInputs, BestTargetMatchesReference) {
  ExpectAgreement(GetParam().format, {GetParam().options}, 4);
}

INSTANTIATE_TEST_SUITE_P(Kernels, QuarterOfInputs,
                         ::testing::Values(Case{"fp16", kStochastic, "stochastic"},
                                           Case{"fp4_e2m1fn", kStochastic, "stochastic"},
                                           Case{"bf16", kPolicies, "policies"},
                                           Case{"fp8_e4m3fn", kPolicies, "policies"}),
                         [](const auto& info) {
                           return info.param.format + "_" + info.param.label;
                         });

// Every target but the best (which the sweeps above cover) on every 256th
// input, for the formats and modes the kernels treat differently.
TEST(OtherTargets, SampledInputsMatchReference) {
  const std::vector<int64_t> targets = hwy::SupportedAndGeneratedTargets();
  ASSERT_FALSE(targets.empty());
  const std::vector<ConvertOptions> cases = {{},
                                             kStochastic,
                                             kPolicies,
                                             {.rounding = Rounding::kTowardNegative},
                                             {.rounding = Rounding::kOdd}};
  for (size_t t = 1; t < targets.size(); ++t) {
    hwy::SetSupportedTargetsForTest(targets[t]);
    SCOPED_TRACE(hwy::TargetName(targets[t]));
    for (const char* name : {"fp16", "bf16", "fp8_e4m3fn", "fp8_e5m2fnuz", "fp6_e3m2fn",
                             "fp4_e2m1fn", "e8m0fnu", "int8", "uint4"}) {
      std::vector<ConvertOptions> valid;
      for (const ConvertOptions& o : cases) {
        if (ValidateOptions(*FindFormat(name), o).ok()) valid.push_back(o);
      }
      ExpectAgreement(name, valid, 256);
    }
  }
  hwy::SetSupportedTargetsForTest(0);
}

}  // namespace
}  // namespace lowp::testing
