// SetCode (codecs/ggml_codes.cc) against the decoders: writing code c as
// element e of a real block changes element e's decoded value and no other,
// every code gives different bytes, and exactly one code gives back the
// block as ggml's encoder wrote it (SetCode writes exactly that element's bits);
// SetCodes writes a block's codes as SetCode writes them one by one.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "codecs/ggml.h"
#include "gtest/gtest.h"

namespace lowp::ggml {
namespace {

class EveryCodedType : public ::testing::TestWithParam<Type> {};

TEST_P(EveryCodedType, SetCodeWritesExactlyThatElement) {
  const TypeInfo& info = Info(GetParam());
  const int codes = CodeCount(info.type);
  ASSERT_GT(codes, 0);
  std::mt19937 rng(7);
  std::normal_distribution<float> normal;
  std::vector<float> x(info.block);
  for (float& v : x) v = normal(rng);
  std::vector<uint8_t> block(info.bytes);
  ASSERT_TRUE(Encode(info.type, x, block).ok());
  std::vector<float> decoded(info.block), changed(info.block);
  ASSERT_TRUE(Decode(info.type, block, decoded).ok());
  for (int e = 0; e < info.block; ++e) {
    int same = 0;
    std::set<std::string> distinct;
    for (int c = 0; c < codes; ++c) {
      std::vector<uint8_t> b = block;
      ASSERT_TRUE(SetCode(info.type, b, e, c).ok());
      same += std::memcmp(b.data(), block.data(), b.size()) == 0;
      distinct.emplace(b.begin(), b.end());
      ASSERT_TRUE(Decode(info.type, b, changed).ok());
      for (int i = 0; i < info.block; ++i) {
        if (i == e) continue;
        ASSERT_EQ(changed[i], decoded[i]) << info.name << " element " << e << " code " << c;
      }
    }
    EXPECT_EQ(same, 1) << info.name << " element " << e;
    EXPECT_EQ(distinct.size(), static_cast<size_t>(codes)) << info.name << " element " << e;
  }
}

TEST_P(EveryCodedType, SetCodesIsSetCodeOnEveryElement) {
  const TypeInfo& info = Info(GetParam());
  const int codes = CodeCount(info.type);
  std::mt19937 rng(11);
  std::normal_distribution<float> normal;
  std::vector<float> x(info.block);
  for (float& v : x) v = normal(rng);
  std::vector<uint8_t> block(info.bytes);
  ASSERT_TRUE(Encode(info.type, x, block).ok());
  std::uniform_int_distribution<int> code(0, codes - 1);
  for (int trial = 0; trial < 8; ++trial) {
    std::vector<uint8_t> chosen(info.block);
    for (uint8_t& c : chosen) c = static_cast<uint8_t>(trial == 0 ? codes - 1 : code(rng));
    std::vector<uint8_t> one = block, all = block;
    for (int e = 0; e < info.block; ++e) ASSERT_TRUE(SetCode(info.type, one, e, chosen[e]).ok());
    ASSERT_TRUE(SetCodes(info.type, all, chosen).ok());
    EXPECT_EQ(all, one) << info.name << " trial " << trial;
  }
}

INSTANTIATE_TEST_SUITE_P(Ggml, EveryCodedType,
                         ::testing::Values(Type::kQ4_0, Type::kQ4_1, Type::kQ5_0, Type::kQ5_1,
                                           Type::kQ8_0, Type::kQ2_K, Type::kQ3_K, Type::kQ4_K,
                                           Type::kQ5_K, Type::kQ6_K, Type::kIQ4_NL, Type::kIQ4_XS,
                                           Type::kMXFP4, Type::kNVFP4),
                         [](const auto& info) { return std::string(Info(info.param).name); });

TEST(SetCode, RefusesWhatIsOutOfRange) {
  std::vector<uint8_t> block(Info(Type::kQ4_0).bytes);
  EXPECT_FALSE(SetCode(Type::kQ4_0, block, 32, 0).ok());
  EXPECT_FALSE(SetCode(Type::kQ4_0, block, 0, 16).ok());
  EXPECT_FALSE(SetCode(Type::kQ4_0, block, -1, 0).ok());
  EXPECT_FALSE(SetCode(Type::kQ4_0, std::span<uint8_t>(block).first(17), 0, 0).ok());
  std::vector<uint8_t> iq(Info(Type::kIQ2_XXS).bytes);
  EXPECT_EQ(CodeCount(Type::kIQ2_XXS), 0);
  EXPECT_FALSE(SetCode(Type::kIQ2_XXS, iq, 0, 0).ok());
  std::vector<uint8_t> codes(32, 0);
  EXPECT_TRUE(SetCodes(Type::kQ4_0, block, codes).ok());
  EXPECT_FALSE(SetCodes(Type::kQ4_0, block, std::span<const uint8_t>(codes).first(31)).ok());
  codes[5] = 16;
  EXPECT_FALSE(SetCodes(Type::kQ4_0, block, codes).ok());
  EXPECT_FALSE(SetCodes(Type::kIQ2_XXS, iq, codes).ok());
}

}  // namespace
}  // namespace lowp::ggml
