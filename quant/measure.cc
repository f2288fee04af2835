// The streaming driver: batches of at most kBatchElements, each split into
// chunks of whole rows that threads take in turn; per-chunk results are kept
// in chunk order and merged in that order, so no result depends on threads.
#include "quant/measure.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <numeric>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "kernels/thread_pool.h"
#include "quant/recipe.h"

namespace lowp {
namespace {

// A chunk fits in L2 with its output (2 x 128 KiB); a batch bounds memory.
constexpr int64_t kChunkElements = int64_t{1} << 15;
constexpr int64_t kBatchElements = int64_t{1} << 22;

struct ChunkResult {
  ErrorStats stats;
  SchemeCounts counts;
  double weighted_squared_error = 0, weighted_squared_input = 0;
  TensorContext context;
  std::map<int, uint64_t> histogram;
};

// Adds sum w e^2 and sum w x^2 of a chunk of whole rows (the row of element
// 0 is `first_row`) to `r`, w the row's importance weights.
void AddWeighted(std::span<const float> x, std::span<const float> q, int64_t cols,
                 int64_t first_row, const TensorContext& context, ChunkResult& r) {
  const int64_t rows = static_cast<int64_t>(x.size()) / cols;
  for (int64_t row = 0; row < rows; ++row) {
    const std::span<const float> w = context.ImportanceOfRow(first_row + row, cols);
    if (w.empty()) continue;
    for (int64_t c = 0; c < cols; ++c) {
      const size_t i = static_cast<size_t>(row * cols + c);
      if (!std::isfinite(x[i]) || !std::isfinite(q[i])) continue;
      const double e = static_cast<double>(q[i]) - x[i];
      r.weighted_squared_error += w[c] * e * e;
      r.weighted_squared_input += w[c] * static_cast<double>(x[i]) * x[i];
    }
  }
}

void AddHistogram(std::span<const float> x, std::span<const float> q,
                  std::map<int, uint64_t>& histogram) {
  for (size_t i = 0; i < x.size(); ++i) {
    if (!std::isfinite(x[i]) || !std::isfinite(q[i])) continue;
    const double e = std::fabs(static_cast<double>(q[i]) - x[i]);
    const int key = e == 0 ? INT_MIN : std::clamp(std::ilogb(e), -64, 16);
    ++histogram[key];
  }
}

// One tensor through any number of schemes in one read: each chunk of rows
// is read (converted to float32) once and handed to every scheme while it is
// in cache. Per scheme the chunk results are merged in chunk order.
class Driver {
 public:
  // `tensor` may be rows [row_offset, ...) of a larger tensor (a window):
  // stochastic rounding then draws by the element's index in the whole.
  Driver(const TensorView& tensor, std::span<const Scheme* const> schemes,
         const MeasureOptions& options, int64_t row_offset = 0)
      : tensor_(tensor),
        schemes_(schemes),
        options_(options),
        cols_(std::max<int64_t>(1, tensor.cols())),
        row_offset_(row_offset) {
    // A multiple of every scheme's ChunkRows (all 1 but NF4 double quant's).
    int64_t align = 1;
    for (const Scheme* scheme : schemes) {
      align = std::lcm(align, std::max<int64_t>(1, scheme->ChunkRows(cols_)));
      tensor_pass_ = tensor_pass_ || scheme->NeedsTensorPass();
    }
    int64_t rows = std::max<int64_t>(1, kChunkElements / cols_);
    chunk_rows_ = (rows + align - 1) / align * align;
    batch_chunks_ = std::max<int64_t>(1, kBatchElements / (chunk_rows_ * cols_));
    compare_.relative_floor = options.relative_floor;
  }

  int64_t chunk_rows() const { return chunk_rows_; }

