// Inputs and option sets shared by the sampled (non-exhaustive) sweeps.
#ifndef LOWP_TESTS_INPUTS_H_
#define LOWP_TESTS_INPUTS_H_

#include <bit>
#include <cmath>
#include <cstdint>
#include <set>
#include <vector>

#include "formats/format.h"
#include "formats/reference.h"
#include "tests/oracle.h"

namespace lowp::testing {

// The inputs where rounding decisions change, enumerated from the format
// (both signs; the oracle's table holds every finite value of either sign):
// every representable value (zero, the subnormals, the smallest normal, the
// largest finite value), every midpoint between neighbours (the underflow
// threshold between 0 and the smallest subnormal among them) and the
// would-be values one step past each end with their midpoints (the
// overflow threshold), each with the float32 values up to 4 ulps either
// side; plus float32's own edges (zeros, the smallest subnormal, the
// subnormal/normal boundary, the largest finite, infinities, NaNs with the
// smallest and largest payloads). Sorted by bit pattern, each once.
// With `binade_stride` k > 1, the boundaries inside a float32 binade are
// kept only in every k-th binade and the four at each end (where the
// subnormals and the overflow threshold lie): a format with float32's
// exponent range (tf32) repeats one pattern in each of 254 binades.
inline std::vector<uint32_t> RoundingBoundaryInputs(const Oracle& oracle, int binade_stride = 1) {
  std::vector<double> anchors = oracle.values();
  const size_t n = anchors.size();
  anchors.push_back(oracle.above());
  anchors.push_back(oracle.below());
  anchors.push_back((oracle.values()[n - 1] + oracle.above()) / 2);
  anchors.push_back((oracle.values()[0] + oracle.below()) / 2);
  for (size_t i = 0; i + 1 < n; ++i)
    anchors.push_back((oracle.values()[i] + oracle.values()[i + 1]) / 2);
  std::set<uint32_t> inputs;
  for (double a : anchors) {
    if (std::fabs(a) > 3.4028234663852886e38) continue;
    const float nearest = static_cast<float>(a);
    const int binade = (std::bit_cast<uint32_t>(nearest) >> 23) & 0xFF;
    if (binade >= 4 && binade < 251 && binade % binade_stride != 0) continue;
    float up = nearest, down = nearest;
    inputs.insert(std::bit_cast<uint32_t>(nearest));
    for (int k = 0; k < 4; ++k) {
      up = std::nextafter(up, INFINITY);
      down = std::nextafter(down, -INFINITY);
      inputs.insert(std::bit_cast<uint32_t>(up));
      inputs.insert(std::bit_cast<uint32_t>(down));
    }
  }
  for (uint32_t sign : {0u, 0x80000000u}) {
    for (uint32_t magnitude :
         {0x00000000u, 0x00000001u, 0x007FFFFFu, 0x00800000u, 0x7F7FFFFFu, 0x7F800000u, 0x7F800001u,
          0x7FBFFFFFu, 0x7FC00000u, 0x7FC00001u, 0x7FFFFFFFu}) {
      inputs.insert(sign | magnitude);
    }
  }
  return {inputs.begin(), inputs.end()};
}

// RoundingBoundaryInputs plus every `stride`-th float32 bit pattern.
inline std::vector<uint32_t> BoundaryInputs(const Oracle& oracle, uint64_t stride = 4099,
                                            int binade_stride = 1) {
  const std::vector<uint32_t> boundary = RoundingBoundaryInputs(oracle, binade_stride);
  std::set<uint32_t> inputs(boundary.begin(), boundary.end());
  for (uint64_t b = 0; b < (uint64_t{1} << 32); b += stride)
    inputs.insert(static_cast<uint32_t>(b));
  return {inputs.begin(), inputs.end()};
}

// Every rounding mode x overflow x subnormal x NaN policy the format takes.
inline std::vector<ConvertOptions> AllCases(const Format& f) {
  std::vector<Overflow> overflows = {Overflow::kFormatDefault, Overflow::kSaturate};
  if (f.has_infinity()) overflows.push_back(Overflow::kNan);
  std::vector<ConvertOptions> cases;
  for (Rounding r : AllRoundings()) {
    for (Overflow o : overflows) {
      for (Subnormals s : {Subnormals::kKeep, Subnormals::kFlushToZero, Subnormals::kInputsAreZero,
                           Subnormals::kFlushBoth}) {
        for (NanPolicy nan : {NanPolicy::kCanonical, NanPolicy::kKeepPayload}) {
          cases.push_back({.rounding = r, .overflow = o, .subnormals = s, .nan = nan, .seed = 99});
        }
      }
    }
  }
  return cases;
}

}  // namespace lowp::testing

#endif  // LOWP_TESTS_INPUTS_H_
