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

using internal::Mix64;

}  // namespace

double GradientDraw(uint64_t seed, uint64_t tensor_index, uint64_t i, uint64_t t) {
  const uint64_t h = Mix64(Mix64(Mix64(seed ^ 0x6C6F7770ull) + tensor_index) ^ Mix64(i * 2 + 1) ^
                           (t * 0xD1B54A32D192ED03ull));
  const double sum = static_cast<double>(h & 0xFFFF) + static_cast<double>((h >> 16) & 0xFFFF) +
                     static_cast<double>((h >> 32) & 0xFFFF) + static_cast<double>(h >> 48);
  // Four uniforms on [0, 1): mean 2, variance 1/3.
  return (sum / 65536.0 - 2.0) * std::sqrt(3.0);
}

absl::Status ValidateUpdateError(const UpdateErrorOptions& o) {
  if (absl::Status s = ValidateAdamW(o.adamw); !s.ok()) return s;
  if (!std::isfinite(o.grad_scale) || o.grad_scale <= 0) {
    return OptionError("grad-scale", absl::StrCat("must be a positive number, not ", o.grad_scale));
  }
  if (!(o.grad_signal >= 0 && o.grad_signal <= 1)) {
    return OptionError("grad-signal", absl::StrCat("must be in [0, 1], not ", o.grad_signal));
  }
  if (o.threads < 0 || o.threads > 1024) {
    return OptionError("threads", absl::StrCat("must be 0 to 1024, not ", o.threads));
  }
  return absl::OkStatus();
}

void StateCensus::Merge(const StateCensus& o) {
  grad_underflow += o.grad_underflow;
  grad_overflow += o.grad_overflow;
  moment_underflow += o.moment_underflow;
  moment_overflow += o.moment_overflow;
}

std::vector<int64_t> UpdateCheckpoints(int64_t steps) {
  std::vector<int64_t> out;
  for (int64_t q = 1; q <= 4; ++q) {
    const int64_t t = (steps * q + 3) / 4;
    if (t >= 1 && (out.empty() || out.back() != t)) out.push_back(t);
  }
  return out;
}

double UpdateReport::updates_lost() const {
  return reference_moves == 0 ? 0
                              : static_cast<double>(lost) / static_cast<double>(reference_moves);
}
double UpdateReport::update_ratio() const {
  return intended_squared == 0 ? 1 : applied_dot_intended / intended_squared;
}
double UpdateReport::weight_relative_error(size_t k) const {
  if (k >= movement_squared.size() || movement_squared[k] == 0) return 0;
  return std::sqrt(error_squared[k] / movement_squared[k]);
}
double UpdateReport::m_relative_error() const {
  return m_squared == 0 ? 0 : std::sqrt(m_error_squared / m_squared);
}
double UpdateReport::v_relative_error() const {
  return v_squared == 0 ? 0 : std::sqrt(v_error_squared / v_squared);
}

void UpdateReport::Merge(const UpdateReport& o) {
  elements += o.elements;
  reference_moves += o.reference_moves;
  lost += o.lost;
  applied_dot_intended += o.applied_dot_intended;
  intended_squared += o.intended_squared;
  if (error_squared.size() < o.error_squared.size()) {
    error_squared.resize(o.error_squared.size());
    movement_squared.resize(o.movement_squared.size());
    checkpoints = o.checkpoints;
  }
  for (size_t k = 0; k < o.error_squared.size(); ++k) {
    error_squared[k] += o.error_squared[k];
    movement_squared[k] += o.movement_squared[k];
  }
  m_error_squared += o.m_error_squared;
  m_squared += o.m_squared;
  v_error_squared += o.v_error_squared;
  v_squared += o.v_squared;
  census.Merge(o.census);
}

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
  const int64_t T = a.steps;
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
