// Internal: ggml's iq4_nl and iq4_xs encoders split along their jobs, so that
// kernels/ (a SIMD scale search) encodes with the same weights, candidate
// scales, choice and packing as codecs' Encode. One 32-element group's search
// (quantize_row_iq4_nl_impl with ntry = 7) is kIq4Candidates independent fits,
// each a pair of weighted sums over the group in element order, then a choice
// among them in candidate order:
//   Iq4Candidates -> (the sums of each candidate) -> Iq4ChooseScale.
#ifndef LOWP_CODECS_GGML_IQ4_H_
#define LOWP_CODECS_GGML_IQ4_H_

#include <cstdint>

namespace lowp::ggml::internal {

inline constexpr int kIq4Group = 32;
// The first fit (scale -max / values[0]) and ntry = 7 each side of it.
inline constexpr int kIq4Candidates = 16;

// best_index_int8: the index of the kIq4Values value nearest to a, the upper
// one on a tie; below the first or above the last the end (counted in
// *clipped when not null); NaN gives 15.
int Iq4BestIndex(float a, uint64_t* clipped);

// The element weights of one super-block of n elements (32 for iq4_nl, 256
// for iq4_xs): x^2, or with importance qw * sqrtf(sigma2 + x^2).
void Iq4Weights(const float* x, const float* qw, int n, float* weight);

// The inverse scales (`id`) of the group's candidates, in search order.
// Returns false for a group whose largest magnitude is below ggml's
// GROUP_MAX_EPS: its scale is 0 without a search. *max: the signed element
// of largest magnitude.
bool Iq4Candidates(const float* xb, float* ids, float* max);

// The fit of one candidate inverse scale: for j in element order, with
// q = kIq4ValuesF[BestIndex(id * xb[j])], sumqx += w[j] * q * xb[j] and
// sumq2 += w[j] * q * q (each product rounded left to right).
void Iq4Fit(const float* xb, const float* weight, float id, float* sumqx, float* sumq2);

// The group's scale from the candidates' sums, chosen as ggml does.
float Iq4ChooseScale(const float* sumqx, const float* sumq2);

// The group's scale: Iq4Candidates, Iq4Fit for each, Iq4ChooseScale.
float Iq4GroupScale(const float* xb, const float* weight);

// The bytes of one block from its elements and the group scales the search
// chose (one for iq4_nl, eight for iq4_xs); adds the clamped codes.
void PackIq4Nl(const float* x, float scale, uint8_t* out, uint64_t& clipped);
void PackIq4Xs(const float* x, const float* scales, uint8_t* out, uint64_t& clipped);

}  // namespace lowp::ggml::internal

#endif  // LOWP_CODECS_GGML_IQ4_H_
