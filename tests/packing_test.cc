#include "formats/packing.h"

#include <cstdint>
#include <vector>

#include "formats/format.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace lowp {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(Packing, FourBitCodesTwoPerByteLowNibbleFirst) {
  const Format fp4 = *FindFormat("fp4_e2m1fn");
  std::vector<uint8_t> bytes;
  PackCodes(fp4, std::vector<uint32_t>{0x1, 0xF, 0x7}, &bytes);
  EXPECT_THAT(bytes, ElementsAre(0xF1, 0x07));  // odd count: high nibble 0
  EXPECT_EQ(StorageBytes(fp4, 3), 2u);
  std::vector<uint32_t> codes;
  ASSERT_TRUE(UnpackCodes(fp4, bytes, 0, &codes).ok());
  EXPECT_THAT(codes, ElementsAre(0x1, 0xF, 0x7, 0x0));
  EXPECT_EQ(*CodeCount(fp4, 2), 4u);
}

TEST(Packing, WiderCodesAreLittleEndian) {
  const Format fp16 = *FindFormat("fp16"), tf32 = *FindFormat("tf32");
  std::vector<uint8_t> bytes;
  PackCodes(fp16, std::vector<uint32_t>{0x3C00, 0xABCD}, &bytes);
  EXPECT_THAT(bytes, ElementsAre(0x00, 0x3C, 0xCD, 0xAB));
  bytes.clear();
  PackCodes(tf32, std::vector<uint32_t>{0x1FC00}, &bytes);
  EXPECT_THAT(bytes, ElementsAre(0x00, 0xFC, 0x01, 0x00));
  std::vector<uint32_t> codes;
  ASSERT_TRUE(UnpackCodes(tf32, bytes, 0, &codes).ok());
  EXPECT_THAT(codes, ElementsAre(0x1FC00u));
}

TEST(Packing, RejectsPartialUnitsAndInvalidCodes) {
  const Format fp16 = *FindFormat("fp16"), fp6 = *FindFormat("fp6_e2m3fn");
  EXPECT_THAT(CodeCount(fp16, 3).status().message(), HasSubstr("not a whole number"));
  std::vector<uint32_t> codes;
  const std::vector<uint8_t> bytes = {0x3F, 0x40};
  const absl::Status s = UnpackCodes(fp6, bytes, 100, &codes);
  EXPECT_FALSE(s.ok());
  EXPECT_THAT(s.message(), HasSubstr("element 101"));
  const std::vector<uint8_t> tf32_bytes = {0, 0, 0x08, 0};  // bit 19 set
  EXPECT_FALSE(UnpackCodes(*FindFormat("tf32"), tf32_bytes, 0, &codes).ok());
}

}  // namespace
}  // namespace lowp
