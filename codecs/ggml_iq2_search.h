// Internal: ggml's iq2_xxs, iq2_xs and iq2_s encoders split along their
// jobs, so that kernels/ (a SIMD trial search) encodes with codecs' own
// choice, refit and packing. A group's search is 2 * steps + 1 independent
// trials (13 for iq2_xxs's groups of 32, 19 for the groups of 16), each the
// octets rounded to levels at one trial scale, moved to their best neighbour
// when off the grid, and the weighted sums of the result (Iq2TrialsScalar);
// then a choice among them in trial order and a refit (ggml_iq2.cc).
#ifndef LOWP_CODECS_GGML_IQ2_SEARCH_H_
#define LOWP_CODECS_GGML_IQ2_SEARCH_H_

#include <cstdint>

#include "codecs/ggml_iq2_grids.h"

namespace lowp::ggml::internal {

inline constexpr int kIq2MaxTrials = 19;
inline constexpr int kIq2MaxOctets = 4;

// What each trial t (is = t - steps) found: the levels (0..2) of its
// 8 * octets elements, which octets were on the grid before the neighbour
// search, and sum w x q, sum w q^2 (q = 2 l + 1, in element order).
struct Iq2Trials {
  int8_t L[kIq2MaxTrials][8 * kIq2MaxOctets];
  bool on_grid[kIq2MaxTrials][kIq2MaxOctets];
  float sumqx[kIq2MaxTrials];
  float sumq2[kIq2MaxTrials];
};

// Trial is's inverse scale against the group's largest magnitude (or
// iq2_xxs's make_qp_quants maximum), as ggml computes it.
inline float Iq2TrialId(int is, float max) { return (5 + is * 0.1f) / max; }

// Fills trials 0..2 * steps of one group of 8 * octets magnitudes xval.
using Iq2TrialSearch = void (*)(const GridSearch& grid, int octets, int steps, float max,
                                const float* xval, const float* weight, const float* waux,
                                Iq2Trials* trials);

// codecs' own trial search (scalar).
void Iq2TrialsScalar(const GridSearch& grid, int octets, int steps, float max, const float* xval,
                     const float* weight, const float* waux, Iq2Trials* trials);

// The encoders with a given trial search: the same bytes for any search
// that fills Iq2Trials as Iq2TrialsScalar does.
void EncodeIq2XxsWith(const float* x, const float* qw, uint8_t* out, Iq2TrialSearch search);
void EncodeIq2XsWith(const float* x, const float* qw, uint8_t* out, Iq2TrialSearch search);
void EncodeIq2SWith(const float* x, const float* qw, uint8_t* out, Iq2TrialSearch search);

}  // namespace lowp::ggml::internal

#endif  // LOWP_CODECS_GGML_IQ2_SEARCH_H_