  // The tensor pass alone: the merged context of schemes_[s] in contexts[s];
  // with `release`, each batch's bytes are handed to options_.release (no
  // quantizing pass follows to read them again).
  absl::Status Observe(std::span<TensorContext> contexts, bool release = false) {
    const size_t n_schemes = schemes_.size();
    const int64_t rows = tensor_.rows(), total_chunks = (rows + chunk_rows_ - 1) / chunk_rows_;
    const int threads = ResolveThreads(options_.threads);
    for (int64_t first = 0; first < total_chunks; first += batch_chunks_) {
      const int64_t count = std::min(batch_chunks_, total_chunks - first);
      std::vector<ChunkResult> results(static_cast<size_t>(count) * n_schemes);
      std::vector<absl::Status> status(static_cast<size_t>(count));
      ParallelFor(static_cast<size_t>(count), threads, [&](size_t index) {
        const int64_t i = static_cast<int64_t>(index);
        thread_local std::vector<float> buffer;
        std::span<const float> in;
        status[index] = Read(first + i, buffer, in);
        if (!status[index].ok()) return;
        for (size_t s = 0; s < n_schemes; ++s) {
          if (schemes_[s]->NeedsTensorPass()) {
            schemes_[s]->Observe(in, cols_, results[index * n_schemes + s].context);
          }
        }
      });
      for (size_t c = 0; c < status.size(); ++c) {
        if (!status[c].ok()) return status[c];
        for (size_t s = 0; s < n_schemes; ++s) {
          contexts[s].Merge(results[c * n_schemes + s].context);
        }
      }
      // Otherwise no Release: the quantizing pass reads these pages again,
      // from the page cache rather than from storage.
      if (release) Release(first, count);
    }
    return absl::OkStatus();
  }

  // Runs the tensor pass (when a scheme needs one and `given` holds no
  // contexts) and then the quantizing pass, merging each chunk's statistics
  // into reports[s] for schemes_[s] in chunk order and handing each batch's
  // output to sink (if any, for a single scheme) in order.
  absl::Status Run(const std::function<absl::Status(std::span<const float>)>* sink,
                   std::span<QuantReport> reports, std::span<const TensorContext> given = {},
                   const StoredSink* stored_sink = nullptr) {
    const size_t n_schemes = schemes_.size();
    const int64_t rows = tensor_.rows(), total_chunks = (rows + chunk_rows_ - 1) / chunk_rows_;
    const int threads = ResolveThreads(options_.threads);
    std::vector<TensorContext> contexts(given.begin(), given.end());
    if (contexts.empty()) {
      contexts.resize(n_schemes);
      if (tensor_pass_) {
        if (absl::Status s = Observe(contexts); !s.ok()) return s;
      }
      if (absl::Status s = FillImportance(contexts); !s.ok()) return s;
    }
    for (size_t s = 0; s < n_schemes; ++s) {
      if (absl::Status st = CheckImportance(*schemes_[s], tensor_, contexts[s]); !st.ok()) {
        return st;
      }
    }
    std::vector<float> batch_out;
    std::vector<StoredChunk> chunk_stored;
    for (int64_t first = 0; first < total_chunks; first += batch_chunks_) {
      const int64_t count = std::min(batch_chunks_, total_chunks - first);
      if (stored_sink != nullptr) chunk_stored.assign(static_cast<size_t>(count), {});
      std::vector<ChunkResult> results(static_cast<size_t>(count) * n_schemes);
      std::vector<absl::Status> status(static_cast<size_t>(count));
      if (sink != nullptr) batch_out.resize(Elements(first, count));
      ParallelFor(static_cast<size_t>(count), threads, [&](size_t index) {
        const int64_t i = static_cast<int64_t>(index);
        thread_local std::vector<float> buffer, out;
        std::span<const float> in;
        status[index] = Read(first + i, buffer, in);
        if (!status[index].ok()) return;
        // A finite F64 input beyond float32's range read as inf: it is no
        // inf input but one no scheme can hold, an overflow.
        const uint64_t beyond = BeyondFloat32(first + i);
        for (size_t s = 0; s < n_schemes; ++s) {
          ChunkResult& r = results[index * n_schemes + s];
          std::span<float> dst;
          if (sink != nullptr) {
            dst = std::span<float>(batch_out).subspan(Elements(first, i), in.size());
          } else {
            out.resize(in.size());
            dst = out;
          }
          TensorContext chunk_context = contexts[s];
          chunk_context.first_element = (row_offset_ + (first + i) * chunk_rows_) * cols_;
          if (stored_sink != nullptr) {
            StoredChunk& stored = chunk_stored[index];
            schemes_[s]->Apply(in, cols_, chunk_context, dst, r.counts, &stored);
            stored.codes = {};  // they follow from the values
          } else {
            schemes_[s]->Apply(in, cols_, chunk_context, dst, r.counts);
          }
          ComparePairs(in, dst, compare_, r.stats);
          if (chunk_context.importance != nullptr) {
            AddWeighted(in, dst, cols_, chunk_context.first_element / cols_, chunk_context, r);
          }
          r.stats.inf_inputs -= beyond;
          r.stats.nonfinite_outputs += beyond;
          if (options_.histogram) AddHistogram(in, dst, r.histogram);
        }
      });
      for (size_t c = 0; c < status.size(); ++c) {
        if (!status[c].ok()) return status[c];
        for (size_t s = 0; s < n_schemes; ++s) {
          const ChunkResult& r = results[c * n_schemes + s];
          reports[s].stats.Merge(r.stats);
          reports[s].counts.Add(r.counts);
          if (contexts[s].importance != nullptr) {
            reports[s].weighted = true;
            reports[s].weighted_squared_error += r.weighted_squared_error;
            reports[s].weighted_squared_input += r.weighted_squared_input;
          }
          for (const auto& [key, n] : r.histogram) reports[s].histogram[key] += n;
        }
      }
      Release(first, count);
      if (sink != nullptr) {
        if (absl::Status s = (*sink)(batch_out); !s.ok()) return s;
      }
      for (StoredChunk& stored : chunk_stored) {
        if (absl::Status s = (*stored_sink)(stored); !s.ok()) return s;
      }
    }
    return absl::OkStatus();
  }

