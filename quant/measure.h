// What a scheme does to a tensor, measured in one streaming pass: the tensor
// is read in chunks of whole rows, each chunk quantized, dequantized and
// compared with the original by the SIMD kernels, the sums kept in double.
// Memory stays bounded (a few MiB per thread) whatever the tensor's size.
//
// Metric definitions (x the input, q its dequantized value, e = q - x; sums
// over the `measured` elements, where x and q are both finite):
//   mse              sum e^2 / measured;  rmse = sqrt(mse)
//   sqnr_db          10 log10(sum x^2 / sum e^2) = 20 log10(||x|| / ||x - q||), as
//                    torchao's compute_error; +inf when e = 0 everywhere
//   max_abs_error    max |e|;  mean_abs_error = sum |e| / measured
//   relative errors  |e| / |x| over the measured elements with |x| >= floor
//                    (relative_floor): max, mean and root mean square
//   cosine           sum x q / sqrt(sum x^2 sum q^2) (1 when both are all zero)
//   counts           nan_inputs, inf_inputs (reported, excluded); overflow (x
//                    finite, q not: a cast's overflow to inf or NaN); clipped
//                    (clamped by the scheme, see SchemeCounts); zeroed (x != 0,
//                    q == 0); subnormal (stored as a subnormal code)
//   bits_per_weight  the scheme's storage of this tensor's shape / elements
//   weighted_relative_rmse  with an importance matrix (w the column's weight):
//                    sqrt(sum w e^2 / sum w x^2), the relative error of the
//                    layer's output the imatrix predicts when its input
//                    columns are uncorrelated (what llama.cpp's weighted
//                    searches minimize)
#ifndef LOWP_QUANT_MEASURE_H_
#define LOWP_QUANT_MEASURE_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "io/tensor.h"
#include "io/tensor_set.h"
#include "kernels/quantize.h"
#include "quant/importance.h"
#include "quant/scheme.h"

namespace lowp {

struct MeasureOptions {
  // Importance weights by tensor (an imatrix): each tensor's entry goes to
  // the schemes (TensorContext::importance) and the importance-weighted
  // error is reported. A scheme that needs weights (iq2_xxs, ...) is refused
  // for a tensor without an entry.
  std::shared_ptr<const ImportanceMap> importance;
  // Relative errors are taken over |x| >= this.
  float relative_floor = 1e-3f;
  // Threads per tensor; 0 takes every CPU the process may run on
  // (AvailableCpus, kernels/thread_pool.h). Results never depend
  // on it (chunk results are merged in order).
  int threads = 0;
  // Histogram of |e| by binade (see QuantReport::histogram).
  bool histogram = false;
  // Called with the tensor bytes of each batch (at most 2^22 elements) once
  // they have been read, e.g. TensorSet::Release, so that the pages of a
  // memory-mapped tensor larger than RAM do not accumulate.
  std::function<void(std::span<const uint8_t>)> release;
};

struct QuantReport {
  std::string tensor;  // "(all)" for an aggregate
  std::string scheme;
  // What the scheme stored this tensor as when that is not `scheme`
  // (llama.cpp's fallback for a row 256 does not divide: "q5_0"); else empty.
  std::string applied;
  std::string applied_reason;  // for a recipe's choice: why, in llama.cpp's terms
  std::string dtype;           // of the input tensor ("q4_K" for a GGUF tensor of that type)
  std::vector<int64_t> shape;
  uint64_t elements = 0;
  uint64_t storage_bits = 0;
  ErrorStats stats;
  SchemeCounts counts;
  // With importance weights: sum w e^2 and sum w x^2 over the measured
  // elements (weighted is false without them).
  bool weighted = false;
  double weighted_squared_error = 0;
  double weighted_squared_input = 0;
  // Measured elements by floor(log2 |e|), clamped to [-64, 16]; key
  // INT32_MIN counts the exact ones (e = 0). Empty unless asked for.
  std::map<int, uint64_t> histogram;

  double bits_per_weight() const;
  double storage_bytes() const { return static_cast<double>(storage_bits) / 8; }
  // The metrics. A finite input that the scheme turned into inf or NaN
  // (overflowed()) makes every error +inf, sqnr_db -inf and the cosine
  // unknown (NaN); with nothing measured (no elements, or every input NaN or
  // inf) every metric is unknown (NaN): never a perfect score.
  bool overflowed() const;
  double mse() const;
  double rmse() const;
  double sqnr_db() const;
  double mean_abs_error() const;
  double max_abs_error() const;
  double max_relative_error() const;
  double mean_relative_error() const;
  double rms_relative_error() const;
  double relative_rmse() const;  // ||q - x|| / ||x||
  double cosine() const;
  // sqrt(weighted_squared_error / weighted_squared_input); NaN without
  // importance weights (and under Error's rule).
  double weighted_relative_rmse() const;

