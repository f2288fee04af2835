// Throughput of the quant-error pass (lowp::MeasureTensor: quantize,
// dequantize, compare, accumulate; nothing written) per scheme, beside memcpy
// of the same input bytes in the same run, and the wall time of a real
// checkpoint through ten schemes. Every throughput counts INPUT bytes only:
//   memcpy/INPUT/threads:T         copy of the input's bytes (counted once:
//                                  bytes copied, not read + written, so that
//                                  quant / memcpy is a ratio of times for the
//                                  same bytes)
//   quant/SCHEME/INPUT/threads:T   MeasureTensor over the input (T=2: both
//                                  cores through MeasureOptions::threads)
//   quant/step:STEP/f32-64x4096/threads:1
//                                  one step of the pass alone, over the input
//                                  in the driver's chunks of 2^15 elements:
//                                  where the time goes (block-absmax-g128,
//                                  quantize-int-g128, compare, encode-F and
//                                  decode-F for the formats the casts use)
//   checkpoint/stories260K-f32/10-schemes/threads:T
//                                  TensorSet::Open + every tensor x ten schemes
//                                  (wall time; items = elements x schemes)
// INPUT is a seeded N(0, 0.02^2) float32 matrix held in memory as a
// TensorView over a std::vector<uint8_t>: f32-64x4096 (1 MiB, in L2 + L3),
// f32-4096x4096 (64 MiB, main memory here), and the same values rounded to
// bf16 (bf16-64x4096, 512 KiB; bf16-4096x4096, 32 MiB).
//
// Other modes (no benchmark run), used by bench/peak_rss.sh:
//   quant_bench --write-safetensors=PATH --tensors=N --rows=R --cols=C
//       writes N float32 tensors [R, C] of N(0, 0.02^2) values (a 16 MiB
//       random piece, tiled) with SafetensorsWriter, never holding more than
//       16 MiB.
//   quant_bench --peak-rss=PATH --scheme=S[,S...] [--threads=T] [--no-release]
//       runs quant-error over PATH as `lowp quant-error` does (every scheme
//       on a tensor, then TensorSet::Release) and prints one JSON object:
//       file bytes, largest tensor, peak RSS (getrusage ru_maxrss) and time.
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "benchmark/benchmark.h"
#include "formats/format.h"
#include "formats/packing.h"
#include "kernels/convert.h"
#include "kernels/thread_pool.h"
#include "kernels/quantize.h"
#include "quant/measure.h"
#include "quant/scheme.h"
#include "io/tensor.h"
#include "io/safetensors.h"
#include "io/tensor_set.h"

namespace lowp {
namespace {

constexpr float kStddev = 0.02f;

// Float32 -> bf16, nearest-even (the values are finite).
uint16_t ToBf16(float x) {
  uint32_t u;
  std::memcpy(&u, &x, 4);
  return static_cast<uint16_t>((u + 0x7FFF + ((u >> 16) & 1)) >> 16);
}

std::vector<float> Normal(size_t n, uint32_t seed) {
  std::vector<float> v(n);
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, kStddev);
  for (float& x : v) x = normal(rng);
  return v;
}

struct Input {
  std::string name;  // "f32-4096x4096"
  DType dtype;
  int64_t rows, cols;
};

const Input kInputs[] = {
    {"f32-64x4096", DType::kF32, 64, 4096},
    {"f32-4096x4096", DType::kF32, 4096, 4096},
    {"bf16-64x4096", DType::kBF16, 64, 4096},
    {"bf16-4096x4096", DType::kBF16, 4096, 4096},
};

// The input's bytes (made on first use, then kept) and a view over them.
struct Held {
  std::vector<uint8_t> bytes;
  std::vector<uint8_t> copy;  // memcpy's destination, written once before timing
  TensorView view;
};

Held& Get(const Input& in) {
  static std::vector<std::unique_ptr<Held>> held(std::size(kInputs));
  const size_t index = &in - kInputs;
  if (held[index] == nullptr) {
    auto h = std::make_unique<Held>();
    const size_t n = static_cast<size_t>(in.rows * in.cols);
    // The same seed for every input: the small ones are the large one's
    // first rows, the bf16 ones its values rounded.
    const std::vector<float> values = Normal(n, 42);
    if (in.dtype == DType::kF32) {
      h->bytes.resize(n * 4);
      std::memcpy(h->bytes.data(), values.data(), n * 4);
    } else {
      h->bytes.resize(n * 2);
      for (size_t i = 0; i < n; ++i) {
        const uint16_t b = ToBf16(values[i]);
        std::memcpy(h->bytes.data() + 2 * i, &b, 2);
      }
    }
    h->copy.assign(h->bytes.size(), 1);
    h->view.name = in.name;
    h->view.dtype = in.dtype;
    h->view.shape = {in.rows, in.cols};
    h->view.bytes = h->bytes;
    h->view.file = "(memory)";
    held[index] = std::move(h);
  }
  return *held[index];
}

void Memcpy(benchmark::State& state, const Input* input, int threads) {
  Held& h = Get(*input);
  const size_t bytes = h.bytes.size();
  const uint8_t* src = h.bytes.data();
  uint8_t* dst = h.copy.data();
  for (auto _ : state) {
    if (threads == 1) {
      std::memcpy(dst, src, bytes);
    } else {
      const size_t half = bytes / 2;
      std::thread other([&] { std::memcpy(dst + half, src + half, bytes - half); });
      std::memcpy(dst, src, half);
      other.join();
    }
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * bytes));
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * input->rows * input->cols));
}

