// Internal: ggml's block layouts, byte for byte as ggml/src/ggml-common.h
// lays them out (little-endian; ggml_half is an IEEE fp16 bit pattern). Each
// block covers `kElements` consecutive elements of one row; a row of n
// elements is n / kElements blocks back to back. The codecs memcpy a block out
// of (and into) the byte stream, so nothing here needs the stream aligned.
#ifndef LOWP_CODECS_GGML_BLOCKS_H_
#define LOWP_CODECS_GGML_BLOCKS_H_

#include <bit>
#include <cstdint>

namespace lowp::ggml {

static_assert(std::endian::native == std::endian::little, "ggml blocks are little-endian");

inline constexpr int kSuperBlock = 256;  // QK_K

// q4_0: x = (q - 8) * d. qs[j] holds element j in its low nibble and element
// j + 16 in its high nibble.
struct BlockQ4_0 {
  static constexpr int kElements = 32;
  uint16_t d;
  uint8_t qs[16];
};
static_assert(sizeof(BlockQ4_0) == 18);

// q4_1: x = q * d + m, nibbles as q4_0.
struct BlockQ4_1 {
  static constexpr int kElements = 32;
  uint16_t d;
  uint16_t m;
  uint8_t qs[16];
};
static_assert(sizeof(BlockQ4_1) == 20);

// q5_0: x = (q - 16) * d; the low 4 bits as q4_0, bit 4 of element j in bit
// j of the little-endian word qh.
struct BlockQ5_0 {
  static constexpr int kElements = 32;
  uint16_t d;
  uint8_t qh[4];
  uint8_t qs[16];
};
static_assert(sizeof(BlockQ5_0) == 22);

// q5_1: x = q * d + m, bits as q5_0.
struct BlockQ5_1 {
  static constexpr int kElements = 32;
  uint16_t d;
  uint16_t m;
  uint8_t qh[4];
  uint8_t qs[16];
};
static_assert(sizeof(BlockQ5_1) == 24);

// q8_0: x = q * d, q in -128..127 (ggml writes -127..127).
struct BlockQ8_0 {
  static constexpr int kElements = 32;
  uint16_t d;
  int8_t qs[32];
};
static_assert(sizeof(BlockQ8_0) == 34);

// q2_K: 16 groups of 16; group g has scale d * (scales[g] & 15) and minimum
// dmin * (scales[g] >> 4); x = scale * q - minimum, q in 0..3. Element
// 128 h + 32 s + l (h = 0..1, s = 0..3, l = 0..31) is bits 2s..2s+1 of
// qs[32 h + l].
struct BlockQ2_K {
  static constexpr int kElements = kSuperBlock;
  uint8_t scales[16];
  uint8_t qs[64];
  uint16_t d;
  uint16_t dmin;
};
static_assert(sizeof(BlockQ2_K) == 84);

// q3_K: 16 groups of 16 with 6-bit signed scales (biased by 32): the low 4
// bits of group g in nibble g / 8 of scales[g % 8], the high 2 bits in bits
// 2 (g / 4) of scales[8 + g % 4]; x = d * (scale - 32) * (q - 4), q in 0..7:
// its low 2 bits placed as q2_K's, its bit 2 in bit (element / 32) of
// hmask[element % 32].
struct BlockQ3_K {
  static constexpr int kElements = kSuperBlock;
  uint8_t hmask[32];
  uint8_t qs[64];
  uint8_t scales[12];
  uint16_t d;
};
static_assert(sizeof(BlockQ3_K) == 110);

// q4_K: 8 groups of 32 with 6-bit scales and minimums packed in 12 bytes
// (groups 0..3: scales[g] and scales[g + 4] low 6 bits; groups 4..7: the
// low nibbles in scales[g + 4], the high 2 bits in the top bits of
// scales[g - 4] and scales[g]); x = d * scale * q - dmin * minimum, q in
// 0..15. Elements 64 c + l and 64 c + 32 + l are the low and high nibbles of
// qs[32 c + l].
struct BlockQ4_K {
  static constexpr int kElements = kSuperBlock;
  uint16_t d;
  uint16_t dmin;
  uint8_t scales[12];
  uint8_t qs[128];
};
static_assert(sizeof(BlockQ4_K) == 144);

// q5_K: q4_K with 5-bit q: bit 4 of element 64 c + l in bit 2c of qh[l], of
// element 64 c + 32 + l in bit 2c + 1.
struct BlockQ5_K {
  static constexpr int kElements = kSuperBlock;
  uint16_t d;
  uint16_t dmin;
  uint8_t scales[12];
  uint8_t qh[32];
  uint8_t qs[128];
};
static_assert(sizeof(BlockQ5_K) == 176);

// q6_K: 16 groups of 16 with int8 scales; x = d * scale * (q - 32), q in
// 0..63. In each half h (128 elements), element 128 h + 32 s + l has its low
// nibble in ql[64 h + l + 32 (s & 1)] (low nibble for s < 2, high for s >= 2)
// and its top 2 bits in bits 2s..2s+1 of qh[32 h + l].
struct BlockQ6_K {
  static constexpr int kElements = kSuperBlock;
  uint8_t ql[128];
  uint8_t qh[64];
  int8_t scales[16];
  uint16_t d;
};
static_assert(sizeof(BlockQ6_K) == 210);

// iq4_nl: x = d * kIq4Values[q], nibbles as q4_0.
struct BlockIq4Nl {
  static constexpr int kElements = 32;
  uint16_t d;
  uint8_t qs[16];
};
static_assert(sizeof(BlockIq4Nl) == 18);

// iq4_xs: 8 groups of 32 with 6-bit scales biased by 32 (low nibble of group
// g in nibble g % 2 of scales_l[g / 2], high 2 bits in bits 2g of scales_h);
// x = d * (scale - 32) * kIq4Values[q], each group's nibbles as q4_0.
struct BlockIq4Xs {
  static constexpr int kElements = kSuperBlock;
  uint16_t d;
  uint16_t scales_h;
  uint8_t scales_l[4];
  uint8_t qs[128];
};
static_assert(sizeof(BlockIq4Xs) == 136);

// ggml's MXFP4 (type 39): an e8m0 exponent and 32 e2m1 codes, nibbles as
// q4_0 (OCP MX v1.0's element and scale encodings).
struct BlockMxfp4 {
  static constexpr int kElements = 32;
  uint8_t e;
  uint8_t qs[16];
};
static_assert(sizeof(BlockMxfp4) == 17);

// ggml's NVFP4 (type 40): four sub-blocks of 16, each with an unsigned e4m3
// scale, then 32 bytes of e2m1 codes (sub-block s in qs[8 s .. 8 s + 7],
// element j in the low nibble of byte j, element j + 8 in the high one).
// No tensor-wide scale.
struct BlockNvfp4 {
  static constexpr int kElements = 64;
  uint8_t d[4];
  uint8_t qs[32];
};
static_assert(sizeof(BlockNvfp4) == 36);

// tq1_0: ternary {-1, 0, 1} * d. qs[0..31] hold elements 32 n + m (n =
// 0..4) as base-3 digits scaled into a byte (digit n of qs[m] is
// ((qs[m] * 3^n) mod 256) * 3 >> 8), qs[32..47] elements 160 + 16 n + m the
// same way, qh[0..3] elements 240 + 4 n + j.
struct BlockTq1_0 {
  static constexpr int kElements = kSuperBlock;
  uint8_t qs[48];
  uint8_t qh[4];
  uint16_t d;
};
static_assert(sizeof(BlockTq1_0) == 54);

// tq2_0: (q - 1) * d with 2-bit q; element 128 h + 32 l + m in bits 2l of
// qs[32 h + m].
struct BlockTq2_0 {
  static constexpr int kElements = kSuperBlock;
  uint8_t qs[64];
  uint16_t d;
};
static_assert(sizeof(BlockTq2_0) == 66);

// q1_0: one sign bit per element (bit j % 8 of qs[j / 8]): +d or -d.
struct BlockQ1_0 {
  static constexpr int kElements = 128;
  uint16_t d;
  uint8_t qs[16];
};
static_assert(sizeof(BlockQ1_0) == 18);

// q2_0: (q - 1) * d with 2-bit q in bits 2 (j % 4) of qs[j / 4].
struct BlockQ2_0 {
  static constexpr int kElements = 64;
  uint16_t d;
  uint8_t qs[16];
};
static_assert(sizeof(BlockQ2_0) == 18);

// iq3_xxs: 8 groups of 32, each 8 grid points of 4 elements (the 256-point
// grid, ggml_iq3_grids.h). qs[8 g + k] is the grid index of elements
// 32 g + 4 k .. + 3. signs_and_scales[4 g .. 4 g + 3] is group g's
// little-endian word: bits 7 m .. 7 m + 6 the signs of elements
// 32 g + 8 m + i (i = 0..6, bit set: negative), element 32 g + 8 m + 7
// negative when those 7 bits have odd parity (ksigns_iq2xs), bits 28..31 the
// scale s; x = d * (0.5 + s) * 0.5 * kIq3XxsDecodeLevel[l] * sign.
struct BlockIq3Xxs {
  static constexpr int kElements = kSuperBlock;
  uint16_t d;
  uint8_t qs[64];
  uint8_t signs_and_scales[32];
};
static_assert(sizeof(BlockIq3Xxs) == 98);

// iq3_s: 8 groups of 32, each 8 points of the 512-point grid: grid index
// qs[8 g + k] | (bit k of qh[g]) << 8 for elements 32 g + 4 k .. + 3. Bit i
// of signs[4 g + m] set: element 32 g + 8 m + i negative. Nibble g % 2 of
// scales[g / 2] is the scale s; x = d * (1 + 2 s) * (2 l + 1) * sign.
struct BlockIq3S {
  static constexpr int kElements = kSuperBlock;
  uint16_t d;
  uint8_t qs[64];
  uint8_t qh[8];
  uint8_t signs[32];
  uint8_t scales[4];
};
static_assert(sizeof(BlockIq3S) == 110);

// The 2-bit and 1-bit grid i-quants (codecs/ggml_iq2_grids.h): elements go
// in groups of 8, each one point of an 8-dimensional codebook.

// iq2_xxs: 8 groups of 32. Group g is qs[4g..4g+3] read as two little-endian
// words: word 0 holds its four 8-bit grid indices (octet k in bits 8k), word
// 1 octet k's 7 sign bits in bits 7k..7k+6 (the eighth sign makes the count
// of negatives even) and the 4-bit scale s in bits 28..31;
// x = d * (0.5 + s) / 4 * kIq2LevelValues[level] * sign.
struct BlockIq2Xxs {
  static constexpr int kElements = kSuperBlock;
  uint16_t d;
  uint16_t qs[32];
};
static_assert(sizeof(BlockIq2Xxs) == 66);

// iq2_xs: qs[j] is octet j: a 9-bit grid index and its 7 sign bits << 9
// (eighth as iq2_xxs); 16 groups of 16 with 4-bit scales, group g in nibble
// g % 2 of scales[g / 2]; x = d * (0.5 + s) / 4 * value * sign.
struct BlockIq2Xs {
  static constexpr int kElements = kSuperBlock;
  uint16_t d;
  uint16_t qs[32];
  uint8_t scales[8];
};
static_assert(sizeof(BlockIq2Xs) == 74);

// iq2_s: octet j's 10-bit grid index has its low 8 bits in qs[j] and its top
// 2 in bits 2 (j % 4) of qh[j / 4]; its 8 sign bits (all stored) are
// qs[32 + j]; scales as iq2_xs, x = d * (0.5 + s) / 4 * value * sign.
struct BlockIq2S {
  static constexpr int kElements = kSuperBlock;
  uint16_t d;
  uint8_t qs[64];
  uint8_t qh[8];
  uint8_t scales[8];
};
static_assert(sizeof(BlockIq2S) == 82);

// iq1_s: 8 groups of 32; octet j's 11-bit grid index has its low 8 bits in
// qs[j], its top 3 in bits 3 (j % 4) of qh[j / 4]; qh[g] bits 12..14 hold
// group g's 3-bit scale s, bit 15 the sign of its shift:
// x = d * (2 s + 1) * (kIq1LevelValues[level] ± 0.125), + unless bit 15.
struct BlockIq1S {
  static constexpr int kElements = kSuperBlock;
  uint16_t d;
  uint8_t qs[32];
  uint16_t qh[8];
};
static_assert(sizeof(BlockIq1S) == 50);

// iq1_m: no d field: the fp16 super-block scale's 16 bits are the top
// nibbles of the four little-endian words of scales (bits 0..3 in word 0's
// nibble 3, ...). 16 groups of 16: group g's 3-bit scale s is bits 3 (g % 4)
// of word g / 4. Octet j's 11-bit index has its low 8 bits in qs[j], its top
// 3 in bits 4 (j % 2) of qh[j / 2], whose bit 4 (j % 2) + 3 makes the
// octet's shift negative: x = d * (2 s + 1) * (level value ± 0.125).
struct BlockIq1M {
  static constexpr int kElements = kSuperBlock;
  uint8_t qs[32];
  uint8_t qh[16];
  uint8_t scales[8];
};
static_assert(sizeof(BlockIq1M) == 56);

// The non-uniform 4-bit grid of iq4_nl and iq4_xs (kvalues_iq4nl).
inline constexpr int8_t kIq4Values[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                          1,    13,   25,  38,  53,  69,  89,  113};
// e2m1 values doubled, code order (kvalues_mxfp4): MXFP4 and NVFP4 scales are
// stored at half their value.
inline constexpr int8_t kFp4Values[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};

}  // namespace lowp::ggml

#endif  // LOWP_CODECS_GGML_BLOCKS_H_