  // `value` unless overflowed() (+inf) or nothing was measured (NaN).
  double Error(double value) const;

  // Adds another tensor's report (for the aggregate over a set; the sums and
  // counts add, so every metric is weighted by element count).
  void Add(const QuantReport& other);
};

// Measures `scheme` on a floating tensor. InvalidArgument naming the tensor
// for a non-floating dtype.
absl::StatusOr<QuantReport> MeasureTensor(const TensorView& tensor, const Scheme& scheme,
                                          const MeasureOptions& options = {});

// The error of a tensor as a file stores it (`stored`: GGUF blocks decoded as
// ggml does, F16, ...) against the original it was made from: stored's
// values are the reconstruction of original's, element by element, rows
// taken in the order `row_of` gives (stored row r is compared with original
// row row_of[r]; empty: the same order). The report's scheme is stored's type
// name and its storage stored's bytes. InvalidArgument naming both when the
// shapes differ or either is not floating.
absl::StatusOr<QuantReport> CompareTensors(const TensorView& original, const TensorView& stored,
                                           const MeasureOptions& options,
                                           std::span<const int64_t> row_of = {});

// Quantizes a floating tensor and hands its dequantized values to `sink` in
// order, in pieces (a few MiB each); also fills `report`, as MeasureTensor.
// With `bytes`, the stored bytes too (ggml's blocks row after row, in
// pieces of whole rows, in order), for a scheme with a llama.cpp layout
// (Scheme::GgmlLayout; InvalidArgument naming the tensor for another). The
// first error from a sink stops the run and is returned.
using ByteSink = std::function<absl::Status(std::span<const uint8_t>)>;
absl::Status QuantizeTensor(const TensorView& tensor, const Scheme& scheme,
                            const MeasureOptions& options,
                            const std::function<absl::Status(std::span<const float>)>& sink,
                            QuantReport* report, const ByteSink* bytes = nullptr);
// The same with the stored form of each chunk of rows (Scheme::Apply's,
// codes left out: they follow from the values) handed to `stored`, chunk by
// chunk in order (a chunk's tensor_scale is the tensor's).
using StoredSink = std::function<absl::Status(StoredChunk&)>;
absl::Status QuantizeTensor(const TensorView& tensor, const Scheme& scheme,
                            const MeasureOptions& options,
                            const std::function<absl::Status(std::span<const float>)>& sink,
                            QuantReport* report, const StoredSink& stored);

// Quantizing a tensor in windows of rows (the evaluator's lm_head, a chunk
// of the vocabulary at a time, and embedding rows by token):
//   StartReport    the report of `scheme` on `tensor` before any element:
//                  its name, shape, elements and storage
//   ObserveTensor  the tensor-wide context a scheme that NeedsTensorPass()
//                  quantizes with (an empty one for the others)
//   QuantizeWindow rows [first_row, first_row + window rows) of the tensor,
//                  given as `window` (a view of those rows), quantized with
//                  `context` into `out`; the statistics merged into *report
//                  chunk by chunk, in order. Windows of the whole tensor in
//                  order, each starting at a multiple of QuantizeWindowRows,
//                  give QuantizeTensor's values and report exactly; any
//                  window of whole ChunkRows groups gives its values.
QuantReport StartReport(const TensorView& tensor, const Scheme& scheme);
int64_t QuantizeWindowRows(int64_t cols, const Scheme& scheme);
absl::StatusOr<TensorContext> ObserveTensor(const TensorView& tensor, const Scheme& scheme,
                                            const MeasureOptions& options);
absl::Status QuantizeWindow(const TensorView& window, int64_t first_row, const Scheme& scheme,
                            const TensorContext& context, const MeasureOptions& options,
                            std::span<float> out, QuantReport* report);

// Every scheme on each of `tensors` (of `set`) in order: the reports per
// tensor and scheme (kept when `keep_results`), and per scheme the aggregate
// "(all)", the reports added in that order. A tensor that is not floating is
// skipped and named in `skipped`. After each tensor the set is checked
// intact (TensorSet::CheckIntact) and its pages released. `progress`, when
// set, is called before each tensor with (tensors.size(), its name). What
// quant-error reports and what the plan's error column is.
struct SetReports {
  std::vector<QuantReport> results;
  std::vector<QuantReport> aggregates;  // one per scheme
  std::vector<std::string> skipped;
};
absl::StatusOr<SetReports> MeasureTensors(
    const TensorSet& set, std::span<const TensorView* const> tensors,
    std::span<const std::unique_ptr<Scheme>> schemes, const MeasureOptions& options,
    const std::function<void(size_t, const std::string&)>& progress, bool keep_results = true);

}  // namespace lowp

#endif  // LOWP_QUANT_MEASURE_H_
