#include "formats/packing.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
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

// Code arrays (one code per unsigned integer, what NumPy holds) into the
// storage layout and back, against PackCodes and UnpackCodes, for every
// storage unit and every width of integer that holds the codes.
TEST(Packing, CodeArraysRoundTripThroughTheStorage) {
  for (const char* name : {"fp4_e2m1fn", "int4", "fp6_e3m2fn", "fp8_e4m3fn", "fp16", "tf32"}) {
    const Format f = *FindFormat(name);
    std::vector<uint32_t> codes;
    for (uint32_t i = 0; i < 37; ++i) codes.push_back((i * 2654435761u) & f.code_mask());
    std::vector<uint8_t> packed;
    PackCodes(f, codes, &packed);
    ASSERT_EQ(packed.size(), StorageBytes(f, codes.size())) << name;
    for (size_t i = 0; i < codes.size(); ++i) EXPECT_EQ(CodeAt(f, packed, i), codes[i]) << name;
    for (size_t itemsize : {size_t{1}, size_t{2}, size_t{4}, size_t{8}}) {
      if (itemsize < CodeBytes(f)) continue;
      std::vector<uint8_t> items(codes.size() * itemsize);
      for (size_t i = 0; i < codes.size(); ++i) {
        std::memcpy(&items[i * itemsize], &codes[i], std::min<size_t>(itemsize, 4));  // little-endian
      }
      std::vector<uint8_t> storage(packed.size(), 0xAA);
      ASSERT_TRUE(StoreCodes(f, items.data(), itemsize, codes.size(), storage).ok());
      EXPECT_EQ(storage, packed) << name << " from " << itemsize << "-byte codes";
    }
    std::vector<uint8_t> loaded(codes.size() * CodeBytes(f));
    LoadCodes(f, packed, codes.size(), loaded.data());
    for (size_t i = 0; i < codes.size(); ++i) {
      uint32_t c = 0;
      std::memcpy(&c, &loaded[i * CodeBytes(f)], CodeBytes(f));
      EXPECT_EQ(c, codes[i]) << name;
    }
  }
  EXPECT_EQ(CodeBytes(*FindFormat("fp4_e2m1fn")), 1u);
  EXPECT_EQ(CodeBytes(*FindFormat("int16")), 2u);
  EXPECT_EQ(CodeBytes(*FindFormat("tf32")), 4u);
  EXPECT_EQ(BlocksPerRow(64, 32), 2);
  EXPECT_EQ(BlocksPerRow(65, 32), 3);
}

TEST(Packing, StoreCodesNamesTheFirstCodeTooWide) {
  const Format fp4 = *FindFormat("fp4_e2m1fn");
  const std::vector<uint16_t> codes = {1, 15, 16, 17};
  std::vector<uint8_t> storage(2);
  const absl::Status s = StoreCodes(fp4, codes.data(), 2, codes.size(), storage);
  EXPECT_THAT(s.message(), HasSubstr("code 16 at index 2 is wider than fp4_e2m1fn's 4 bits"));
  std::vector<uint8_t> too_long(3);  // 4 codes of 4 bits take 2 bytes
  EXPECT_FALSE(StoreCodes(fp4, codes.data(), 2, codes.size(), too_long).ok());
}

}  // namespace
}  // namespace lowp