  // Each context's importance weights for the tensor, when options_ has some.
  absl::Status FillImportance(std::span<TensorContext> contexts) const {
    if (options_.importance == nullptr) return absl::OkStatus();
    for (TensorContext& context : contexts) {
      if (absl::Status s = options_.importance->Fill(tensor_, context); !s.ok()) return s;
    }
    return absl::OkStatus();
  }

 private:
  // Elements in chunks [first, first + count), the last one possibly short:
  // also the offset of chunk first + count within a batch starting at first.
  int64_t Elements(int64_t first, int64_t count) const {
    const int64_t end_row = std::min(tensor_.rows(), (first + count) * chunk_rows_);
    return (end_row - first * chunk_rows_) * cols_;
  }

  // Hands the bytes of chunks [first, first + count) to options_.release.
  void Release(int64_t first, int64_t count) const {
    if (!options_.release) return;
    options_.release(ElementBytes(tensor_, first * chunk_rows_ * cols_, Elements(first, count)));
  }

  // F64 elements of the chunk that are finite but beyond float32's range.
  uint64_t BeyondFloat32(int64_t chunk) const {
    if (tensor_.dtype != DType::kF64) return 0;
    const int64_t first_row = chunk * chunk_rows_;
    const int64_t rows = std::min(chunk_rows_, tensor_.rows() - first_row);
    const size_t first = static_cast<size_t>(first_row * cols_),
                 n = static_cast<size_t>(rows * cols_);
    uint64_t count = 0;
    for (size_t i = first; i < first + n; ++i) {
      double v;
      std::memcpy(&v, tensor_.bytes.data() + i * sizeof(double), sizeof(double));
      count += std::isfinite(v) && std::isinf(static_cast<float>(v));
    }
    return count;
  }

