// ggml's iq3_xxs and iq3_s codecs by their properties: every grid index
// decodes to its codebook entry (ggml-common.h's iq3xxs_grid and iq3s_grid),
// signs and scales decode as the layouts say, a block lying on the grid
// comes back with the same points and signs, an element the importance
// ignores is counted as clipped, iq3_s keeps ggml's shift after a group of
// zeros, and any bytes decode. (The bytes against ggml's own are checked by
// the ggml-made known answers and the cross-check, not here.)
#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <iterator>
#include <random>
#include <set>
#include <span>
#include <tuple>
#include <vector>

#include "codecs/ggml.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace lowp {
namespace {

using ggml::Type;

constexpr int kBlock = 256;
constexpr size_t kXxsBytes = 98, kSBytes = 110;
// Offsets in the blocks (codecs/ggml_blocks.h).
constexpr size_t kQs = 2;               // both: grid indices (low 8 bits)
constexpr size_t kXxsWords = 2 + 64;    // iq3_xxs: 8 words of signs and scale
constexpr size_t kSQh = 2 + 64;         // iq3_s: 9th index bits
constexpr size_t kSSigns = 2 + 64 + 8;  // iq3_s: sign bits
constexpr size_t kSScales = 2 + 64 + 8 + 32;

// The first and last 16 entries of ggml-common.h's tables (ggml d99724f2):
// 4 values a word, element 0 in the low byte.
constexpr uint32_t kXxsHead[16] = {
    0x04040404, 0x04040414, 0x04040424, 0x04040c0c, 0x04040c1c, 0x04040c3e, 0x04041404, 0x04041414,
    0x04041c0c, 0x04042414, 0x04043e1c, 0x04043e2c, 0x040c040c, 0x040c041c, 0x040c0c04, 0x040c0c14};
constexpr uint32_t kXxsTail[16] = {
    0x3e042c14, 0x3e0c1434, 0x3e0c2404, 0x3e140c14, 0x3e14242c, 0x3e142c14, 0x3e1c0404, 0x3e1c0c2c,
    0x3e1c1c1c, 0x3e1c3404, 0x3e24140c, 0x3e24240c, 0x3e2c0404, 0x3e2c0414, 0x3e2c1424, 0x3e341c04};
constexpr uint32_t kSHead[16] = {
    0x01010101, 0x01010103, 0x01010105, 0x0101010b, 0x0101010f, 0x01010301, 0x01010303, 0x01010305,
    0x01010309, 0x0101030d, 0x01010501, 0x01010503, 0x0101050b, 0x01010707, 0x01010901, 0x01010905};
constexpr uint32_t kSTail[16] = {
    0x0f050701, 0x0f050b03, 0x0f070105, 0x0f070705, 0x0f07070b, 0x0f070b07, 0x0f090103, 0x0f09010b,
    0x0f090307, 0x0f090501, 0x0f090b01, 0x0f0b0505, 0x0f0b0905, 0x0f0d0105, 0x0f0d0703, 0x0f0f0101};

void PutHalf(uint16_t h, uint8_t* at) { std::memcpy(at, &h, 2); }
void PutWord(uint32_t w, uint8_t* at) { std::memcpy(at, &w, 4); }
uint32_t GetWord(const uint8_t* at) {
  uint32_t w;
  std::memcpy(&w, at, 4);
  return w;
}

std::vector<float> DecodeAll(Type type, const std::vector<uint8_t>& bytes) {
  const int64_t block_bytes = ggml::Info(type).bytes;
  std::vector<float> y(bytes.size() / block_bytes * kBlock);
  EXPECT_TRUE(ggml::Decode(type, bytes, y).ok());
  return y;
}

// The codebook of `type` read back through Decode: blocks of 64 consecutive
// grid indices, signs positive, group scales chosen so each decodes times 1
// (iq3_xxs: d = 4, s = 0, 4 * 0.5 * 0.5; iq3_s: d = 1, s = 0).
std::vector<uint32_t> DecodedGrid(Type type, int size) {
  const bool xxs = type == Type::kIQ3_XXS;
  const size_t bytes = xxs ? kXxsBytes : kSBytes;
  std::vector<uint8_t> blocks(size / 64 * bytes, 0);
  for (int index = 0; index < size; ++index) {
    uint8_t* b = blocks.data() + index / 64 * bytes;
    PutHalf(xxs ? 0x4400 : 0x3c00, b);
    b[kQs + index % 64] = static_cast<uint8_t>(index & 255);
    if (!xxs) b[kSQh + index % 64 / 8] |= static_cast<uint8_t>((index >> 8) << (index % 8));
  }
  const std::vector<float> y = DecodeAll(type, blocks);
  std::vector<uint32_t> grid(size);
  for (int index = 0; index < size; ++index) {
    for (int j = 0; j < 4; ++j) {
      const float v = y[4 * index + j];
      EXPECT_EQ(v, std::floor(v)) << index;
      grid[index] |= static_cast<uint32_t>(v) << 8 * j;
    }
  }
  return grid;
}

TEST(GgmlIq3, EveryGridIndexDecodesToGgmlsCodebook) {
  for (const auto& [type, size, head, tail, levels] :
       {std::tuple{Type::kIQ3_XXS, 256, kXxsHead, kXxsTail,
                   std::set<uint32_t>{4, 12, 20, 28, 36, 44, 52, 62}},
        std::tuple{Type::kIQ3_S, 512, kSHead, kSTail,
                   std::set<uint32_t>{1, 3, 5, 7, 9, 11, 13, 15}}}) {
    const std::vector<uint32_t> grid = DecodedGrid(type, size);
    for (int i = 0; i < 16; ++i) {
      EXPECT_EQ(grid[i], head[i]) << size << " " << i;
      EXPECT_EQ(grid[size - 16 + i], tail[i]) << size << " " << size - 16 + i;
    }
    // Distinct points, every value one of the 8 levels, in ascending order
    // of the 12-bit number ggml's tables are sorted by.
    int last = -1;
    for (int index = 0; index < size; ++index) {
      int u = 0;
      for (int j = 0; j < 4; ++j) {
        const uint32_t v = grid[index] >> 8 * j & 255;
        ASSERT_TRUE(levels.count(v)) << size << " " << index << " " << v;
        u |= static_cast<int>(std::distance(levels.begin(), levels.find(v))) << 3 * j;
      }
      EXPECT_GT(u, last) << size << " " << index;
      last = u;
    }
  }
}

TEST(GgmlIq3, SignsAndScalesDecodeAsTheLayoutsSay) {
  // iq3_xxs: 7 sign bits per 8 elements, the 8th their parity; d = 1,
  // group 1 has s = 3: (0.5 + 3) * 0.5 = 1.75 times 4 (grid index 0).
  std::vector<uint8_t> xxs(kXxsBytes, 0);
  PutHalf(0x3c00, xxs.data());
  PutWord(0b0000001u | 0b0000011u << 7 | 3u << 28, xxs.data() + kXxsWords + 4);
  std::vector<float> y = DecodeAll(Type::kIQ3_XXS, xxs);
  EXPECT_EQ(y[0], 0.5f * 0.5f * 4);
  EXPECT_EQ(y[32], -7.f);  // bit 0
  EXPECT_EQ(y[39], -7.f);  // odd parity of 0b0000001: element 7 negative too
  EXPECT_EQ(y[40], -7.f);
  EXPECT_EQ(y[41], -7.f);
  EXPECT_EQ(y[47], 7.f);  // 0b0000011 has even parity
  for (int i : {33, 38, 42, 48, 63}) EXPECT_EQ(y[i], 7.f) << i;

  // iq3_s: all 8 sign bits stored; group 5 (high nibble of scales[2]) with
  // s = 2: d * 5; grid index 256 + 4 through qh.
  std::vector<uint8_t> s(kSBytes, 0);
  PutHalf(0x3c00, s.data());
  s[kSScales + 2] = 2 << 4;
  s[kSSigns + 4 * 5] = 0x08;
  s[kQs + 8 * 5 + 1] = 4;
  s[kSQh + 5] = 0b10;
  y = DecodeAll(Type::kIQ3_S, s);
  EXPECT_EQ(y[160 + 3], -5.f);  // index 0 is 1,1,1,1
  EXPECT_EQ(y[160 + 2], 5.f);
  const std::vector<uint32_t> grid = DecodedGrid(Type::kIQ3_S, 512);
  for (int j = 0; j < 4; ++j) EXPECT_EQ(y[164 + j], 5.f * (grid[260] >> 8 * j & 255)) << j;
}

// A super-block on the encoder's grid: random points (each group's first
// containing the top level, so the trial scales reach it) with random signs
// (even counts per 8 for iq3_xxs) at one scale. Its bytes: what Encode must
// give back, less the scales.
struct OnGrid {
  std::vector<float> x;
  std::vector<uint8_t> bytes;
};

OnGrid MakeOnGrid(Type type, uint32_t seed) {
  const bool xxs = type == Type::kIQ3_XXS;
  const int size = xxs ? 256 : 512;
  const uint32_t top = xxs ? 62 : 15;
  const std::vector<uint32_t> grid = DecodedGrid(type, size);
  std::mt19937 rng(seed);
  std::vector<int> with_top;
  for (int i = 0; i < size; ++i) {
    for (int j = 0; j < 4; ++j) {
      if ((grid[i] >> 8 * j & 255) == top) {
        with_top.push_back(i);
        break;
      }
    }
  }
  OnGrid g;
  g.bytes.assign(xxs ? kXxsBytes : kSBytes, 0);
  g.x.resize(kBlock);
  PutHalf(0x3c00, g.bytes.data());
  for (int ib = 0; ib < 8; ++ib) {
    uint32_t word = 0;
    for (int k = 0; k < 8; ++k) {
      const int index = k == 0 ? with_top[rng() % with_top.size()] : static_cast<int>(rng() % size);
      g.bytes[kQs + 8 * ib + k] = static_cast<uint8_t>(index & 255);
      if (!xxs) g.bytes[kSQh + ib] |= static_cast<uint8_t>((index >> 8) << k);
      for (int j = 0; j < 4; ++j) {
        const uint32_t v = grid[index] >> 8 * j & 255;
        const int level =
            xxs ? (v == 62 ? 7 : static_cast<int>(v - 4) / 8) : static_cast<int>(v) / 2;
        g.x[32 * ib + 4 * k + j] = 0.37f * static_cast<float>(2 * level + 1);
      }
    }
    for (int m = 0; m < 4; ++m) {
      const uint32_t bits = rng() & (xxs ? 127 : 255);
      const uint32_t all = xxs ? bits | (std::popcount(bits) & 1u) << 7 : bits;
      for (int i = 0; i < 8; ++i) {
        if (all >> i & 1) g.x[32 * ib + 8 * m + i] = -g.x[32 * ib + 8 * m + i];
      }
      if (xxs) {
        word |= bits << 7 * m;
      } else {
        g.bytes[kSSigns + 4 * ib + m] = static_cast<uint8_t>(bits);
      }
    }
    if (xxs) PutWord(word, g.bytes.data() + kXxsWords + 4 * ib);
  }
  return g;
}

TEST(GgmlIq3, BlockOnTheGridKeepsItsPointsAndSigns) {
  const std::vector<float> ones(kBlock, 1.0f);
  for (const Type type : {Type::kIQ3_XXS, Type::kIQ3_S}) {
    const bool xxs = type == Type::kIQ3_XXS;
    for (uint32_t seed = 1; seed <= 20; ++seed) {
      const OnGrid g = MakeOnGrid(type, seed);
      for (const bool importance : {false, true}) {
        std::vector<uint8_t> got(g.bytes.size());
        uint64_t clipped = 0;
        ASSERT_TRUE(
            ggml::Encode(type, g.x, got, &clipped,
                         importance ? std::span<const float>(ones) : std::span<const float>())
                .ok());
        EXPECT_EQ(clipped, 0u) << seed;
        // Points and signs as built; every group's scale is the largest (s = 15).
        for (size_t i = kQs; i < kQs + 64; ++i) ASSERT_EQ(got[i], g.bytes[i]) << seed << " " << i;
        for (int ib = 0; ib < 8; ++ib) {
          if (xxs) {
            const uint32_t word = GetWord(got.data() + kXxsWords + 4 * ib);
            EXPECT_EQ(word & 0x0fffffff, GetWord(g.bytes.data() + kXxsWords + 4 * ib)) << seed;
            EXPECT_EQ(word >> 28, 15u) << seed;
          } else {
            EXPECT_EQ(got[kSQh + ib], g.bytes[kSQh + ib]) << seed;
            EXPECT_EQ(got[kSScales + ib / 2] >> 4 * (ib % 2) & 15, 15) << seed;
          }
        }
        if (!xxs) {
          for (size_t i = kSSigns; i < kSSigns + 32; ++i) EXPECT_EQ(got[i], g.bytes[i]) << seed;
        }
        // So the decode is the input times one factor (iq3_s; iq3_xxs's top
        // level decodes at 62 / 4, not 15).
        const std::vector<float> y = DecodeAll(type, got);
        if (!xxs) {
          for (int i = 1; i < kBlock; ++i) EXPECT_FLOAT_EQ(y[i] / g.x[i], y[0] / g.x[0]) << i;
        }
      }
    }
  }
}

// An element the importance ignores is left out of its group's fit: far
// beyond what the group decodes to, and counted.
TEST(GgmlIq3, IgnoredOutlierIsClipped) {
  std::mt19937 rng(7);
  std::normal_distribution<float> normal;
  std::vector<float> x(kBlock), w(kBlock, 1.0f);
  for (float& v : x) v = normal(rng);
  x[40] = 100.0f;
  w[40] = 0.0f;
  for (const Type type : {Type::kIQ3_XXS, Type::kIQ3_S}) {
    std::vector<uint8_t> bytes(ggml::Info(type).bytes);
    uint64_t clipped = 0;
    ASSERT_TRUE(ggml::Encode(type, x, bytes, &clipped, w).ok());
    EXPECT_GE(clipped, 1u);
    const std::vector<float> y = DecodeAll(type, bytes);
    EXPECT_LT(std::fabs(y[40]), 20.0f);
  }
}

// ggml's iq3_s writes points and signs through cursors a group of zeros does
// not advance: the groups after it are stored one slot early, the last slot
// stays zero (qh is indexed by group and does not move).
TEST(GgmlIq3, Iq3SShiftsGroupsAfterAGroupOfZeros) {
  std::mt19937 rng(11);
  std::normal_distribution<float> normal;
  std::vector<float> x(kBlock);
  for (float& v : x) v = normal(rng);
  std::vector<uint8_t> whole(kSBytes), holed(kSBytes);
  ASSERT_TRUE(ggml::Encode(Type::kIQ3_S, x, whole).ok());
  for (int i = 64; i < 96; ++i) x[i] = 0.0f;  // group 2
  ASSERT_TRUE(ggml::Encode(Type::kIQ3_S, x, holed).ok());
  for (int ib = 3; ib < 8; ++ib) {
    for (int k = 0; k < 8; ++k) {
      EXPECT_EQ(holed[kQs + 8 * (ib - 1) + k], whole[kQs + 8 * ib + k]) << ib;
    }
    for (int m = 0; m < 4; ++m) {
      EXPECT_EQ(holed[kSSigns + 4 * (ib - 1) + m], whole[kSSigns + 4 * ib + m]) << ib;
    }
  }
  for (int k = 0; k < 8; ++k) EXPECT_EQ(holed[kQs + 56 + k], 0) << k;
  for (int m = 0; m < 4; ++m) EXPECT_EQ(holed[kSSigns + 28 + m], 0) << m;
  EXPECT_EQ(holed[kSQh + 2], 0);
  EXPECT_EQ(holed[kSScales + 1] & 15, 0);

  // A super-block of zeros is all zero bytes in both types.
  std::fill(x.begin(), x.end(), 0.0f);
  for (const Type type : {Type::kIQ3_XXS, Type::kIQ3_S}) {
    std::vector<uint8_t> bytes(ggml::Info(type).bytes, 0xff);
    ASSERT_TRUE(ggml::Encode(type, x, bytes).ok());
    for (const uint8_t b : bytes) EXPECT_EQ(b, 0);
  }
}

// Any bytes decode; with a finite d every value is finite and within d
// times the largest group scale times the top level.
TEST(GgmlIq3, RandomBytesDecode) {
  std::mt19937 rng(5);
  for (const Type type : {Type::kIQ3_XXS, Type::kIQ3_S}) {
    const bool xxs = type == Type::kIQ3_XXS;
    const size_t block_bytes = xxs ? kXxsBytes : kSBytes;
    std::vector<uint8_t> bytes(1000 * block_bytes);
    for (uint8_t& b : bytes) b = static_cast<uint8_t>(rng());
    const std::vector<float> y = DecodeAll(type, bytes);
    for (size_t b = 0; b < 1000; ++b) {
      uint16_t h;
      std::memcpy(&h, bytes.data() + b * block_bytes, 2);
      if ((h & 0x7c00) == 0x7c00) continue;
      const float d = ggml::Fp16ToFp32(h);
      const float bound = std::fabs(d) * (xxs ? 15.5f * 0.5f * 62 : 31.0f * 15) * 1.0001f;
      for (int i = 0; i < kBlock; ++i) {
        ASSERT_TRUE(std::isfinite(y[b * kBlock + i])) << b;
        ASSERT_LE(std::fabs(y[b * kBlock + i]), bound) << b;
      }
    }
  }
}

}  // namespace
}  // namespace lowp