void Quant(benchmark::State& state, const Input* input, std::string scheme_name, int threads) {
  absl::StatusOr<std::unique_ptr<Scheme>> scheme = ParseScheme(scheme_name);
  if (!scheme.ok()) {
    state.SkipWithError(std::string(scheme.status().message()).c_str());
    return;
  }
  Held& h = Get(*input);
  MeasureOptions options;
  options.threads = threads;
  double sqnr = 0;
  for (auto _ : state) {
    absl::StatusOr<QuantReport> r = MeasureTensor(h.view, **scheme, options);
    if (!r.ok()) {
      state.SkipWithError(std::string(r.status().message()).c_str());
      break;
    }
    // Through a const copy: DoNotOptimize on a non-const double (its "+r,m"
    // constraint, Google Benchmark 1.7) can hand back a clobbered value.
    const double sse = r->stats.sum_squared_error;
    benchmark::DoNotOptimize(sse);
    sqnr = r->sqnr_db();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * h.bytes.size()));
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * input->rows * input->cols));
  state.counters["sqnr_db"] = sqnr;  // a check that the pass did its work
}

// The plan's seven default formats (DefaultPlanFormats) on one tensor, as
// quant-error and plan run them: MeasureTensors, one read of the tensor for
// all seven.
void Sweep(benchmark::State& state, const Input* input, int threads) {
  std::vector<std::unique_ptr<Scheme>> schemes;
  for (const char* name : {"bf16", "fp8_e4m3fn", "int8-channel", "int4-g128", "nf4", "mxfp4",
                           "q4_0"}) {
    schemes.push_back(*ParseScheme(name));
  }
  Held& h = Get(*input);
  absl::StatusOr<TensorSet> set = TensorSet::FromViews({h.view});
  if (!set.ok()) {
    state.SkipWithError(std::string(set.status().message()).c_str());
    return;
  }
  const TensorView* tensors[] = {&set->tensors().front()};
  MeasureOptions options;
  options.threads = threads;
  for (auto _ : state) {
    absl::StatusOr<SetReports> r = MeasureTensors(*set, tensors, schemes, options, nullptr, false);
    if (!r.ok()) {
      state.SkipWithError(std::string(r.status().message()).c_str());
      break;
    }
    const double sse = r->aggregates.front().stats.sum_squared_error;
    benchmark::DoNotOptimize(sse);
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * h.bytes.size()));
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * input->rows * input->cols));
}