  // Points `in` at the chunk's elements as float32: in place for an aligned
  // F32 tensor, else converted into `buffer`.
  absl::Status Read(int64_t chunk, std::vector<float>& buffer, std::span<const float>& in) const {
    const int64_t first_row = chunk * chunk_rows_;
    const int64_t rows = std::min(chunk_rows_, tensor_.rows() - first_row);
    const size_t first = static_cast<size_t>(first_row * cols_),
                 n = static_cast<size_t>(rows * cols_);
    const uint8_t* data = tensor_.bytes.data();
    if (tensor_.dtype == DType::kF32 && reinterpret_cast<uintptr_t>(data) % alignof(float) == 0 &&
        tensor_.bytes.size() >= (first + n) * sizeof(float)) {
      in = std::span<const float>(reinterpret_cast<const float*>(data) + first, n);
      return absl::OkStatus();
    }
    buffer.resize(n);
    in = buffer;
    return ReadAsFloat32(tensor_, static_cast<int64_t>(first), buffer);
  }

  const TensorView& tensor_;
  std::span<const Scheme* const> schemes_;
  const MeasureOptions& options_;
  int64_t cols_;
  int64_t row_offset_;
  bool tensor_pass_ = false;
  int64_t chunk_rows_;
  int64_t batch_chunks_;
  CompareOptions compare_;
};

// Measures every scheme of `schemes` on `tensor` in one read, into
// reports[s] (same size).
absl::Status Measure(const TensorView& tensor, std::span<const Scheme* const> schemes,
                     const MeasureOptions& options,
                     const std::function<absl::Status(std::span<const float>)>* sink,
                     std::span<QuantReport> reports, const StoredSink* stored = nullptr) {
  for (size_t s = 0; s < schemes.size(); ++s) {
    QuantReport& report = reports[s];
    report = QuantReport{};
    report.tensor = tensor.name;
    report.scheme = schemes[s]->name();
    if (std::string applied = schemes[s]->AppliedName(tensor.cols());
        applied != schemes[s]->name()) {
      report.applied = std::move(applied);
    }
    report.dtype = tensor.type_name();
    report.shape = tensor.shape;
  }
  if (!IsFloating(tensor.dtype)) {
    return absl::InvalidArgumentError(absl::StrCat("tensor '", tensor.name, "' in ", tensor.file,
                                                   " is ", DTypeName(tensor.dtype),
                                                   ", not a floating type"));
  }
  // An empty tensor stores nothing (its rows times a scale would count
  // bits for no weight; its leading dimensions may multiply past 2^64).
  if (tensor.elements() == 0) return absl::OkStatus();
  for (size_t s = 0; s < schemes.size(); ++s) {
    reports[s].elements = static_cast<uint64_t>(tensor.elements());
    reports[s].storage_bits =
        schemes[s]->StorageBits(tensor.rows(), std::max<int64_t>(1, tensor.cols()));
  }
  Driver driver(tensor, schemes, options);
  absl::Status status = driver.Run(sink, reports, {}, stored);
  if (!status.ok()) {
    return absl::Status(status.code(), absl::StrCat("tensor '", tensor.name, "' in ", tensor.file,
                                                    ": ", status.message()));
  }
  return status;
}

}  // namespace

double QuantReport::bits_per_weight() const {
  return elements == 0 ? 0 : static_cast<double>(storage_bits) / static_cast<double>(elements);
}

// One rule for every error metric (plan's columns included): a finite input
// turned into inf or NaN makes the error infinite (similarities unknown);
// with nothing measured (every input NaN or inf, or no elements) the error
// is unknown, NaN; never a perfect score.
namespace {
constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kUnknown = std::numeric_limits<double>::quiet_NaN();
}  // namespace

bool QuantReport::overflowed() const { return stats.nonfinite_outputs > 0; }

// An error metric under that rule: `value` when something was measured and
// nothing overflowed.
double QuantReport::Error(double value) const {
  if (overflowed()) return kInf;
  return stats.measured == 0 ? kUnknown : value;
}

double QuantReport::mse() const {
  const uint64_t n = stats.measured;
  return Error(n == 0 ? 0 : stats.sum_squared_error / static_cast<double>(n));
}

double QuantReport::rmse() const { return std::sqrt(mse()); }

double QuantReport::sqnr_db() const {
  if (overflowed()) return -kInf;
  if (stats.measured == 0) return kUnknown;
  if (stats.sum_squared_error == 0) return kInf;
  return 10 * std::log10(stats.sum_squared_input / stats.sum_squared_error);
}

double QuantReport::max_abs_error() const { return Error(stats.max_abs_error); }

double QuantReport::mean_abs_error() const {
  const uint64_t n = stats.measured;
  return Error(n == 0 ? 0 : stats.sum_abs_error / static_cast<double>(n));
}

double QuantReport::max_relative_error() const { return Error(stats.max_relative_error); }

double QuantReport::mean_relative_error() const {
  const uint64_t n = stats.relative_count;
  return Error(n == 0 ? 0 : stats.sum_relative_error / static_cast<double>(n));
}

double QuantReport::rms_relative_error() const {
  const uint64_t n = stats.relative_count;
  return Error(n == 0 ? 0 : std::sqrt(stats.sum_squared_relative_error / static_cast<double>(n)));
}

double QuantReport::weighted_relative_rmse() const {
  if (!weighted) return kUnknown;
  if (weighted_squared_error == 0) return Error(0);
  return Error(std::sqrt(weighted_squared_error / weighted_squared_input));
}

double QuantReport::relative_rmse() const {
  return Error(stats.sum_squared_error == 0
                   ? 0
                   : std::sqrt(stats.sum_squared_error / stats.sum_squared_input));
}

double QuantReport::cosine() const {
  if (overflowed() || stats.measured == 0) return kUnknown;
  const double norms = stats.sum_squared_input * stats.sum_squared_output;
  if (norms == 0) return stats.sum_squared_input == stats.sum_squared_output ? 1 : 0;
  return stats.sum_product / std::sqrt(norms);
}

void QuantReport::Add(const QuantReport& other) {
  elements += other.elements;
  storage_bits += other.storage_bits;
  stats.Merge(other.stats);
  counts.Add(other.counts);
  for (const auto& [key, n] : other.histogram) histogram[key] += n;
  if (other.weighted) {
    weighted = true;
    weighted_squared_error += other.weighted_squared_error;
    weighted_squared_input += other.weighted_squared_input;
  }
}

absl::StatusOr<QuantReport> CompareTensors(const TensorView& original, const TensorView& stored,
                                           const MeasureOptions& options,
                                           std::span<const int64_t> row_of) {
  const auto fail = [&](absl::string_view why) {
    return absl::InvalidArgumentError(absl::StrCat("tensor '", stored.name, "' of ", stored.file,
                                                   " against '", original.name, "' of ",
                                                   original.file, ": ", why));
  };
  if (!IsFloating(original.dtype) || !IsFloating(stored.dtype)) {
    return fail(absl::StrCat("types ", original.type_name(), " and ", stored.type_name(),
                             " are not both floating"));
  }
  if (original.shape != stored.shape) {
    return fail(absl::StrCat("shapes [", absl::StrJoin(original.shape, ", "), "] and [",
                             absl::StrJoin(stored.shape, ", "), "] differ"));
  }
  const int64_t rows = stored.rows(), cols = stored.cols();
  if (!row_of.empty() && static_cast<int64_t>(row_of.size()) != rows) {
    return fail("the row order does not cover the rows");
  }
  QuantReport report;
  report.tensor = stored.name;
  report.scheme = stored.type_name();
  report.dtype = original.type_name();
  report.shape = stored.shape;
  report.elements = static_cast<uint64_t>(stored.elements());
  report.storage_bits = stored.stored_bytes() * 8;
  CompareOptions compare;
  compare.relative_floor = options.relative_floor;
  // Whole rows at a time, about kBatchElements per step.
  const int64_t step = cols > 0 ? std::max<int64_t>(1, kBatchElements / cols) : rows;
  std::vector<float> x, q;
  for (int64_t first = 0; first < rows && cols > 0; first += step) {
    const int64_t n = std::min(step, rows - first);
    x.resize(static_cast<size_t>(n * cols));
    q.resize(x.size());
    if (absl::Status s = ReadAsFloat32(stored, first * cols, q); !s.ok()) return s;
    for (int64_t r = 0; r < n; ++r) {
      const int64_t source = row_of.empty() ? first + r : row_of[static_cast<size_t>(first + r)];
      if (absl::Status s = ReadAsFloat32(original, source * cols,
                                         std::span<float>(x).subspan(static_cast<size_t>(r * cols),
                                                                     static_cast<size_t>(cols)));
          !s.ok()) {
        return s;
      }
    }
    for (size_t i = 0; i < x.size(); ++i) report.stats.Observe(x[i], q[i], compare);
    if (options.histogram) AddHistogram(x, q, report.histogram);
    if (options.release) {
      options.release(ElementBytes(stored, first * cols, n * cols));
      if (row_of.empty()) options.release(ElementBytes(original, first * cols, n * cols));
    }
  }
  return report;
}

absl::StatusOr<QuantReport> MeasureTensor(const TensorView& tensor, const Scheme& scheme,
                                          const MeasureOptions& options) {
  QuantReport report;
  const Scheme* one[] = {&scheme};
  if (absl::Status s = Measure(tensor, one, options, nullptr, {&report, 1}); !s.ok()) return s;
  return report;
}

absl::Status QuantizeTensor(const TensorView& tensor, const Scheme& scheme,
                            const MeasureOptions& options,
                            const std::function<absl::Status(std::span<const float>)>& sink,
                            QuantReport* report, const ByteSink* bytes) {
  QuantReport local;
  const Scheme* one[] = {&scheme};
  if (bytes == nullptr) {
    return Measure(tensor, one, options, &sink, {report != nullptr ? report : &local, 1});
  }
  if (scheme.GgmlLayout(tensor.cols()) == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat("tensor '", tensor.name, "': ", scheme.name(),
                                                   " has no llama.cpp layout to store"));
  }
  const StoredSink to_bytes = [bytes](StoredChunk& stored) { return (*bytes)(stored.bytes); };
  return Measure(tensor, one, options, &sink, {report != nullptr ? report : &local, 1}, &to_bytes);
}

