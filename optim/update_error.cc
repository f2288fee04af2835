#include "optim/update_error.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"
#include "formats/option_error.h"
#include "kernels/thread_pool.h"
#include "optim/tensor_run.h"

namespace lowp {
namespace {

// Elements read at a time: 256 chunks (4 MiB of float32).
constexpr int64_t kReadBlock = 256 * internal::kChunkElements;

}  // namespace

absl::Status MeasureUpdates(const std::string& name, std::span<const float> values,
                            uint64_t tensor_index, const UpdateErrorOptions& options,
                            std::span<const TrainingRecipe> recipes,
                            std::span<UpdateReport> reports) {
  const ValueReader read = [values](int64_t first, std::span<float> out) {
    std::copy_n(values.begin() + first, out.size(), out.begin());
    return absl::OkStatus();
  };
  return MeasureUpdates(name, static_cast<int64_t>(values.size()), read, tensor_index, options,
                        recipes, reports);
}

absl::Status MeasureUpdates(const std::string& name, int64_t n, const ValueReader& read,
                            uint64_t tensor_index, const UpdateErrorOptions& o,
                            std::span<const TrainingRecipe> recipes,
                            std::span<UpdateReport> reports) {
  if (absl::Status s = ValidateUpdateError(o); !s.ok()) return s;
  const AdamWOptions& a = o.adamw;
  // First pass: the values' rms (the gradient's scale), and no NaN or Inf.
  std::vector<float> block;
  double sum_squares = 0;
  for (int64_t first = 0; first < n; first += kReadBlock) {
    block.resize(static_cast<size_t>(std::min(kReadBlock, n - first)));
    if (absl::Status s = read(first, block); !s.ok()) return s;
    for (size_t i = 0; i < block.size(); ++i) {
      if (!std::isfinite(block[i])) {
        return absl::InvalidArgumentError(absl::StrCat("tensor '", name,
                                                       "' has a non-finite value at element ",
                                                       first + static_cast<int64_t>(i)));
      }
      sum_squares += static_cast<double>(block[i]) * block[i];
    }
  }
  const double rms = n == 0 ? 0 : std::sqrt(sum_squares / static_cast<double>(n));
  internal::TensorRun run(o, recipes, n, tensor_index, rms);
  run.ScanGradientAmax();
  for (size_t r = 0; r < recipes.size(); ++r) {
    UpdateReport& rep = reports[r];
    rep = UpdateReport{};
    rep.tensor = name;
    rep.recipe = recipes[r].name;
    rep.bytes_per_parameter = recipes[r].BytesPerParameter();
    rep.steps = a.steps;
    rep.checkpoints = run.checkpoints();
    rep.error_squared.assign(rep.checkpoints.size(), 0.0);
    rep.movement_squared.assign(rep.checkpoints.size(), 0.0);
  }
  // Second pass, a block of the tensor at a time (memory stays bounded), its
  // chunks side by side; the chunks' sums are merged in order.
  constexpr int64_t kChunk = internal::kChunkElements;
  for (int64_t block_first = 0; block_first < n; block_first += kReadBlock) {
    block.resize(static_cast<size_t>(std::min(kReadBlock, n - block_first)));
    if (absl::Status s = read(block_first, block); !s.ok()) return s;
    const int64_t block_n = static_cast<int64_t>(block.size());
    const int64_t chunks = (block_n + kChunk - 1) / kChunk;
    std::vector<std::vector<UpdateReport>> parts(static_cast<size_t>(chunks));
    ParallelFor(static_cast<size_t>(chunks), o.threads, [&](size_t c) {
      const int64_t begin = static_cast<int64_t>(c) * kChunk;
      const int64_t len = std::min(block_n - begin, kChunk);
      run.Chunk(std::span<const float>(block).subspan(static_cast<size_t>(begin),
                                                      static_cast<size_t>(len)),
                block_first + begin, parts[c]);
    });
    for (size_t r = 0; r < recipes.size(); ++r) {
      for (const std::vector<UpdateReport>& part : parts) reports[r].Merge(part[r]);
    }
  }
  return absl::OkStatus();
}

}  // namespace lowp
