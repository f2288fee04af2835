// Internal: the k-quants' and the weighted legacy types' encoders split along
// their two jobs, so that a faster search (kernels/ggml_kquants_simd.cc) ends
// in codecs' own packing: (1) the search fits every group of a block on its
// own (ggml_kquants_search.h), (2) the finish quantizes the groups' scales,
// requantizes the codes against them and packs the block's bytes. Encode is
// Search then Finish; a kernel that fills KGroupFits with the same bits may
// call Finish itself.
#ifndef LOWP_CODECS_GGML_KQUANTS_PARTS_H_
#define LOWP_CODECS_GGML_KQUANTS_PARTS_H_

#include <cstddef>
#include <cstdint>

namespace lowp::ggml::internal {

// One super-block's group fits as the search leaves them: group j's scale,
// negated minimum (q2_K, q4_K, q5_K; >= 0) and weight sum (with importance
// only), and every element's code (offset to be >= 0, as each search
// returns it; q3_K and q6_K read them as int8_t).
struct KGroupFits {
  float scales[16];
  float mins[16];
  float weight_sums[16];
  uint8_t codes[256];
};

// The sum of n squares in order (the k-quants' sigma2 is a multiple of it
// over the super-block, q4_K/q5_K's reference av_x over a group).
float SumSquares(const float* x, int n);

// (1) qw null: quantize_row_<type>_ref's group search; else _impl's.
void SearchQ2_K(const float* x, const float* qw, KGroupFits& fits);
void SearchQ3_K(const float* x, const float* qw, KGroupFits& fits);
void SearchQ4_K(const float* x, const float* qw, KGroupFits& fits);
void SearchQ5_K(const float* x, const float* qw, KGroupFits& fits);
void SearchQ6_K(const float* x, const float* qw, KGroupFits& fits);

// The finish's requantization: group j's codes again against its scale as
// stored, clamp(nearest_int((x + dm[j]) / d[j]), lo, hi) - lo (x / d[j]
// without a minimum), counting the clamps; a group whose d is 0 keeps the
// search's codes.
struct KRequant {
  float d[16];
  float dm[16];
  int group;   // elements per group
  int groups;  // groups per super-block
  int lo, hi;
  bool with_min;
};
using RequantizeFn = void (*)(const float* x, const KRequant& r, uint8_t* codes,
                              uint64_t& clipped);
void Requantize(const float* x, const KRequant& r, uint8_t* codes, uint64_t& clipped);

// (2) `weighted`: whether the fits came from the importance search. Changes
// fits.codes (requantize, Requantize or one with its results, changes them
// in place).
void FinishQ2_K(const float* x, bool weighted, KGroupFits& fits, uint8_t* out, uint64_t& clipped,
                RequantizeFn requantize = Requantize);
void FinishQ3_K(const float* x, bool weighted, KGroupFits& fits, uint8_t* out, uint64_t& clipped,
                RequantizeFn requantize = Requantize);
void FinishQ4_K(const float* x, bool weighted, KGroupFits& fits, uint8_t* out, uint64_t& clipped,
                RequantizeFn requantize = Requantize);
void FinishQ5_K(const float* x, bool weighted, KGroupFits& fits, uint8_t* out, uint64_t& clipped,
                RequantizeFn requantize = Requantize);
void FinishQ6_K(const float* x, KGroupFits& fits, uint8_t* out, uint64_t& clipped,
                RequantizeFn requantize = Requantize);

// The weighted legacy types: sigma2 is the row's mean square (summed in row
// order), each 32-element block is one make_qx_quants (q4_0, q5_0: codes
// + 8 / + 16) or make_qkx3_quants (q4_1, q5_1) fit, stored as is.
float RowMeanSquare(const float* x, size_t n);
void StoreQ4_0(float d, const uint8_t* codes, uint8_t* out);
void StoreQ5_0(float d, const uint8_t* codes, uint8_t* out);
void StoreQ4_1(float d, float neg_min, const uint8_t* codes, uint8_t* out);
void StoreQ5_1(float d, float neg_min, const uint8_t* codes, uint8_t* out);

}  // namespace lowp::ggml::internal

#endif  // LOWP_CODECS_GGML_KQUANTS_PARTS_H_