absl::Status QuantizeTensor(const TensorView& tensor, const Scheme& scheme,
                            const MeasureOptions& options,
                            const std::function<absl::Status(std::span<const float>)>& sink,
                            QuantReport* report, const StoredSink& stored) {
  QuantReport local;
  const Scheme* one[] = {&scheme};
  return Measure(tensor, one, options, &sink, {report != nullptr ? report : &local, 1}, &stored);
}

QuantReport StartReport(const TensorView& tensor, const Scheme& scheme) {
  QuantReport report;
  report.tensor = tensor.name;
  report.scheme = scheme.name();
  if (std::string applied = scheme.AppliedName(tensor.cols()); applied != scheme.name()) {
    report.applied = std::move(applied);
  }
  report.dtype = tensor.type_name();
  report.shape = tensor.shape;
  if (tensor.elements() > 0) {
    report.elements = static_cast<uint64_t>(tensor.elements());
    report.storage_bits = scheme.StorageBits(tensor.rows(), std::max<int64_t>(1, tensor.cols()));
  }
  return report;
}

int64_t QuantizeWindowRows(int64_t cols, const Scheme& scheme) {
  TensorView shape;
  shape.shape = {1, std::max<int64_t>(1, cols)};
  const Scheme* one[] = {&scheme};
  const MeasureOptions options;
  return Driver(shape, one, options).chunk_rows();
}