// The whole checkpoint, as a user runs it: open, every tensor x scheme.
void Checkpoint(benchmark::State& state, std::string path, std::vector<std::string> names,
                int threads) {
  std::vector<std::unique_ptr<Scheme>> schemes;
  for (const std::string& name : names) {
    absl::StatusOr<std::unique_ptr<Scheme>> s = ParseScheme(name);
    if (!s.ok()) {
      state.SkipWithError(std::string(s.status().message()).c_str());
      return;
    }
    schemes.push_back(*std::move(s));
  }
  MeasureOptions options;
  options.threads = threads;
  int64_t elements = 0, tensors = 0;
  for (auto _ : state) {
    absl::StatusOr<TensorSet> set = TensorSet::Open(path);
    if (!set.ok()) {
      state.SkipWithError(std::string(set.status().message()).c_str());
      break;
    }
    elements = tensors = 0;
    for (const TensorView& t : set->tensors()) {
      for (const auto& scheme : schemes) {
        absl::StatusOr<QuantReport> r = MeasureTensor(t, *scheme, options);
        if (!r.ok()) {
          state.SkipWithError(std::string(r.status().message()).c_str());
          return;
        }
        const double sse = r->stats.sum_squared_error;
        benchmark::DoNotOptimize(sse);
      }
      elements += t.elements();
      ++tensors;
    }
  }
  state.SetItemsProcessed(
      static_cast<int64_t>(state.iterations() * elements * static_cast<int64_t>(schemes.size())));
  state.counters["tensors"] = static_cast<double>(tensors);
  state.counters["elements"] = static_cast<double>(elements);
}

// One step of the quant-error pass alone, on the calling thread, over the
// input in the driver's chunks; bytes are the input's float32 bytes.
void Step(benchmark::State& state, const Input* input, std::string step) {
  Held& h = Get(*input);
  const int64_t cols = input->cols;
  const size_t n = static_cast<size_t>(input->rows * cols);
  const size_t chunk = std::min<size_t>(n, size_t{1} << 15);
  const std::span<const float> x(reinterpret_cast<const float*>(h.bytes.data()), n);
  std::vector<float> out(chunk), amax(chunk), scale(chunk);
  std::vector<float> q(x.begin(), x.end());
  for (float& v : q) v *= 1.001f;  // a reconstruction to compare with
  BlockAbsMax(x.first(chunk), cols, 128, std::span<float>(amax).first(chunk / 128));
  for (size_t b = 0; b < chunk / 128; ++b) scale[b] = amax[b] / 7;
  const std::string format_name = step.substr(step.find('-') + 1);
  const absl::StatusOr<Format> format = FindFormat(format_name);
  std::vector<uint8_t> codes(format.ok() ? StorageBytes(*format, chunk) : 0);
  if (format.ok()) (void)EncodeArray(*format, x.first(chunk), codes);
  RunOptions run;
  run.threads = 1;
  ErrorStats stats;
  const CompareOptions compare{.relative_floor = 1e-3f};
  for (auto _ : state) {
    for (size_t i = 0; i + chunk <= n; i += chunk) {
      const std::span<const float> in = x.subspan(i, chunk);
      if (step == "block-absmax-g128") {
        BlockAbsMax(in, cols, 128, std::span<float>(amax).first(chunk / 128));
      } else if (step == "quantize-int-g128") {
        QuantizeIntBlocks(in, cols, 128, std::span<const float>(scale).first(chunk / 128), {},
                          {.qmin = -7, .qmax = 7}, out);
      } else if (step == "compare") {
        ComparePairs(in, std::span<const float>(q).subspan(i, chunk), compare, stats);
      } else if (step.rfind("encode-", 0) == 0) {
        (void)EncodeArray(*format, in, codes, {}, run);
      } else {
        (void)DecodeArray(*format, codes, out, run);
      }
      benchmark::ClobberMemory();
    }
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * n * sizeof(float)));
}

// Wall-clock time (MeasureTensor starts its own threads), median of 5, as
// convert_bench.
template <class... Args>
benchmark::internal::Benchmark* Register(const std::string& name, Args&&... args) {
  return benchmark::RegisterBenchmark(name.c_str(), std::forward<Args>(args)...)
      ->UseRealTime()
      ->MinTime(0.2)
      ->Repetitions(5)
      ->ReportAggregatesOnly(true);
}

const std::vector<std::string>& CheckpointSchemes() {
  static const std::vector<std::string> names = {"int8-channel",
                                                 "int4-g128",
                                                 "uint4-g128-asym",
                                                 "fp8_e4m3fn",
                                                 "fp8_e4m3fn-channel",
                                                 "mxfp4",
                                                 "nvfp4",
                                                 "nf4",
                                                 "q4_0",
                                                 "q8_0"};
  return names;
}

