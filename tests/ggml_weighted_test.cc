// ggml's importance-weighted quantizers (ggml::Encode with `importance`):
// properties that hold for ggml's own *_impl searches, so a port that drifts
// from them fails here even without ggml at hand. The bytes themselves are
// checked against ggml elsewhere (tests/ggml_importance_test.cc).
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "codecs/ggml.h"
#include "gtest/gtest.h"

namespace lowp {
namespace {

using ggml::Type;

// Every type whose ggml quantizer uses the importance.
constexpr Type kWeighted[] = {Type::kQ4_0, Type::kQ4_1, Type::kQ5_0, Type::kQ5_1,
                              Type::kQ2_K, Type::kQ3_K, Type::kQ4_K, Type::kQ5_K,
                              Type::kQ6_K, Type::kIQ4_NL, Type::kIQ4_XS};

constexpr int64_t kColumns = 4096;

std::vector<float> Normal(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0, 1);
  std::vector<float> x(n);
  for (float& v : x) v = normal(rng);
  return x;
}

std::vector<float> LogNormal(size_t n, uint64_t seed) {
  std::vector<float> w = Normal(n, seed);
  for (float& v : w) v = std::exp(v);
  return w;
}

std::vector<uint8_t> Enc(Type type, const std::vector<float>& x,
                         const std::vector<float>& importance, uint64_t* clipped = nullptr) {
  std::vector<uint8_t> out(static_cast<size_t>(ggml::RowBytes(ggml::Info(type), x.size())));
  const absl::Status s = ggml::Encode(type, x, out, clipped, importance);
  EXPECT_TRUE(s.ok()) << s;
  return out;
}

std::vector<float> Dec(Type type, const std::vector<uint8_t>& bytes, size_t n) {
  std::vector<float> y(n);
  const absl::Status s = ggml::Decode(type, bytes, y);
  EXPECT_TRUE(s.ok()) << s;
  return y;
}

uint32_t Bits(float x) { return std::bit_cast<uint32_t>(x); }

// ggml's quantize_q4_0 takes quantize_row_q4_0_impl whenever it is given
// quant_weights, even all equal: make_qx_quants' fit (weights
// sqrtf(sigma2 + x^2)) over 19 trial scales, not the reference's max / -8.
// On an N(0, 1) row nearly every block's bytes differ, and the fit's plain
// squared error is no worse than the reference's in most blocks (measured:
// 125 of 128 blocks differ, 116 of 128 no worse).
TEST(GgmlImportance, EqualWeightsTakeTheWeightedSearch) {
  const std::vector<float> x = Normal(kColumns, 1);
  const std::vector<float> ones(kColumns, 1.0f);
  const std::vector<uint8_t> ref = Enc(Type::kQ4_0, x, {});
  const std::vector<uint8_t> fit = Enc(Type::kQ4_0, x, ones);
  const std::vector<float> y_ref = Dec(Type::kQ4_0, ref, x.size());
  const std::vector<float> y_fit = Dec(Type::kQ4_0, fit, x.size());
  int differ = 0, better = 0;
  const int blocks = kColumns / 32;
  for (int b = 0; b < blocks; ++b) {
    differ += !std::equal(ref.begin() + 18 * b, ref.begin() + 18 * (b + 1), fit.begin() + 18 * b);
    double e_ref = 0, e_fit = 0;
    for (int j = 32 * b; j < 32 * (b + 1); ++j) {
      e_ref += (x[j] - y_ref[j]) * (x[j] - y_ref[j]);
      e_fit += (x[j] - y_fit[j]) * (x[j] - y_fit[j]);
    }
    better += e_fit <= e_ref;
  }
  EXPECT_GE(differ, blocks * 9 / 10) << "of " << blocks << " blocks";
  EXPECT_GE(better, blocks * 85 / 100) << "of " << blocks << " blocks";
}

// Every sum, product and comparison in ggml's weighted searches is
// homogeneous in the weights, so multiplying them all by a power of two
// (exact in float32) changes no byte.
TEST(GgmlImportance, ScalingTheWeightsByPowersOfTwoChangesNothing) {
  const std::vector<float> x = Normal(2 * kColumns, 2);
  const std::vector<float> w = LogNormal(x.size(), 3);
  for (Type type : kWeighted) {
    SCOPED_TRACE(ggml::Info(type).name);
    const std::vector<uint8_t> base = Enc(type, x, w);
    EXPECT_NE(base, Enc(type, x, {}));
    for (float scale : {0x1p-12f, 0x1p-1f, 0x1p12f}) {
      std::vector<float> scaled = w;
      for (float& v : scaled) v *= scale;
      EXPECT_EQ(base, Enc(type, x, scaled)) << scale;
    }
  }
}

// An element of zero importance adds nothing to any of the fit's sums, so
// the fit cannot see its value beyond the group's extremes (min, max, the
// largest magnitude) and its x^2 in sigma2. Negating such elements where
// that leaves all of those alone changes no other element's value.
TEST(GgmlImportance, ZeroImportanceElementsDoNotSteerTheOthers) {
  const std::vector<float> x = Normal(kColumns, 4);
  std::vector<float> w = LogNormal(x.size(), 5);
  std::vector<float> flipped = x;
  std::vector<bool> moved(x.size(), false);
  int n_moved = 0;
  for (size_t j = 0; j < x.size(); ++j) {
    // Every third element weighs nothing, but never a 16-group's first (ggml
    // starts the weighted sums with it: 0 * x keeps the sign of x).
    if (j % 3 != 0 || j % 16 == 0) continue;
    w[j] = 0;
    float lo = 0, hi = 0;
    for (size_t k = j / 16 * 16; k < j / 16 * 16 + 16; ++k) {
      lo = std::fmin(lo, x[k]);
      hi = std::fmax(hi, x[k]);
    }
    if (std::fabs(x[j]) < std::fmin(-lo, hi)) {
      flipped[j] = -x[j];
      moved[j] = true;
      ++n_moved;
    }
  }
  ASSERT_GT(n_moved, 500);
  for (Type type : kWeighted) {
    SCOPED_TRACE(ggml::Info(type).name);
    const std::vector<float> y = Dec(type, Enc(type, x, w), x.size());
    const std::vector<float> y_flipped = Dec(type, Enc(type, flipped, w), x.size());
    int others_changed = 0, own_changed = 0;
    for (size_t j = 0; j < x.size(); ++j) {
      if (moved[j]) {
        own_changed += Bits(y[j]) != Bits(y_flipped[j]);
      } else {
        others_changed += Bits(y[j]) != Bits(y_flipped[j]);
      }
    }
    EXPECT_EQ(others_changed, 0);
    EXPECT_GT(own_changed, n_moved / 2);  // the moved elements themselves do follow
  }
}

// Zero importance on a whole block or group: ggml's fits have nothing to
// fit. q4_0, q5_0, iq4_nl (a 32-block) and q3_K, q6_K (a 16-group), iq4_xs
// (a 32-group) get scale 0 and decode to zeros; q4_1 and q5_1 keep the
// plain (max - min) / nmax start of make_qkx3_quants (no trial has D > 0)
// and still approximate the block. In q2_K, q4_K and q5_K a zero group
// keeps its own search's scale (only make_qp_quants ignores it), but a
// whole zero super-block has d = dmin = 0 and decodes to zeros.
TEST(GgmlImportance, ZeroImportanceBlocks) {
  const std::vector<float> x = Normal(kColumns, 6);
  std::vector<float> w = LogNormal(x.size(), 7);
  for (int j = 256; j < 288; ++j) w[j] = 0;   // one 32-block (two 16-groups)
  for (int j = 512; j < 768; ++j) w[j] = 0;   // one super-block
  auto max_abs = [](const std::vector<float>& y, int from, int to) {
    float m = 0;
    for (int j = from; j < to; ++j) m = std::fmax(m, std::fabs(y[j]));
    return m;
  };
  auto rms_error = [&x](const std::vector<float>& y, int from, int to) {
    double e = 0;
    for (int j = from; j < to; ++j) e += (x[j] - y[j]) * (x[j] - y[j]);
    return std::sqrt(e / (to - from));
  };
  for (Type type : kWeighted) {
    SCOPED_TRACE(ggml::Info(type).name);
    const std::vector<float> y = Dec(type, Enc(type, x, w), x.size());
    const bool block_zero = type != Type::kQ4_1 && type != Type::kQ5_1 && type != Type::kQ2_K &&
                            type != Type::kQ4_K && type != Type::kQ5_K;
    if (block_zero) {
      EXPECT_EQ(max_abs(y, 256, 288), 0.0f);
    } else {
      EXPECT_LT(rms_error(y, 256, 288), 0.5);
    }
    if (ggml::Info(type).block == 256) {
      EXPECT_EQ(max_abs(y, 512, 768), 0.0f);
    }
    EXPECT_LT(rms_error(y, 0, 256), 0.5);  // the weighted rest as usual
  }
}

// The point of the weights: measured with the same weights, the weighted
// search's error is no worse than the unweighted encoder's in most blocks
// (four N(0, 1) rows of 4096, one log-normal importance; measured fractions
// of the 512 blocks, 64 for the 256-element types: q4_0 0.949, q4_1 0.992,
// q5_0 0.963, q5_1 0.988, q2_K 1, q3_K 1, q4_K 1, q5_K 0.922, q6_K 1,
// iq4_nl 0.947, iq4_xs 1). The bound, 0.85, is a little under each.
TEST(GgmlImportance, WeightedErrorIsNoWorseForMostBlocks) {
  const std::vector<float> x = Normal(4 * kColumns, 8);
  const std::vector<float> row_w = LogNormal(kColumns, 9);
  for (Type type : kWeighted) {
    SCOPED_TRACE(ggml::Info(type).name);
    const int64_t block = ggml::Info(type).block;
    std::vector<float> y_w, y_plain;
    for (int r = 0; r < 4; ++r) {
      const std::vector<float> row(x.begin() + r * kColumns, x.begin() + (r + 1) * kColumns);
      const std::vector<float> a = Dec(type, Enc(type, row, row_w), row.size());
      const std::vector<float> b = Dec(type, Enc(type, row, {}), row.size());
      y_w.insert(y_w.end(), a.begin(), a.end());
      y_plain.insert(y_plain.end(), b.begin(), b.end());
    }
    int blocks = 0, no_worse = 0;
    for (size_t b0 = 0; b0 < x.size(); b0 += static_cast<size_t>(block)) {
      double e_w = 0, e_plain = 0;
      for (size_t j = b0; j < b0 + static_cast<size_t>(block); ++j) {
        const double w = row_w[j % kColumns];
        e_w += w * (x[j] - y_w[j]) * (x[j] - y_w[j]);
        e_plain += w * (x[j] - y_plain[j]) * (x[j] - y_plain[j]);
      }
      ++blocks;
      no_worse += e_w <= e_plain;
    }
    const double fraction = static_cast<double>(no_worse) / blocks;
    EXPECT_GE(fraction, 0.85) << ggml::Info(type).name << ": weighted error no worse in "
                              << fraction << " of " << blocks << " blocks";
  }
}

// Encode's `importance` means `in` is one row: q4_0..q5_1 weigh with the
// mean square of the whole row (quantize_row_q4_0_impl's sigma2), so a
// row's second half encodes differently alone when the first half is
// louder; the k-quants and i-quants take sigma2 per super-block and do not.
TEST(GgmlImportance, LegacyTypesWeighByTheWholeRow) {
  std::vector<float> x = Normal(kColumns, 10);
  for (int64_t j = 0; j < kColumns / 2; ++j) x[j] *= 10;
  const std::vector<float> w = LogNormal(kColumns, 11);
  const std::vector<float> half_x(x.begin() + kColumns / 2, x.end());
  const std::vector<float> half_w(w.begin() + kColumns / 2, w.end());
  for (Type type : kWeighted) {
    SCOPED_TRACE(ggml::Info(type).name);
    const std::vector<uint8_t> whole = Enc(type, x, w);
    const std::vector<uint8_t> alone = Enc(type, half_x, half_w);
    const std::vector<uint8_t> tail(whole.begin() + whole.size() / 2, whole.end());
    const bool by_row = type == Type::kQ4_0 || type == Type::kQ4_1 || type == Type::kQ5_0 ||
                        type == Type::kQ5_1;
    EXPECT_EQ(tail == alone, !by_row);
  }
}

// `clipped` counts the final codes the search clamped to an end of its
// range: for the weighted q4_0 (codes straight from make_qx_quants) never
// more than the codes at 0 or 15, and some, since the best trial scale is
// often under amax / 8 (the largest element clamps).
TEST(GgmlImportance, ClippedCountsCodesAtTheEnds) {
  const std::vector<float> x = Normal(kColumns, 12);
  const std::vector<float> w = LogNormal(kColumns, 13);
  uint64_t clipped = 0;
  const std::vector<uint8_t> bytes = Enc(Type::kQ4_0, x, w, &clipped);
  uint64_t at_ends = 0;
  for (size_t b = 0; b < bytes.size(); b += 18) {
    for (int j = 2; j < 18; ++j) {
      const int lo = bytes[b + j] & 0xF, hi = bytes[b + j] >> 4;
      at_ends += (lo == 0 || lo == 15) + (hi == 0 || hi == 15);
    }
  }
  EXPECT_GT(clipped, 0u);
  EXPECT_LE(clipped, at_ends) << "codes at 0 or 15";
}

}  // namespace
}  // namespace lowp