absl::StatusOr<TensorContext> ObserveTensor(const TensorView& tensor, const Scheme& scheme,
                                            const MeasureOptions& options) {
  TensorContext context;
  if (tensor.elements() == 0) return context;
  const Scheme* one[] = {&scheme};
  Driver driver(tensor, one, options);
  absl::Status s;
  if (scheme.NeedsTensorPass()) s = driver.Observe({&context, 1}, /*release=*/true);
  if (s.ok()) s = driver.FillImportance({&context, 1});
  if (s.ok()) s = CheckImportance(scheme, tensor, context);
  if (!s.ok()) {
    return absl::Status(
        s.code(), absl::StrCat("tensor '", tensor.name, "' in ", tensor.file, ": ", s.message()));
  }
  return context;
}

absl::Status QuantizeWindow(const TensorView& window, int64_t first_row, const Scheme& scheme,
                            const TensorContext& context, const MeasureOptions& options,
                            std::span<float> out, QuantReport* report) {
  if (!IsFloating(window.dtype) || static_cast<int64_t>(out.size()) != window.elements()) {
    return absl::InvalidArgumentError(absl::StrCat("tensor '", window.name, "': a window of ",
                                                   window.elements(), " values into ", out.size()));
  }
  if (window.elements() == 0) return absl::OkStatus();
  const Scheme* one[] = {&scheme};
  QuantReport local;
  size_t written = 0;
  const std::function<absl::Status(std::span<const float>)> sink =
      [&](std::span<const float> piece) {
        std::copy(piece.begin(), piece.end(), out.begin() + static_cast<ptrdiff_t>(written));
        written += piece.size();
        return absl::OkStatus();
      };
  Driver driver(window, one, options, first_row);
  return driver.Run(&sink, {report != nullptr ? report : &local, 1}, {&context, 1});
}

