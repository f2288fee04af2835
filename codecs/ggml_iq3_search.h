// Internal: ggml's iq3_xxs and iq3_s encoders split along their jobs, so that
// kernels/ (a SIMD trial search) encodes with codecs' own choice, refit and
// packing. One group's search is 2 * steps + 1 independent trials, each the
// on-grid points nearest the magnitudes at one trial scale and their
// weighted sums (Iq3Trial); then a choice among them in trial order and a
// refit of the points off the grid (ggml_iq3.cc's FitGroup).
#ifndef LOWP_CODECS_GGML_IQ3_SEARCH_H_
#define LOWP_CODECS_GGML_IQ3_SEARCH_H_

#include <cstdint>

#include "codecs/ggml_iq3_grids.h"

namespace lowp::ggml::internal {

inline constexpr int kIq3Group = 32;
inline constexpr int kIq3GroupPoints = kIq3Group / 4;
inline constexpr int kIq3MaxTrials = 31;

// How the two encoders differ.
struct Iq3Variant {
  const Iq3Lattice& lattice;
  int steps;       // trial scales id = (15 + 0.2 is) / max, is in -steps..steps
  bool refit_all;  // after the trials, iq3_s re-picks every point; iq3_xxs only those off the grid
};

// What each trial t (is = t - steps) found: the levels of its points, which
// of them were on the grid before the neighbour search, and the sums
// sum w x q and sum w q^2 (q = 2 l + 1, in element order).
struct Iq3Trials {
  int8_t L[kIq3MaxTrials][kIq3Group];
  bool on_grid[kIq3MaxTrials][kIq3GroupPoints];
  float sumqx[kIq3MaxTrials];
  float sumq2[kIq3MaxTrials];
};

// Trial is's inverse scale, as ggml computes it.
inline float Iq3TrialId(int is, float max) { return (2 * kIq3Levels - 1 + is * 0.2f) / max; }

// Fills every trial of one group of magnitudes xval (largest `max`).
using Iq3TrialSearch = void (*)(const Iq3Variant& v, const float* xval, const float* weight,
                                const float* waux, float max, Iq3Trials* trials);

// codecs' own trial search (scalar).
void Iq3TrialsScalar(const Iq3Variant& v, const float* xval, const float* weight,
                     const float* waux, float max, Iq3Trials* trials);

// The encoders with a given trial search: the same bytes for any search
// that fills Iq3Trials as Iq3TrialsScalar does.
void EncodeIq3XxsWith(const float* x, const float* qw, uint8_t* out, uint64_t& clipped,
                      Iq3TrialSearch search);
void EncodeIq3SWith(const float* x, const float* qw, uint8_t* out, uint64_t& clipped,
                    Iq3TrialSearch search);

}  // namespace lowp::ggml::internal

#endif  // LOWP_CODECS_GGML_IQ3_SEARCH_H_
