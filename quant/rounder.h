// GPTQ's hold on a scheme (calib/gptq.h): for schemes whose codes are chosen
// one element at a time once a block's parameters (scales, zero points,
// minimums) are set, a BlockRounder lets the caller choose a block's
// parameters from values it has changed and then round the block's columns
// one after another, each from values changed again by the errors of the
// columns before it.
//
// The caller walks the columns of a [rows, cols] matrix in order. At the
// first column of each block of block_cols() columns it hands Choose the
// block's values as they are then, and Choose sets the parameters of every
// row's block by the scheme's own search on them (ggml's, bit for bit, with
// the importance weights given). Round then takes the block's columns in
// order and gives each element the value nearest to it among those its block
// can hold: the scheme's own element rule (integer schemes) or, for ggml's
// types, the nearest of the values ggml's decoder gives the element's
// possible codes. The matrix the caller ends with is one the scheme stores
// exactly; for ggml's types Bytes() holds its blocks.
//
// Rows are independent but in groups of block_rows() (a 2-D block's
// height, 1 for every other layout): a caller may walk the columns for
// several ranges of rows, each starting at a multiple of block_rows(), at
// once on different threads.
#ifndef LOWP_QUANT_ROUNDER_H_
#define LOWP_QUANT_ROUNDER_H_

#include <algorithm>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "absl/status/statusor.h"
#include "codecs/ggml.h"
#include "quant/scheme.h"

namespace lowp {

class BlockRounder {
 public:
  virtual ~BlockRounder() = default;

  // Columns whose parameters are chosen together: an integer group, ggml's
  // block or super-block, the whole row for a channel or tensor scale.
  int64_t block_cols() const { return block_cols_; }
  // Rows whose parameters are chosen together (see above).
  int64_t block_rows() const { return block_rows_; }
  int64_t rows() const { return rows_; }
  int64_t cols() const { return cols_; }

  // Chooses the parameters of columns [first, first + n) (n = block_cols,
  // or what is left of the row) of rows [row0, row0 + values.size() / n)
  // from `values` (those rows' n values each) with `importance` (n weights,
  // one per column, or empty). `first` is a multiple of block_cols, blocks
  // in order.
  virtual void Choose(int64_t first, int64_t row0, std::span<const float> values,
                      std::span<const float> importance) = 0;
  // Rounds column `col` of rows [row0, row0 + in.size()) into `out`: col
  // lies in the block Choose last chose for those rows, each column once, in
  // order.
  virtual void Round(int64_t col, int64_t row0, std::span<const float> in,
                     std::span<float> out) = 0;

  // Whether the blocks may be any columns (GPTQ's act_order with g_idx), not
  // only consecutive ones (ggml's layouts).
  virtual bool Permutable() const { return false; }

  // The stored bytes of the rows rounded so far, ggml's blocks row after row
  // (empty for a scheme without a real layout).
  virtual std::span<const uint8_t> Bytes() const { return {}; }

  // The parameters Choose has set so far, for writers of the scheme's
  // CodeLayout (Scheme::Codes): StoredChunk's scales and offsets (codes and
  // bytes empty), one per block, [row blocks, column blocks] row-major,
  // the column blocks in the order Choose took them (act-order's), and
  // NVFP4's tensor_scale. Empty for a rounder that keeps none (ggml's: its
  // Bytes).
  const StoredChunk& Parameters() const { return parameters_; }

 protected:
  BlockRounder(int64_t rows, int64_t cols, int64_t block_cols, int64_t block_rows = 1)
      : rows_(rows), cols_(cols), block_cols_(block_cols), block_rows_(block_rows) {}

  // The width of the block that starts at column `first`.
  int64_t Width(int64_t first) const { return std::min(block_cols_, cols_ - first); }

  // For a constructor: Parameters() kept (with zero points when `offsets`).
  void KeepParameters(bool offsets, float tensor_scale = 0);
  // For Choose: `stored` (Scheme::Stored of the block's values; one scale
  // per row block) as the parameters of the block at `first`, rows from
  // row0. Blocks of different rows may be recorded from different threads.
  void Record(int64_t first, int64_t row0, const StoredChunk& stored);

 private:
  int64_t rows_, cols_, block_cols_, block_rows_;
  StoredChunk parameters_;
};

// The rounder of ggml's type `type` (one whose codes CodeCount counts) for
// [rows, cols] matrices; cols must be a multiple of its block. Values handed
// to Choose must be finite.
absl::StatusOr<std::unique_ptr<BlockRounder>> MakeGgmlRounder(ggml::Type type, int64_t rows,
                                                              int64_t cols);

}  // namespace lowp

#endif  // LOWP_QUANT_ROUNDER_H_