void RegisterAll() {
  const char* f32_schemes[] = {"int8-channel", "int4-g128", "fp8_e4m3fn",        "mxfp4", "fp16",
                               "bf16",         "int8",      "uint4-g128-asym",   "nvfp4", "nf4",
                               "q4_0",         "q8_0",      "fp8_e4m3fn-channel",
                               "fp8_e4m3fn-tensor", "fp8_e4m3fn-g128", "fp8_e4m3fn-b128x128",
                               // llama.cpp's other types (codecs/ggml.h), 4096-wide rows so the
                               // super-block types apply without their fallback
                               "q5_1", "q2_K", "q3_K", "q4_K", "q5_K", "q6_K", "iq4_nl", "iq4_xs",
                               "ggml-mxfp4", "ggml-nvfp4",
                               // the Hadamard rotation's cost beside the schemes it wraps
                               "int4-g128:rotate=hadamard", "mxfp4:rotate=hadamard32"};
  const char* bf16_schemes[] = {"int8-channel", "int4-g128"};
  const int all = AvailableCpus();
  for (const Input& input : kInputs) {
    for (int threads : {1, all}) {
      const std::string suffix = "/" + input.name + "/threads:" + std::to_string(threads);
      Register("memcpy" + suffix, Memcpy, &input, threads);
      if (input.dtype == DType::kF32) {
        Register("sweep/plan-7-formats" + suffix, Sweep, &input, threads);
        for (const char* s : f32_schemes)
          Register("quant/" + std::string(s) + suffix, Quant, &input, s, threads);
      } else {
        for (const char* s : bf16_schemes)
          Register("quant/" + std::string(s) + suffix, Quant, &input, s, threads);
      }
    }
  }
  const Input& small = kInputs[0];  // f32-64x4096
  for (const char* step : {"block-absmax-g128", "quantize-int-g128", "compare",
                           "encode-fp8_e4m3fn", "decode-fp8_e4m3fn", "encode-fp4_e2m1fn",
                           "decode-fp4_e2m1fn", "encode-bf16", "decode-bf16", "encode-fp16",
                           "decode-fp16"}) {
    Register("quant/step:" + std::string(step) + "/" + small.name + "/threads:1", Step, &small,
             std::string(step));
  }
  const char* env = std::getenv("LOWP_STORIES260K");
  const std::string path =
      env != nullptr
          ? env
          : std::string(LOWP_SOURCE_DIR) + "/tests/data/stories260K/stories260K.f32.safetensors";
  if (std::filesystem::exists(path)) {
    for (int threads : {1, all}) {
      Register("checkpoint/stories260K-f32/10-schemes/threads:" + std::to_string(threads),
               Checkpoint, path, CheckpointSchemes(), threads)
          ->Unit(benchmark::kMillisecond);
    }
  } else {
    std::fprintf(stderr, "quant_bench: %s not found, no checkpoint case\n", path.c_str());
  }
}

// --- modes for bench/peak_rss.sh ---------------------------------------------

// The value of --KEY=VALUE in argv, or null.
const char* Flag(int argc, char** argv, const char* key) {
  const std::string prefix = std::string("--") + key + "=";
  for (int i = 1; i < argc; ++i) {
    if (std::strncmp(argv[i], prefix.c_str(), prefix.size()) == 0) return argv[i] + prefix.size();
  }
  return nullptr;
}

bool HasFlag(int argc, char** argv, const char* key) {
  const std::string flag = std::string("--") + key;
  for (int i = 1; i < argc; ++i) {
    if (flag == argv[i]) return true;
  }
  return false;
}

int64_t IntFlag(int argc, char** argv, const char* key, int64_t fallback) {
  const char* v = Flag(argc, argv, key);
  int64_t n = fallback;
  if (v != nullptr && !absl::SimpleAtoi(v, &n)) {
    std::fprintf(stderr, "--%s=%s: not an integer\n", key, v);
    std::exit(2);
  }
  return n;
}

