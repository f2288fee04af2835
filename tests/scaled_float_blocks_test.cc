// FORMAT-gG (groups along a row) and FORMAT-bRxC (2-D blocks) of the scaled
// float family, and the ue8m0 scale: known answers by hand (edges where rows
// and columns are not multiples of the block, zero blocks, NaN and Inf), an
// independent element-by-element implementation against both of Apply's
// paths, names and storage.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "formats/format.h"
#include "formats/reference.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "quant/scheme.h"
#include "tests/scheme_run.h"

namespace lowp {
namespace {

using ::testing::ElementsAre;
using ::testing::ElementsAreArray;
using ::testing::HasSubstr;
using testing::Make;
using testing::Result;
using testing::RunScheme;

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

TEST(ScaledFloatBlocks, Names) {
  EXPECT_EQ(Make("fp8_e4m3fn-b128x128")->name(), "fp8_e4m3fn-b128x128");
  EXPECT_EQ(Make("e4m3-b128x128:scale=fp32")->name(), "fp8_e4m3fn-b128x128");
  EXPECT_EQ(Make("fp8_e4m3fn-g128")->name(), "fp8_e4m3fn-g128");
  EXPECT_EQ(Make("fp8_e5m2-b1x32:scale=ue8m0")->name(), "fp8_e5m2-b1x32:scale=ue8m0");
  EXPECT_EQ(Make("fp4_e2m1fn-g16:scale=bf16")->name(), "fp4_e2m1fn-g16:scale=bf16");
  EXPECT_EQ(Make("fp8_e4m3fn-b128x128")->ChunkRows(4096), 128);
  EXPECT_EQ(Make("fp8_e4m3fn-g128")->ChunkRows(4096), 1);
  for (const char* bad : {"fp8_e4m3fn-g0", "fp8_e4m3fn-b0x128", "fp8_e4m3fn-b128x0",
                          "fp8_e4m3fn-g2000000", "fp8_e4m3fn-b128x128:scale=e8m0",
                          "fp8_e4m3fn-g128:clip=mse", "e8m0fnu-g32"}) {
    EXPECT_FALSE(ParseScheme(bad).ok()) << bad;
  }
  EXPECT_THAT(std::string(ParseScheme("fp8_e4m3fn-g0").status().message()),
              HasSubstr("group size"));
  EXPECT_THAT(std::string(ParseScheme("fp8_e4m3fn-b128x128:scale=int").status().message()),
              HasSubstr("ue8m0"));
  // Still the integer family's, and names that are no layout stay unknown.
  EXPECT_EQ(Make("int4-g128")->name(), "int4-g128");
  EXPECT_FALSE(ParseScheme("int4-g0").ok());
  EXPECT_FALSE(ParseScheme("fp8_e4m3fn-b128").ok());
  EXPECT_FALSE(ParseScheme("fp8_e4m3fn-gx").ok());
}

TEST(ScaledFloatBlocks, StorageBits) {
  // 300 x 500 e4m3 in 128 x 128 blocks: 3 x 4 fp32 scales.
  EXPECT_EQ(Make("fp8_e4m3fn-b128x128")->StorageBits(300, 500), 300u * 500 * 8 + 12 * 32);
  EXPECT_EQ(Make("fp8_e4m3fn-b128x128:scale=ue8m0")->StorageBits(300, 500),
            300u * 500 * 8 + 12 * 8);
  // Groups of 128 along rows of 500: 4 per row.
  EXPECT_EQ(Make("fp8_e4m3fn-g128")->StorageBits(3, 500), 3u * 500 * 8 + 12 * 32);
  EXPECT_NEAR(Make("fp8_e4m3fn-b128x128")->BitsPerWeight(4096, 4096), 8 + 32.0 / 16384, 1e-12);
}

TEST(ScaledFloatBlocks, TwoDimensionalBlocksByHand) {
  // 3 x 3 in 2 x 2 blocks of e4m3 (max 448): the blocks are rows {0, 1} x
  // cols {0, 1}, rows {0, 1} x col {2}, row {2} x cols {0, 1}, row {2} x col
  // {2} (short at both edges).
  //   block (0,0): 896, 1, -2, 0.5: amax 896 in row 0, scale 2; row 1's
  //     -2 / 2 = -1 (0xB8) -> -2 and 0.5 / 2 = 0.25 (0x28) -> 0.5.
  //   block (0,1): 7, NaN: amax 7 (NaN takes no part), scale 1/64; 7 -> 448.
  //   block (1,0): 0, -0: a zero block, scale 1, both come back as themselves.
  //   block (1,1): Inf alone: amax 0, scale 1, Inf comes back.
  const std::vector<float> x = {896, 1, 7, -2, 0.5f, kNaN, 0, -0.0f, kInf};
  std::unique_ptr<Scheme> s = Make("fp8_e4m3fn-b2x2");
  Result r = RunScheme(*s, x, 3);
  EXPECT_THAT(r.stored.scales, ElementsAre(2.0f, 1.0f / 64, 1.0f, 1.0f));
  EXPECT_THAT(r.stored.codes, ElementsAre(0x7E, 0x30, 0x7E, 0xB8, 0x28, 0, 0, 0x80, 0));
  EXPECT_EQ(r.out[0], 896.0f);
  EXPECT_EQ(r.out[1], 1.0f);
  EXPECT_EQ(r.out[2], 7.0f);
  EXPECT_EQ(r.out[3], -2.0f);
  EXPECT_EQ(r.out[4], 0.5f);
  EXPECT_TRUE(std::isnan(r.out[5]));
  EXPECT_EQ(r.out[6], 0.0f);
  EXPECT_TRUE(std::signbit(r.out[7]));
  EXPECT_EQ(r.out[8], kInf);
  EXPECT_EQ(r.counts.clipped, 0u);
  // The fast path (no stored form) gives the same values.
  Result fast = RunScheme(*s, x, 3, /*keep_stored=*/false);
  for (size_t i = 0; i < x.size(); ++i) {
    EXPECT_TRUE(fast.out[i] == r.out[i] || (std::isnan(fast.out[i]) && std::isnan(r.out[i])))
        << i;
  }
}

TEST(ScaledFloatBlocks, BlockSpansRowsButNotColumns) {
  // One 2 x 4 block: row 1's 448 sets the scale of row 0 too (scale 1), so
  // row 0's small values fall among e4m3's subnormals (step 2^-9 = 0.00195):
  // 0.001 rounds to 2^-9 (0.51 steps), 0.0012 too (0.61 steps), 0.0004 to 0
  // (0.2 steps).
  const std::vector<float> x = {0.001f, 0.0012f, 0.0004f, 1, 448, 1, 1, 1};
  Result r = RunScheme(*Make("fp8_e4m3fn-b2x4"), x, 4);
  EXPECT_THAT(r.stored.scales, ElementsAre(1.0f));
  EXPECT_EQ(r.out[0], std::ldexp(1.0f, -9));
  EXPECT_EQ(r.out[1], std::ldexp(1.0f, -9));
  EXPECT_EQ(r.out[2], 0.0f);
  EXPECT_EQ(r.counts.subnormal, 2u);
  // Per row (-channel) row 0 has its own scale and keeps 0.001 to 3 bits.
  Result channel = RunScheme(*Make("fp8_e4m3fn-channel"), x, 4);
  EXPECT_NEAR(channel.out[0], 0.001f, 0.001f / 16);
}

TEST(ScaledFloatBlocks, GroupsAlongARow) {
  // Groups of 2 along rows of 3: {3.5, -7} scale 7/448 = 1/64, {0.875}
  // alone (short) 1/512; {1.75, 0.4375} 1/256 (0.4375 * 256 = 112, exact),
  // {14} 1/32. Every value is an e4m3 value times its scale: all exact.
  const std::vector<float> x = {3.5f, -7, 0.875f, 1.75f, 0.4375f, 14};
  Result r = RunScheme(*Make("fp8_e4m3fn-g2"), x, 3);
  EXPECT_THAT(r.stored.scales, ElementsAre(1.0f / 64, 1.0f / 512, 1.0f / 256, 1.0f / 32));
  EXPECT_THAT(r.out, ElementsAreArray(x));
}

TEST(ScaledFloatBlocks, Ue8m0ScaleRoundsUpToAPowerOfTwo) {
  // amax 896: 896 / 448 = 2 exactly, a power of two, kept. amax 900: 2.0089
  // rounds up to 4, so 900 / 4 = 225 (e4m3 step 16 on [128, 256): 224) ->
  // 896, and nothing clips. amax 448 * 2^-140: 2^-140 is below e8m0's
  // 2^-127, which it takes.
  Result a = RunScheme(*Make("fp8_e4m3fn-channel:scale=ue8m0"), {896, 1}, 2);
  EXPECT_THAT(a.stored.scales, ElementsAre(2.0f));
  Result b = RunScheme(*Make("fp8_e4m3fn-channel:scale=ue8m0"), {900, 1}, 2);
  EXPECT_THAT(b.stored.scales, ElementsAre(4.0f));
  EXPECT_EQ(b.out[0], 896.0f);
  EXPECT_EQ(b.counts.clipped, 0u);
  Result c = RunScheme(*Make("fp8_e4m3fn-g2:scale=ue8m0"), {std::ldexp(448.0f, -140), 0}, 2);
  EXPECT_THAT(c.stored.scales, ElementsAre(std::ldexp(1.0f, -127)));
}

// ---------------------------------------------------------------- scalar check

// An independent statement of the rule: per element, its block's amax by a
// scan of the block, the scale by formula (ue8m0 by a search over powers of
// two), the element by EncodeFloat32 / DecodeToFloat32.
struct Expected {
  std::vector<float> out;
  std::vector<int32_t> codes;
  std::vector<float> scales;
  uint64_t clipped = 0, subnormal = 0;
};

Expected Scalar(const std::vector<float>& x, int64_t cols, const std::string& element,
                int64_t block_rows, int64_t block_cols, const std::string& scale) {
  const Format f = *FindFormat(element);
  ConvertOptions sat;
  sat.overflow = Overflow::kSaturate;
  const float max_finite = static_cast<float>(f.max_finite());
  const int64_t rows = static_cast<int64_t>(x.size()) / cols;
  const int64_t br = (rows + block_rows - 1) / block_rows, bc = (cols + block_cols - 1) / block_cols;
  std::vector<float> block_scale(br * bc);
  for (int64_t i = 0; i < br; ++i) {
    for (int64_t j = 0; j < bc; ++j) {
      float amax = 0;
      for (int64_t r = i * block_rows; r < std::min(rows, (i + 1) * block_rows); ++r) {
        for (int64_t c = j * block_cols; c < std::min(cols, (j + 1) * block_cols); ++c) {
          const float v = x[r * cols + c];
          if (std::isfinite(v)) amax = std::max(amax, std::fabs(v));
        }
      }
      float s = 1;
      if (amax > 0) {
        s = amax / max_finite;
        if (scale == "ue8m0") {
          int e = -127;
          while (e < 127 && std::ldexp(1.0f, e) < s) ++e;
          s = std::ldexp(1.0f, e);
        } else {
          const Format sf = *FindFormat(scale);
          s = DecodeToFloat32(sf, EncodeFloat32(sf, s, sat));
        }
      }
      block_scale[i * bc + j] = s;
    }
  }
  Expected e;
  for (int64_t r = 0; r < rows; ++r) {
    if (block_rows == 1 || r % block_rows == 0) {
      for (int64_t j = 0; j < bc; ++j) e.scales.push_back(block_scale[r / block_rows * bc + j]);
    }
    for (int64_t c = 0; c < cols; ++c) {
      const float v = x[r * cols + c], s = block_scale[r / block_rows * bc + c / block_cols];
      if (!std::isfinite(v)) {
        e.out.push_back(v);
        e.codes.push_back(0);
        continue;
      }
      const float q = s == 0 ? std::copysign(0.0f, v) : v / s;
      if (std::fabs(q) > max_finite) ++e.clipped;
      const uint32_t code = EncodeFloat32(f, q, sat);
      e.codes.push_back(static_cast<int32_t>(code));
      const uint32_t magnitude = code & f.magnitude_mask();
      if (magnitude != 0 && magnitude < (uint32_t{1} << f.mantissa_bits)) ++e.subnormal;
      const float back = DecodeToFloat32(f, code) * s;
      e.out.push_back(std::isinf(back) ? std::copysign(std::numeric_limits<float>::max(), back)
                                       : back);
    }
  }
  return e;
}

bool SameBits(float a, float b) {
  if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b);
  uint32_t u, v;
  std::memcpy(&u, &a, 4);
  std::memcpy(&v, &b, 4);
  return u == v;
}

TEST(ScaledFloatBlocks, BothPathsEqualElementByElement) {
  const int64_t rows = 11, cols = 100;  // blocks end short in both directions
  const std::vector<float> x = testing::AwkwardTensor(rows, cols, 20261203);
  for (const char* element : {"fp8_e4m3fn", "fp8_e5m2", "fp6_e2m3fn", "fp4_e2m1fn"}) {
    for (const char* scale : {"fp32", "bf16", "fp16", "ue8m0"}) {
      const struct {
        std::string suffix;
        int64_t block_rows, block_cols;
      } layouts[] = {{"-g32", 1, 32}, {"-g7", 1, 7}, {"-b4x32", 4, 32}, {"-b3x128", 3, 128},
                     {"-b128x128", 128, 128}, {"-b2x1", 2, 1}};
      for (const auto& layout : layouts) {
        const std::string name = std::string(element) + layout.suffix + ":scale=" + scale;
        SCOPED_TRACE(name);
        const std::unique_ptr<Scheme> s = Make(name);
        const Expected e = Scalar(x, cols, element, layout.block_rows, layout.block_cols, scale);
        const Result stored = RunScheme(*s, x, cols);
        const Result fast = RunScheme(*s, x, cols, /*keep_stored=*/false);
        EXPECT_THAT(stored.stored.codes, ElementsAreArray(e.codes));
        EXPECT_THAT(stored.stored.scales, ElementsAreArray(e.scales));
        for (const Result* r : {&stored, &fast}) {
          for (size_t i = 0; i < x.size(); ++i) {
            ASSERT_TRUE(SameBits(r->out[i], e.out[i]))
                << (r == &fast ? "fast" : "stored") << " element " << i << ": " << r->out[i]
                << " vs " << e.out[i];
          }
          EXPECT_EQ(r->counts.clipped, e.clipped);
          EXPECT_EQ(r->counts.subnormal, e.subnormal);
        }
      }
    }
  }
}

}  // namespace
}  // namespace lowp
