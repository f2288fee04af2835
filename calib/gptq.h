// GPTQ (Frantar, Ashkboos, Hoefler, Alistarh 2022, "GPTQ: Accurate
// Post-Training Quantization for Generative Pre-trained Transformers"):
// quantizes a linear layer's weight W [rows, cols] column by column, each
// column's rounding error fed forward to the columns not yet quantized so
// that the layer's output on the calibration inputs (their Hessian H,
// calib/hessian.h) moves as little as it can.
//
// As the paper's reference implementation (gptq.py, fasterquant) does:
//   - a column no input reaches (H_jj = 0) gets H_jj = 1 and weight 0;
//   - dampening: H += damp * mean(diag H) * I;
//   - with act_order, the columns are taken by descending H_jj (ties in
//     column order), and a group is consecutive columns of that order, as
//     GPTQ checkpoints store it with g_idx;
//   - columns in batches of `batch`: within a batch each column's rounding
//     updates the batch's later columns at once, the columns after the
//     batch once per batch (one matrix product).
// What differs, on purpose:
//   - the arithmetic is the paper's in the form that needs one Cholesky of H
//     and no inverse (QuIP's LDLQ, Chee et al. 2023, shows the two equal):
//     with H = (I + A) D (I + A)^T, A strictly upper triangular (from
//     Cholesky of H with its indices reversed), column k is rounded from
//     w_k + sum over i < k of (w_i - q_i) A_ik, w the weight as given.
//     The paper's updates (w'_k -= e_i U_ik, e_i = (w'_i - q_i) / U_ii,
//     H^-1 = U^T U) add up to the same sums: I + A is the inverse of U with
//     its rows divided by their diagonal (tests/gptq_test.cc checks the
//     codes against the paper's loop);
//   - H is factored where it lies (the Hessian's own storage, permuted in
//     place), and W, A and the errors are kept in double (the reference:
//     float32);
//   - a block's scales are chosen (BlockRounder::Choose, the scheme's own
//     search, weighted by the columns' mean square input: the importance
//     matrix GPTQ's inputs imply) from the block's weights as every earlier
//     column's error has updated them, when the loop reaches its first
//     column (the reference's find_params sees the batch's columns before
//     the updates of the batch's earlier columns).
#ifndef LOWP_CALIB_GPTQ_H_
#define LOWP_CALIB_GPTQ_H_

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "calib/hessian.h"
#include "quant/scheme.h"

namespace lowp {

struct GptqOptions {
  double damp = 0.01;  // of the mean of diag(H)
  bool act_order = false;
  int64_t batch = 128;  // columns per lazy update (made to fit the scheme's blocks)
  int threads = 0;      // 0: all
};

struct GptqResult {
  std::vector<float> values;   // [rows, cols]: the quantized weight, as dequantized
  std::vector<uint8_t> bytes;  // ggml's blocks, row after row (ggml types only; columns in order)
  std::vector<int32_t> order;  // the column order GPTQ took (act_order), else empty
  // The scales and zero points of a scheme with a CodeLayout
  // (BlockRounder::Parameters; their column blocks follow `order`).
  StoredChunk parameters;
};

// H made ready for the column loop: the column order, the dead columns, A
// and the columns' mean squares (in that order). The same for every matrix
// that multiplies these inputs (q, k and v; gate and up): made once per
// stage. InvalidArgument naming `name` for no calibration rows, over 65536
// columns, a dampening out of range or non-finite inputs; FailedPrecondition
// when H is not positive definite after dampening. The rvalue form factors
// H in its own storage (the Hessian is left without a matrix), the other a
// copy.
struct GptqFactor {
  std::vector<int32_t> order;
  std::vector<uint8_t> dead;
  std::vector<double> a;          // [n, n] row-major: A_ik for k > i (nothing else read)
  std::vector<float> importance;  // per column, in `order`
  bool act_order = false;
};
absl::StatusOr<GptqFactor> FactorHessian(const std::string& name, Hessian&& h,
                                         const GptqOptions& options);
absl::StatusOr<GptqFactor> FactorHessian(const std::string& name, const Hessian& h,
                                         const GptqOptions& options);

// Quantizes `w` ([rows, cols], finite) with `scheme` (which must give a
// BlockRounder), `context` its tensor context over w. InvalidArgument
// naming `name` for a scheme GPTQ cannot round, act_order with a scheme
// whose blocks cannot follow a permutation (ggml's types), a shape that
// does not fit, non-finite weights or H, or no calibration rows; H must be
// positive definite after dampening (FailedPrecondition otherwise).
absl::StatusOr<GptqResult> Gptq(const std::string& name, std::span<const float> w, int64_t rows,
                                int64_t cols, Hessian h, const Scheme& scheme,
                                const TensorContext& context, const GptqOptions& options);
// The same from a factor of the inputs' H (options.act_order and damp are
// the factor's), the quantized weight into `out` when given ([rows, cols],
// not overlapping `w`; result.values is then empty).
absl::StatusOr<GptqResult> Gptq(const std::string& name, std::span<const float> w, int64_t rows,
                                int64_t cols, const GptqFactor& factor, const Scheme& scheme,
                                const TensorContext& context, const GptqOptions& options,
                                std::span<float> out = {});

}  // namespace lowp

#endif  // LOWP_CALIB_GPTQ_H_