int WriteSafetensors(const std::string& path, int64_t tensors, int64_t rows, int64_t cols) {
  std::vector<SafetensorsWriter::Entry> entries;
  for (int64_t t = 0; t < tensors; ++t) {
    entries.push_back({"layers." + std::to_string(t) + ".weight", DType::kF32, {rows, cols}});
  }
  absl::StatusOr<std::unique_ptr<SafetensorsWriter>> writer =
      SafetensorsWriter::Create(path, entries, {{"note", "lowp quant_bench peak-RSS input"}});
  if (!writer.ok()) {
    std::fprintf(stderr, "%s\n", std::string(writer.status().message()).c_str());
    return 1;
  }
  const std::vector<float> piece = Normal(size_t{1} << 22, 7);  // 16 MiB
  const auto* bytes = reinterpret_cast<const uint8_t*>(piece.data());
  const uint64_t total = static_cast<uint64_t>(tensors * rows * cols) * 4;
  for (uint64_t done = 0; done < total;) {
    const size_t n = static_cast<size_t>(std::min<uint64_t>(piece.size() * 4, total - done));
    if (absl::Status s = (*writer)->Write({bytes, n}); !s.ok()) {
      std::fprintf(stderr, "%s\n", std::string(s.message()).c_str());
      return 1;
    }
    done += n;
  }
  if (absl::Status s = (*writer)->Finish(); !s.ok()) {
    std::fprintf(stderr, "%s\n", std::string(s.message()).c_str());
    return 1;
  }
  return 0;
}

int64_t MaxRssBytes() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<int64_t>(u.ru_maxrss) * 1024;  // Linux: KiB
}

int PeakRss(const std::string& path, const std::string& scheme_list, int threads, bool release) {
  const int64_t rss_start = MaxRssBytes();
  std::vector<std::unique_ptr<Scheme>> schemes;
  for (absl::string_view name : absl::StrSplit(scheme_list, ',')) {
    absl::StatusOr<std::unique_ptr<Scheme>> s = ParseScheme(name);
    if (!s.ok()) {
      std::fprintf(stderr, "%s\n", std::string(s.status().message()).c_str());
      return 1;
    }
    schemes.push_back(*std::move(s));
  }
  const auto start = std::chrono::steady_clock::now();
  absl::StatusOr<TensorSet> set = TensorSet::Open(path);
  if (!set.ok()) {
    std::fprintf(stderr, "%s\n", std::string(set.status().message()).c_str());
    return 1;
  }
  // As the CLI: release each batch's pages once read, and each tensor's after.
  MeasureOptions options;
  options.threads = threads;
  if (release) options.release = [&set](std::span<const uint8_t> b) { set->Release(b); };
  int64_t largest = 0, data = 0;
  for (const TensorView& t : set->tensors()) {
    for (const auto& scheme : schemes) {
      absl::StatusOr<QuantReport> r = MeasureTensor(t, *scheme, options);
      if (!r.ok()) {
        std::fprintf(stderr, "%s\n", std::string(r.status().message()).c_str());
        return 1;
      }
    }
    if (release) set->Release(t);
    largest = std::max<int64_t>(largest, static_cast<int64_t>(t.bytes.size()));
    data += static_cast<int64_t>(t.bytes.size());
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf(
      "{\"file\": \"%s\", \"file_bytes\": %lld, \"tensors\": %zu, \"tensor_bytes\": %lld, "
      "\"largest_tensor_bytes\": %lld, \"schemes\": \"%s\", \"threads\": %d, \"release\": %s, "
      "\"max_rss_bytes_before_open\": %lld, \"max_rss_bytes\": %lld, \"seconds\": %.3f}\n",
      path.c_str(), static_cast<long long>(std::filesystem::file_size(path)), set->tensors().size(),
      static_cast<long long>(data), static_cast<long long>(largest), scheme_list.c_str(), threads,
      release ? "true" : "false", static_cast<long long>(rss_start),
      static_cast<long long>(MaxRssBytes()), seconds);
  return 0;
}

}  // namespace
}  // namespace lowp

int main(int argc, char** argv) {
  if (const char* path = lowp::Flag(argc, argv, "write-safetensors")) {
    return lowp::WriteSafetensors(path, lowp::IntFlag(argc, argv, "tensors", 6),
                                  lowp::IntFlag(argc, argv, "rows", 16384),
                                  lowp::IntFlag(argc, argv, "cols", 4096));
  }
  if (const char* path = lowp::Flag(argc, argv, "peak-rss")) {
    const char* scheme = lowp::Flag(argc, argv, "scheme");
    return lowp::PeakRss(path, scheme != nullptr ? scheme : "int8-channel",
                         static_cast<int>(lowp::IntFlag(argc, argv, "threads", 0)),
                         !lowp::HasFlag(argc, argv, "no-release"));
  }
  benchmark::Initialize(&argc, argv);
  lowp::RegisterAll();
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
