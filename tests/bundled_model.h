// The bundled model (tests/data/stories260K-hf) and tokens sampled from it,
// for the evaluator's tests.
#ifndef LOWP_TESTS_BUNDLED_MODEL_H_
#define LOWP_TESTS_BUNDLED_MODEL_H_

#include <cstdint>
#include <string>
#include <vector>

#include "eval/sample.h"
#include "gtest/gtest.h"
#include "model/checkpoint.h"

namespace lowp::testing {

inline const std::string kBundledModel = std::string(LOWP_TEST_DATA_DIR) + "/stories260K-hf";

inline Checkpoint BundledCheckpoint() {
  absl::StatusOr<Checkpoint> w = Checkpoint::OpenModel(kBundledModel, {});
  EXPECT_TRUE(w.ok()) << w.status();
  return *std::move(w);
}

// `count` sequences of `length` tokens sampled at temperature 1.
inline std::vector<int32_t> SampledTokens(const Checkpoint& w, int64_t count, int64_t length,
                                          uint64_t seed) {
  SampleOptions o;
  o.count = count;
  o.length = length;
  o.seed = seed;
  absl::StatusOr<std::vector<int32_t>> t = SampleTokens(w, o);
  EXPECT_TRUE(t.ok()) << t.status();
  return t.ok() ? *t : std::vector<int32_t>();
}

}  // namespace lowp::testing

#endif  // LOWP_TESTS_BUNDLED_MODEL_H_
