// What the SIMD kernel tests share: running a body on every Highway target
// this binary has and this CPU runs, and comparing float arrays bit for bit.
#ifndef LOWP_TESTS_SIMD_TARGETS_H_
#define LOWP_TESTS_SIMD_TARGETS_H_

#include <bit>
#include <cstdint>
#include <vector>

#include "gtest/gtest.h"
#include "hwy/targets.h"

namespace lowp::testing {

template <class Body>
void ForEachTarget(Body body) {
  for (int64_t target : hwy::SupportedAndGeneratedTargets()) {
    hwy::SetSupportedTargetsForTest(target);
    SCOPED_TRACE(hwy::TargetName(target));
    body();
  }
  hwy::SetSupportedTargetsForTest(0);
}

// Bit for bit (so +0 differs from -0 and NaN equals NaN of the same bits).
inline void ExpectSameBits(const std::vector<float>& want, const std::vector<float>& got) {
  ASSERT_EQ(want.size(), got.size());
  for (size_t i = 0; i < want.size(); ++i) {
    ASSERT_EQ(std::bit_cast<uint32_t>(want[i]), std::bit_cast<uint32_t>(got[i]))
        << "at " << i << ": " << want[i] << " vs " << got[i];
  }
}

}  // namespace lowp::testing

#endif  // LOWP_TESTS_SIMD_TARGETS_H_
