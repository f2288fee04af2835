// The reference against ml_dtypes' own outputs (tests/data/mldtypes).
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "formats/format.h"
#include "formats/reference.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace lowp {
namespace {

const std::string kDir = LOWP_TEST_DATA_DIR "/mldtypes/";

template <class T>
std::vector<T> ReadArray(const std::string& name) {
  std::ifstream in(kDir + name, std::ios::binary);
  EXPECT_TRUE(in) << name;
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<T> out(bytes.size() / sizeof(T));
  std::memcpy(out.data(), bytes.data(), out.size() * sizeof(T));
  return out;
}

nlohmann::json Manifest() {
  std::ifstream in(kDir + "manifest.json");
  return nlohmann::json::parse(in);
}

std::vector<std::string> GoldenFormats() {
  std::vector<std::string> names;
  const nlohmann::json manifest = Manifest();
  for (const auto& [name, entry] : manifest["formats"].items()) names.push_back(name);
  return names;
}

class Golden : public ::testing::TestWithParam<std::string> {};

TEST_P(Golden, DecodeMatchesEveryCode) {
  const Format f = *FindFormat(GetParam());
  const std::vector<uint32_t> decoded = ReadArray<uint32_t>("decode." + GetParam() + ".bin");
  ASSERT_EQ(decoded.size(), size_t{f.code_mask()} + 1);
  for (uint32_t code = 0; code < decoded.size(); ++code) {
    const float ours = DecodeToFloat32(f, code);
    const float golden = std::bit_cast<float>(decoded[code]);
    if (std::isnan(golden)) {
      // ml_dtypes keeps NaN payloads for float16/bfloat16 (Eigen) but
      // canonicalises float8_e5m2's; lowp keeps them for every format.
      EXPECT_TRUE(std::isnan(ours)) << f.name << " code 0x" << std::hex << code;
      EXPECT_EQ(std::signbit(ours), std::signbit(golden))
          << f.name << " code 0x" << std::hex << code;
      if (f.name != "fp8_e5m2") {
        EXPECT_EQ(std::bit_cast<uint32_t>(ours), decoded[code])
            << f.name << " code 0x" << std::hex << code;
      }
      continue;
    }
    EXPECT_EQ(std::bit_cast<uint32_t>(ours), decoded[code])
        << f.name << " code 0x" << std::hex << code;
  }
}

TEST_P(Golden, EncodeMatchesEveryInput) {
  const Format f = *FindFormat(GetParam());
  const nlohmann::json entry = Manifest()["formats"][GetParam()];
  const std::vector<uint32_t> inputs = ReadArray<uint32_t>("inputs.f32");
  std::vector<uint32_t> expected;
  if (entry["files"]["expected_dtype"] == "uint16") {
    for (uint16_t c : ReadArray<uint16_t>("expected." + GetParam() + ".bin")) expected.push_back(c);
  } else {
    for (uint8_t c : ReadArray<uint8_t>("expected." + GetParam() + ".bin")) expected.push_back(c);
  }
  ASSERT_EQ(expected.size(), inputs.size());
  size_t compared = 0, by_design = 0;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const float x = std::bit_cast<float>(inputs[i]);
    const uint32_t golden = expected[i];
    if (!f.is_float()) {
      // ml_dtypes truncates then wraps; compare where neither can differ.
      const double t = std::trunc(x);
      if (golden == 0xFF || !std::isfinite(x) || t < f.lowest_finite() || t > f.max_finite()) {
        ++by_design;
        continue;
      }
      ASSERT_EQ(EncodeFloat32(f, x, {.rounding = Rounding::kTowardZero}), golden)
          << f.name << " input 0x" << std::hex << inputs[i];
      ++compared;
      continue;
    }
    const uint32_t ours = EncodeFloat32(f, x);
    ++compared;
    if (ours == golden) continue;
    if (!f.has_nan() && std::isnan(x)) {  // ml_dtypes: opposite-sign zero
      EXPECT_EQ(ours, 0u);
      ++by_design;
      continue;
    }
    if (f.name == "e8m0fnu" && x > 0x1p-127f && x < 0x1.8p-127f) {  // its defect
      EXPECT_EQ(ours, 0x00u);
      EXPECT_EQ(golden, 0x01u);
      ++by_design;
      continue;
    }
    ADD_FAILURE() << f.name << " input 0x" << std::hex << inputs[i] << " (" << x
                  << "): ml_dtypes 0x" << golden << ", lowp 0x" << ours;
  }
  EXPECT_GT(compared, inputs.size() / 2);
  RecordProperty("differences_by_design", static_cast<int>(by_design));
}

INSTANTIATE_TEST_SUITE_P(MlDtypes, Golden, ::testing::ValuesIn(GoldenFormats()),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace lowp
