// codecs/ggml_vec_dot.h against llama.cpp's CPU backend itself: the values
// ggml_get_type_traits_cpu(T)->from_float makes of 10 rows of 256 inputs
// for each vec_dot_type (tests/data/ggml/vec-dot.gguf; PROVENANCE.md says
// how it was made), bit for bit.
#include <bit>
#include <cstdint>
#include <string>
#include <vector>

#include "codecs/ggml_vec_dot.h"
#include "gtest/gtest.h"
#include "io/tensor_set.h"

namespace lowp {
namespace {

const std::string kData = LOWP_TEST_DATA_DIR;

std::vector<float> Values(const TensorSet& set, const std::string& name) {
  for (const TensorView& t : set.tensors()) {
    if (t.name != name) continue;
    std::vector<float> v(t.bytes.size() / 4);
    std::memcpy(v.data(), t.bytes.data(), t.bytes.size());
    return v;
  }
  ADD_FAILURE() << "no tensor " << name;
  return {};
}

TEST(GgmlVecDot, EqualsTheCpuBackendsConversionBitForBit) {
  absl::StatusOr<TensorSet> set = TensorSet::Open(kData + "/ggml/vec-dot.gguf");
  ASSERT_TRUE(set.ok()) << set.status();
  for (const ggml::Type t : {ggml::Type::kQ8_0, ggml::Type::kQ8_1, ggml::Type::kQ8_K,
                             ggml::Type::kF16, ggml::Type::kBF16}) {
    const std::string name(ggml::Info(t).name);
    SCOPED_TRACE(name);
    const std::vector<float> x = Values(*set, name + ".x"), want = Values(*set, name + ".y");
    ASSERT_EQ(x.size(), 2560u);
    ASSERT_EQ(want.size(), x.size());
    std::vector<float> got(x.size());
    ggml::RoundForVecDot(t, x, got);
    int differ = 0;
    for (size_t i = 0; i < x.size(); ++i) {
      if (std::bit_cast<uint32_t>(got[i]) != std::bit_cast<uint32_t>(want[i]) && ++differ <= 3) {
        ADD_FAILURE() << "element " << i << " (" << x[i] << "): " << got[i] << " != " << want[i];
      }
    }
    EXPECT_EQ(differ, 0);
    // In place too.
    std::vector<float> same = x;
    ggml::RoundForVecDot(t, same, same);
    EXPECT_EQ(same, got);
  }
}

TEST(GgmlVecDot, TypesAsTypeTraitsCpuNames) {
  using T = ggml::Type;
  EXPECT_EQ(ggml::VecDotType(T::kQ4_0), T::kQ8_0);
  EXPECT_EQ(ggml::VecDotType(T::kIQ4_NL), T::kQ8_0);
  EXPECT_EQ(ggml::VecDotType(T::kMXFP4), T::kQ8_0);
  EXPECT_EQ(ggml::VecDotType(T::kQ5_1), T::kQ8_1);
  EXPECT_EQ(ggml::VecDotType(T::kQ6_K), T::kQ8_K);
  EXPECT_EQ(ggml::VecDotType(T::kIQ4_XS), T::kQ8_K);
  EXPECT_EQ(ggml::VecDotType(T::kIQ2_XXS), T::kQ8_K);
  EXPECT_EQ(ggml::VecDotType(T::kBF16), T::kBF16);
  EXPECT_EQ(ggml::VecDotType(T::kF32), T::kF32);
  EXPECT_FALSE(ggml::VecDotType(T::kI8).has_value());
}

}  // namespace
}  // namespace lowp
