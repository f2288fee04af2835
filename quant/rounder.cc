// ggml's types as BlockRounders: each row's block is encoded by ggml's own
// quantizer (codecs/ggml.h, with the importance weights given) from the
// values Choose is handed; the values an element can then take are what
// ggml's decoder gives each of its codes (codecs/ggml_codes.cc sets them),
// and Round picks the nearest.
#include "quant/rounder.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <utility>

#include "absl/strings/str_cat.h"
#include "kernels/thread_pool.h"

namespace lowp {
namespace {

class GgmlRounder final : public BlockRounder {
 public:
  GgmlRounder(const ggml::TypeInfo& info, int64_t rows, int64_t cols, int threads)
      : BlockRounder(rows, cols, info.block),
        info_(info),
        codes_(ggml::CodeCount(info.type)),
        threads_(threads),
        bytes_(static_cast<size_t>(rows * ggml::RowBytes(info, cols))),
        row_grids_(static_cast<size_t>(rows)) {}

  void Choose(int64_t first, std::span<const float> values,
              std::span<const float> importance) override {
    first_ = first;
    ParallelFor(static_cast<size_t>(rows()), threads_, [&](size_t r) {
      ChooseRow(static_cast<int64_t>(r), values.subspan(r * info_.block, info_.block), importance);
    });
  }

  void Round(int64_t col, std::span<const float> in, std::span<float> out) override {
    const int64_t element = col - first_;
    for (int64_t r = 0; r < rows(); ++r) {
      const Grids& g = row_grids_[static_cast<size_t>(r)];
      const size_t at = static_cast<size_t>(g.index[static_cast<size_t>(element)]) * codes_;
      const float* v = g.values.data() + at;
      const float x = in[static_cast<size_t>(r)];
      // The nearest value; on a tie the smaller one (the lower position).
      size_t i = static_cast<size_t>(std::lower_bound(v, v + codes_, x) - v);
      if (i == static_cast<size_t>(codes_) || (i > 0 && x - v[i - 1] <= v[i] - x)) --i;
      if (!(std::fabs(x) <= std::numeric_limits<float>::max())) i = 0;  // not reached: finite
      out[static_cast<size_t>(r)] = v[i];
      (void)ggml::SetCode(info_.type, Block(r), static_cast<int>(element), g.codes[at + i]);
    }
  }

  std::span<const uint8_t> Bytes() const override { return bytes_; }

 private:
  // A row's current block: its distinct value sets (an element's values
  // over its codes, sorted, with the codes), and which one each element has.
  struct Grids {
    std::vector<float> values;
    std::vector<int> codes;
    std::vector<uint16_t> index;  // per element of the block
  };

  std::span<uint8_t> Block(int64_t row) {
    const int64_t block = first_ / info_.block;
    const int64_t at = row * ggml::RowBytes(info_, cols()) + block * info_.bytes;
    return std::span<uint8_t>(bytes_).subspan(static_cast<size_t>(at),
                                              static_cast<size_t>(info_.bytes));
  }

  void ChooseRow(int64_t r, std::span<const float> x, std::span<const float> importance) {
    std::span<uint8_t> block = Block(r);
    // Encode's checks were made when the rounder was (sizes, finite input).
    (void)ggml::Encode(info_.type, x, block, nullptr, importance);
    const int64_t n = info_.block;
    std::vector<float> all(static_cast<size_t>(codes_ * n));  // [code][element]
    std::vector<uint8_t> filled(block.begin(), block.end());
    for (int c = 0; c < codes_; ++c) {
      for (int64_t e = 0; e < n; ++e)
        (void)ggml::SetCode(info_.type, filled, static_cast<int>(e), c);
      (void)ggml::Decode(
          info_.type, filled,
          std::span<float>(all).subspan(static_cast<size_t>(c * n), static_cast<size_t>(n)));
    }
    Grids& g = row_grids_[static_cast<size_t>(r)];
    g.values.clear();
    g.codes.clear();
    g.index.assign(static_cast<size_t>(n), 0);
    std::vector<float> set(static_cast<size_t>(codes_));
    std::vector<float> last;
    std::vector<int> order(static_cast<size_t>(codes_));
    for (int64_t e = 0; e < n; ++e) {
      for (int c = 0; c < codes_; ++c)
        set[static_cast<size_t>(c)] = all[static_cast<size_t>(c * n + e)];
      if (set != last) {  // elements of one group share their values: one set per group
        last = set;
        std::iota(order.begin(), order.end(), 0);
        std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
          return set[static_cast<size_t>(a)] < set[static_cast<size_t>(b)];
        });
        for (int c : order) {
          g.values.push_back(set[static_cast<size_t>(c)]);
          g.codes.push_back(c);
        }
      }
      g.index[static_cast<size_t>(e)] = static_cast<uint16_t>(g.values.size() / codes_ - 1);
    }
  }

  const ggml::TypeInfo& info_;
  int codes_;
  int threads_;
  int64_t first_ = 0;
  std::vector<uint8_t> bytes_;
  std::vector<Grids> row_grids_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<BlockRounder>> MakeGgmlRounder(ggml::Type type, int64_t rows,
                                                              int64_t cols, int threads) {
  const ggml::TypeInfo& info = ggml::Info(type);
  if (ggml::CodeCount(type) == 0 || !info.can_encode) {
    return absl::InvalidArgumentError(absl::StrCat(
        info.name, " does not choose its codes one element at a time: GPTQ cannot round it"));
  }
  if (rows < 1 || cols < 1 || cols % info.block != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        info.name, ": rows of ", cols, " elements are not whole blocks of ", info.block));
  }
  return std::make_unique<GgmlRounder>(info, rows, cols, threads);
}

}  // namespace lowp