absl::StatusOr<SetReports> MeasureTensors(
    const TensorSet& set, std::span<const TensorView* const> tensors,
    std::span<const std::unique_ptr<Scheme>> schemes, const MeasureOptions& options,
    const std::function<void(size_t, const std::string&)>& progress, bool keep_results) {
  MeasureOptions measure = options;
  measure.release = [&set](std::span<const uint8_t> bytes) { set.Release(bytes); };
  RecipeModel model = RecipeModel::Of(set.tensors());
  model.has_imatrix = options.importance != nullptr;
  SetReports r;
  for (const auto& scheme : schemes) {
    QuantReport all;
    all.tensor = "(all)";
    all.scheme = scheme->name();
    r.aggregates.push_back(std::move(all));
  }
  for (const TensorView* tensor : tensors) {
    if (progress) progress(tensors.size(), tensor->name);
    if (!IsFloating(tensor->dtype)) {
      r.skipped.push_back(tensor->name);
      continue;
    }
    // Every scheme in one read of the tensor.
    std::vector<RecipeChoice> choices(schemes.size());
    std::vector<const Scheme*> applied(schemes.size());
    for (size_t s = 0; s < schemes.size(); ++s) {
      applied[s] = &SchemeForTensor(*schemes[s], *tensor, model, &choices[s]);
      if (absl::Status st = CheckImatrixRequirement(*schemes[s], choices[s], tensor->name,
                                                    options.importance != nullptr);
          !st.ok()) {
        return st;
      }
    }
    std::vector<QuantReport> reports(schemes.size());
    if (absl::Status s = Measure(*tensor, applied, measure, nullptr, reports); !s.ok()) return s;
    for (size_t s = 0; s < schemes.size(); ++s) {
      NameForRecipe(*schemes[s], choices[s], reports[s]);
      r.aggregates[s].Add(reports[s]);
      if (keep_results) r.results.push_back(std::move(reports[s]));
    }
    if (absl::Status s = set.CheckIntact(); !s.ok()) return s;
    set.Release(*tensor);
  }
  return r;
}

}  // namespace lowp
