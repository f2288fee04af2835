// ggml's types as BlockRounders: each row's block is encoded by ggml's own
// quantizer (codecs/ggml.h, with the importance weights given) from the
// values Choose is handed; the values an element can then take are what
// ggml's decoder gives each of its codes (codecs/ggml_codes.cc sets them),
// and Round picks the nearest.
#include "quant/rounder.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <numeric>
#include <utility>

#include "absl/strings/str_cat.h"
#include "kernels/ggml_encode.h"

namespace lowp {
namespace {

class GgmlRounder final : public BlockRounder {
 public:
  GgmlRounder(const ggml::TypeInfo& info, int64_t rows, int64_t cols)
      : BlockRounder(rows, cols, info.block),
        info_(info),
        codes_(ggml::CodeCount(info.type)),
        bytes_(static_cast<size_t>(rows * ggml::RowBytes(info, cols))),
        row_grids_(static_cast<size_t>(rows)),
        chosen_(static_cast<size_t>(rows * info.block)),
        uniform_(static_cast<size_t>(codes_ * info.bytes)),
        code_bits_(static_cast<size_t>(info.bytes)) {
    // uniform_: a zero block with every element's code c, per c; code_bits_:
    // the bits SetCodes writes (the same from a block of zeros and of ones).
    const int64_t n = info.block, bytes = info.bytes;
    std::vector<uint8_t> codes(static_cast<size_t>(n)), ones(static_cast<size_t>(bytes));
    for (int c = 0; c < codes_; ++c) {
      std::fill(codes.begin(), codes.end(), static_cast<uint8_t>(c));
      std::span<uint8_t> zero(uniform_.data() + c * bytes, static_cast<size_t>(bytes));
      std::fill(ones.begin(), ones.end(), uint8_t{0xFF});
      (void)ggml::SetCodes(info.type, zero, codes);
      (void)ggml::SetCodes(info.type, ones, codes);
      for (int64_t i = 0; i < bytes; ++i) {
        code_bits_[static_cast<size_t>(i)] |= static_cast<uint8_t>(~(zero[i] ^ ones[i]));
      }
    }
  }

  void Choose(int64_t first, int64_t row0, std::span<const float> values,
              std::span<const float> importance) override {
    const int64_t n = info_.block, block = first / n;
    const int64_t count = static_cast<int64_t>(values.size()) / n;
    for (int64_t r = 0; r < count; ++r) {
      ChooseRow(row0 + r, block, values.subspan(static_cast<size_t>(r * n), static_cast<size_t>(n)),
                importance);
    }
  }

  void Round(int64_t col, int64_t row0, std::span<const float> in, std::span<float> out) override {
    const int64_t n = info_.block, element = col % n;
    for (size_t k = 0; k < in.size(); ++k) {
      const int64_t r = row0 + static_cast<int64_t>(k);
      const Grids& g = row_grids_[static_cast<size_t>(r)];
      const size_t at = static_cast<size_t>(g.index[static_cast<size_t>(element)]) * codes_;
      const float* v = g.values.data() + at;
      const float x = in[k];
      // The nearest value; on a tie the smaller one (the lower position).
      size_t i = static_cast<size_t>(std::lower_bound(v, v + codes_, x) - v);
      if (i == static_cast<size_t>(codes_) || (i > 0 && x - v[i - 1] <= v[i] - x)) --i;
      if (!(std::fabs(x) <= std::numeric_limits<float>::max())) i = 0;  // not reached: finite
      out[k] = v[i];
      chosen_[static_cast<size_t>(r * n + element)] = g.codes[at + i];
    }
    if (element == n - 1) {  // the block's last column: its codes into its bytes
      for (size_t k = 0; k < in.size(); ++k) {
        const int64_t r = row0 + static_cast<int64_t>(k);
        (void)ggml::SetCodes(info_.type, Block(r, col / n),
                             std::span<const uint8_t>(chosen_).subspan(static_cast<size_t>(r * n),
                                                                       static_cast<size_t>(n)));
      }
    }
  }

  std::span<const uint8_t> Bytes() const override { return bytes_; }

 private:
  // A row's current block: its distinct value sets (an element's values
  // over its codes, sorted, with the codes), and which one each element has.
  struct Grids {
    std::vector<float> values;
    std::vector<uint8_t> codes;
    std::vector<uint16_t> index;  // per element of the block
  };

  std::span<uint8_t> Block(int64_t row, int64_t block) {
    const int64_t at = row * ggml::RowBytes(info_, cols()) + block * info_.bytes;
    return std::span<uint8_t>(bytes_).subspan(static_cast<size_t>(at),
                                              static_cast<size_t>(info_.bytes));
  }

