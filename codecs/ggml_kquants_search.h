// Internal: ggml's scale searches (make_qkx2_quants, make_qkx3_quants,
// make_q3_quants, make_qx_quants and make_qp_quants of ggml-quants.c), shared
// by the k-quants and, with importance weights, the 32-element legacy types.
// Each is ggml's float operation for float operation: sums accumulate in the
// same order and precision, products associate as written there (w * x * l
// is (w * x) * l), so the codes and scales they return are ggml's bit for bit.
#ifndef LOWP_CODECS_GGML_KQUANTS_SEARCH_H_
#define LOWP_CODECS_GGML_KQUANTS_SEARCH_H_

#include <cstdint>

namespace lowp::ggml::internal {

// ggml's MAX(lo, MIN(hi, v)) on a code.
inline int Clamp(int v, int lo, int hi) { return v < lo ? lo : v > hi ? hi : v; }

// The same, counting in `clipped` a code that had to move.
inline int Clamp(int v, int lo, int hi, uint64_t& clipped) {
  const int c = Clamp(v, lo, hi);
  clipped += c != v;
  return c;
}

// make_qkx2_quants: the scale and minimum of an asymmetric n-element group
// with codes 0..nmax in L, chosen among nstep + 1 trial scales by the
// weighted error (absolute if use_mad, else squared). Returns the scale;
// *the_min is the negated minimum (>= 0). Also make_qkx3_quants whenever its
// weights are not null (the two differ only in `max == min` against
// `max <= min`, the same test for finite x: min <= x[0] <= max, and min is
// only raised to 0 when 0 < min <= max). Adds to *clipped, when not null, the codes of the
// returned L that were clamped to 0 or nmax.
float MakeQkx2Quants(int n, int nmax, const float* x, const float* weights, uint8_t* L,
                     float* the_min, uint8_t* Laux, float rmin, float rdelta, int nstep,
                     bool use_mad, uint64_t* clipped = nullptr);

// make_q3_quants with do_rmse: a symmetric n-element group with codes
// -nmax..nmax-1 (stored + nmax), refined by up to 5 passes that move one
// code at a time while the x^2-weighted fit improves.
float MakeQ3Quants(int n, int nmax, const float* x, int8_t* L);

// make_qx_quants with rmse_type 1: a symmetric group with codes
// -nmax..nmax-1 (stored + nmax in L), the best of 19 trial scales by the
// fit weighted with qw, or with x^2 when qw is null. Adds to *clipped, when
// not null, the codes of the returned L that were clamped to either end.
float MakeQxQuants(int n, int nmax, const float* x, const float* qw, int8_t* L,
                   uint64_t* clipped = nullptr);

// make_qp_quants: a scale for n non-negative values (the k-quants' group
// scales or minimums) with codes 0..nmax in L, the best of 9 trial scales by
// the qw-weighted squared error, then refined one code at a time as
// make_q3_quants does. ggml stores the codes in uint8_t; a negative value's
// code wraps there, and so it does here.
float MakeQpQuants(int n, int nmax, const float* x, const float* qw, uint8_t* L);

}  // namespace lowp::ggml::internal

#endif  // LOWP_CODECS_GGML_KQUANTS_SEARCH_H_