  void ChooseRow(int64_t r, int64_t index, std::span<const float> x,
                 std::span<const float> importance) {
    std::span<uint8_t> block = Block(r, index);
    // Encode's checks were made when the rounder was (sizes, finite input).
    (void)kernels::EncodeGgml(info_.type, x, block, nullptr, importance);
    // The block once per code c with every element's code c (its code bits
    // replaced by uniform_'s), decoded at once: all[c * n + e] is the value
    // code c gives element e.
    const int64_t n = info_.block, bytes = info_.bytes;
    thread_local std::vector<uint8_t> filled;
    thread_local std::vector<float> all;
    filled.resize(static_cast<size_t>(codes_ * bytes));
    all.resize(static_cast<size_t>(codes_ * n));
    const uint8_t* kept = block.data();
    const uint8_t* bits = code_bits_.data();
    for (int c = 0; c < codes_; ++c) {
      const uint8_t* code = uniform_.data() + c * bytes;
      uint8_t* out = filled.data() + c * bytes;
      for (int64_t i = 0; i < bytes; ++i) out[i] = (kept[i] & ~bits[i]) | code[i];
    }
    (void)ggml::Decode(info_.type, filled, all);
    Grids& g = row_grids_[static_cast<size_t>(r)];
    g.values.clear();
    g.codes.clear();
    g.index.assign(static_cast<size_t>(n), 0);
    thread_local std::vector<float> set;
    thread_local std::vector<int> order;
    set.resize(static_cast<size_t>(codes_));
    order.resize(static_cast<size_t>(codes_));
    for (int64_t e = 0; e < n; ++e) {
      // Elements of one group share their values: one set per group.
      bool same = e > 0;
      for (int c = 0; same && c < codes_; ++c) same = all[c * n + e] == all[c * n + e - 1];
      if (!same) {
        for (int c = 0; c < codes_; ++c) set[static_cast<size_t>(c)] = all[c * n + e];
        SortedCodes(set, order);
        for (int c : order) {
          g.values.push_back(set[static_cast<size_t>(c)]);
          g.codes.push_back(static_cast<uint8_t>(c));
        }
      }
      g.index[static_cast<size_t>(e)] = static_cast<uint16_t>(g.values.size() / codes_ - 1);
    }
  }

  // The codes in ascending order of their values, equal values in code
  // order (a stable sort, skipped for the usual grids: ascending, or
  // strictly descending as a negative scale gives).
  static void SortedCodes(std::span<const float> set, std::vector<int>& order) {
    std::iota(order.begin(), order.end(), 0);
    if (std::is_sorted(set.begin(), set.end())) return;
    if (std::adjacent_find(set.begin(), set.end(), std::less_equal<float>()) == set.end()) {
      std::reverse(order.begin(), order.end());
      return;
    }
    std::stable_sort(order.begin(), order.end(),
                     [&](int a, int b) { return set[static_cast<size_t>(a)] < set[static_cast<size_t>(b)]; });
  }

  const ggml::TypeInfo& info_;
  int codes_;
  std::vector<uint8_t> bytes_;
  std::vector<Grids> row_grids_;
  std::vector<uint8_t> chosen_;   // [rows, block]: the codes Round chose in the current block
  std::vector<uint8_t> uniform_;    // [codes, bytes]: a zero block with every element's code c
  std::vector<uint8_t> code_bits_;  // [bytes]: the bits that hold codes
};

}  // namespace

void BlockRounder::KeepParameters(bool offsets, float tensor_scale) {
  const size_t blocks = static_cast<size_t>((rows_ + block_rows_ - 1) / block_rows_ *
                                            ((cols_ + block_cols_ - 1) / block_cols_));
  parameters_.scales.assign(blocks, 0.0f);
  parameters_.offsets.assign(offsets ? blocks : 0, 0.0f);
  parameters_.tensor_scale = tensor_scale;
}

void BlockRounder::Record(int64_t first, int64_t row0, const StoredChunk& stored) {
  if (parameters_.scales.empty()) return;
  const int64_t per_row = (cols_ + block_cols_ - 1) / block_cols_;
  const int64_t block = first / block_cols_, row_block = row0 / block_rows_;
  for (size_t k = 0; k < stored.scales.size(); ++k) {
    const size_t at = static_cast<size_t>((row_block + static_cast<int64_t>(k)) * per_row + block);
    parameters_.scales[at] = stored.scales[k];
    if (!parameters_.offsets.empty()) parameters_.offsets[at] = stored.offsets[k];
  }
}

absl::StatusOr<std::unique_ptr<BlockRounder>> MakeGgmlRounder(ggml::Type type, int64_t rows,
                                                              int64_t cols) {
  const ggml::TypeInfo& info = ggml::Info(type);
  if (ggml::CodeCount(type) == 0 || !info.can_encode) {
    return absl::InvalidArgumentError(absl::StrCat(
        info.name, " does not choose its codes one element at a time: GPTQ cannot round it"));
  }
  if (rows < 1 || cols < 1 || cols % info.block != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        info.name, ": rows of ", cols, " elements are not whole blocks of ", info.block));
  }
  return std::make_unique<GgmlRounder>(info, rows, cols);
}

}  // namespace lowp
