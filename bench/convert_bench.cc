// Throughput of the conversion kernels beside the physical limit and the
// CPU's own instructions, measured in the same run. Every case reports bytes
// per second counting bytes read plus bytes written, at three float32 input
// sizes: 256 KiB (L2), 64 MiB (L3 or memory, by machine) and 1 GiB (memory).
//   memcpy/SIZE              copy of SIZE bytes (counts 2 x SIZE)
//   lowp/F/SIZE/threads:T    lowp::EncodeArray float32 -> F (T=0: all threads)
//   lowp/F->f32/...          lowp::DecodeArray F -> float32
//   lowp-measure/F/...       lowp::MeasureArray (counts the input bytes only)
//   cpu/vcvtps2ph, ...       the instruction in a plain loop (where present)
//   reference/F/SIZE         a loop of lowp::EncodeFloat32 (what one writes
//                            without lowp)
// The input is N(0, 1) float32 values (what a scaled tensor looks like to an
// FP8 cast), tiled from 16 Mi random draws.
#include <immintrin.h>

// GCC 12 warns inside its own avx512fintrin.h for _mm512_cvtps_ph.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "benchmark/benchmark.h"
#include "formats/format.h"
#include "formats/packing.h"
#include "formats/reference.h"
#include "hwy/aligned_allocator.h"
#include "kernels/convert.h"
#include "kernels/thread_pool.h"

namespace lowp {
namespace {

constexpr size_t kSizes[] = {size_t{256} << 10, size_t{64} << 20, size_t{1} << 30};

std::string SizeName(size_t bytes) {
  if (bytes >= (size_t{1} << 30)) return std::to_string(bytes >> 30) + "GiB";
  if (bytes >= (size_t{1} << 20)) return std::to_string(bytes >> 20) + "MiB";
  return std::to_string(bytes >> 10) + "KiB";
}

// One input of float32 values for the largest size; smaller sizes use its
// prefix. Outputs get their own buffers, written once before timing.
const float* Input() {
  static float* data = [] {
    const size_t n = kSizes[2] / 4;
    auto* p = static_cast<float*>(hwy::AllocateAlignedBytes(n * 4, nullptr, nullptr));
    std::mt19937 rng(42);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    const size_t tile = size_t{16} << 20;
    for (size_t i = 0; i < tile; ++i) p[i] = normal(rng);
    for (size_t i = tile; i < n; i += tile) std::memcpy(p + i, p, std::min(tile, n - i) * 4);
    return p;
  }();
  return data;
}

uint8_t* Output(size_t bytes) {
  static uint8_t* data = [] {
    auto* p = static_cast<uint8_t*>(hwy::AllocateAlignedBytes(kSizes[2], nullptr, nullptr));
    std::memset(p, 1, kSizes[2]);
    return p;
  }();
  (void)bytes;
  return data;
}

void Memcpy(benchmark::State& state, size_t bytes, int threads) {
  const auto* src = reinterpret_cast<const uint8_t*>(Input());
  uint8_t* dst = Output(bytes);
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
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * 2 * bytes));
}

void Encode(benchmark::State& state, const Format& f, ConvertOptions o, size_t bytes, int threads) {
  const size_t n = bytes / 4;
  const std::span<const float> in(Input(), n);
  const std::span<uint8_t> out(Output(bytes), StorageBytes(f, n));
  for (auto _ : state) {
    if (!EncodeArray(f, in, out, o, {.threads = threads}).ok()) state.SkipWithError("failed");
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * (bytes + out.size())));
  state.SetLabel(KernelTarget());
}

void Decode(benchmark::State& state, const Format& f, size_t bytes, int threads) {
  const size_t n = bytes / 4;
  // The codes of the input, made once.
  static std::vector<uint8_t> codes;
  static std::string made_for;
  if (made_for != f.name + std::to_string(n)) {
    codes.assign(StorageBytes(f, n), 0);
    (void)EncodeArray(f, {Input(), n}, codes);
    made_for = f.name + std::to_string(n);
  }
  auto* out = reinterpret_cast<float*>(Output(bytes));
  for (auto _ : state) {
    if (!DecodeArray(f, codes, {out, n}, {.threads = threads}).ok()) state.SkipWithError("failed");
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * (bytes + codes.size())));
  state.SetLabel(KernelTarget());
}

// Convert, read back and measure the error, writing nothing (MeasureArray).
void Measure(benchmark::State& state, const Format& f, size_t bytes, int threads) {
  const std::span<const float> in(Input(), bytes / 4);
  for (auto _ : state) {
    const absl::StatusOr<ConversionError> e = MeasureArray(f, in, {}, {.threads = threads});
    if (!e.ok()) state.SkipWithError("failed");
    benchmark::DoNotOptimize(e->error.sum_squared_error);
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * bytes));
  state.SetLabel(KernelTarget());
}

// One-pass rounding (RoundArray, float32 in and out: what fake quantization
// and CPFloat do) of 2^24 values from N(0, 0.02^2), the spread of a weight
// tensor: many of them are subnormal in fp8. Its own input, so that peers
// run on the same values (bench/README.md).
const float* WeightLikeInput() {
  static float* data = [] {
    const size_t n = size_t{1} << 24;
    auto* p = static_cast<float*>(hwy::AllocateAlignedBytes(n * 4, nullptr, nullptr));
    std::mt19937 rng(42);
    std::normal_distribution<float> normal(0.0f, 0.02f);
    for (size_t i = 0; i < n; ++i) p[i] = normal(rng);
    return p;
  }();
  return data;
}

void Round(benchmark::State& state, const Format& f, ConvertOptions o, int threads) {
  const size_t n = size_t{1} << 24;
  const std::span<const float> in(WeightLikeInput(), n);
  const std::span<float> out(reinterpret_cast<float*>(Output(4 * n)), n);
  for (auto _ : state) {
    if (!RoundArray(f, in, out, o, {.threads = threads}).ok()) state.SkipWithError("failed");
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * n));
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * 8 * n));
  state.SetLabel(KernelTarget());
}

void Reference(benchmark::State& state, const Format& f, size_t bytes) {
  const size_t n = bytes / 4;
  const float* in = Input();
  uint8_t* out = Output(bytes);
  const int unit = f.storage_bits();
  for (auto _ : state) {
    for (size_t i = 0; i < n; ++i) {
      const uint32_t code = EncodeFloat32(f, in[i]);
      switch (unit) {
        case 4:
          out[i / 2] = static_cast<uint8_t>(i % 2 == 0 ? code : out[i / 2] | (code << 4));
          break;
        case 8:
          out[i] = static_cast<uint8_t>(code);
          break;
        default:
          std::memcpy(out + 2 * i, &code, 2);
      }
    }
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * (bytes + StorageBytes(f, n))));
}

#if defined(__x86_64__)
// The F16C instructions over the same arrays (256-bit: what this class of CPU
// has without AVX-512).
[[gnu::target("avx,f16c")]] void CvtPs2Ph(benchmark::State& state, size_t bytes) {
  const size_t n = bytes / 4;
  const float* in = Input();
  auto* out = reinterpret_cast<__m128i*>(Output(bytes));
  for (auto _ : state) {
    for (size_t i = 0; i < n; i += 8) {
      _mm_storeu_si128(out + i / 8,
                       _mm256_cvtps_ph(_mm256_loadu_ps(in + i), _MM_FROUND_TO_NEAREST_INT));
    }
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * (bytes + bytes / 2)));
}

[[gnu::target("avx,f16c")]] void CvtPh2Ps(benchmark::State& state, size_t bytes) {
  const size_t n = bytes / 4;
  const auto* in = reinterpret_cast<const __m128i*>(Input());
  auto* out = reinterpret_cast<float*>(Output(bytes));
  for (auto _ : state) {
    for (size_t i = 0; i < n; i += 8) {
      _mm256_storeu_ps(out + i, _mm256_cvtph_ps(_mm_loadu_si128(in + i / 8)));
    }
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * (bytes + bytes / 2)));
}

[[gnu::target("avx512f")]] void CvtPs2Ph512(benchmark::State& state, size_t bytes) {
  const size_t n = bytes / 4;
  const float* in = Input();
  auto* out = reinterpret_cast<__m256i*>(Output(bytes));
  for (auto _ : state) {
    for (size_t i = 0; i < n; i += 16) {
      _mm256_storeu_si256(out + i / 16,
                          _mm512_cvtps_ph(_mm512_loadu_ps(in + i), _MM_FROUND_TO_NEAREST_INT));
    }
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * (bytes + bytes / 2)));
}

[[gnu::target("avx512f")]] void CvtPh2Ps512(benchmark::State& state, size_t bytes) {
  const size_t n = bytes / 4;
  const auto* in = reinterpret_cast<const __m256i*>(Input());
  auto* out = reinterpret_cast<float*>(Output(bytes));
  for (auto _ : state) {
    for (size_t i = 0; i < n; i += 16) {
      _mm512_storeu_ps(out + i, _mm512_cvtph_ps(_mm256_loadu_si256(in + i / 16)));
    }
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * (bytes + bytes / 2)));
}

[[gnu::target("avx512f,avx512bf16")]] void CvtNePs2Bf16(benchmark::State& state, size_t bytes) {
  const size_t n = bytes / 4;
  const float* in = Input();
  auto* out = reinterpret_cast<__m256i*>(Output(bytes));
  for (auto _ : state) {
    for (size_t i = 0; i < n; i += 16) {
      _mm256_storeu_si256(out + i / 16, (__m256i)_mm512_cvtneps_pbh(_mm512_loadu_ps(in + i)));
    }
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * (bytes + bytes / 2)));
}
#endif

// Wall-clock time (the kernels start their own threads), median of 5.
template <class... Args>
void Register(const std::string& name, Args&&... args) {
  benchmark::RegisterBenchmark(name.c_str(), std::forward<Args>(args)...)
      ->UseRealTime()
      ->MinTime(0.2)
      ->Repetitions(5)
      ->ReportAggregatesOnly(true);
}

void RegisterRound() {
  struct Case {
    const char* name;
    const char* format;
    Rounding rounding;
  };
  const Case cases[] = {{"fp16", "fp16", Rounding::kNearestEven},
                        {"bf16", "bf16", Rounding::kNearestEven},
                        {"fp8_e4m3fn", "fp8_e4m3fn", Rounding::kNearestEven},
                        {"fp8_e5m2", "fp8_e5m2", Rounding::kNearestEven},
                        {"fp16-stochastic", "fp16", Rounding::kStochastic},
                        {"bf16-stochastic", "bf16", Rounding::kStochastic},
                        {"fp16-toward-zero", "fp16", Rounding::kTowardZero}};
  for (int threads : {1, AvailableCpus()}) {
    for (const Case& c : cases) {
      Register("round/" + std::string(c.name) + "/n(0,0.02)-64MiB/threads:" +
                   std::to_string(threads),
               Round, *FindFormat(c.format), ConvertOptions{.rounding = c.rounding}, threads);
    }
  }
}

void RegisterAll() {
  RegisterRound();
  const char* encodes[] = {"fp16", "bf16",       "fp8_e4m3fn", "fp8_e5m2", "int8",
                           "int4", "fp4_e2m1fn", "fp6_e2m3fn", "e8m0fnu"};
  const char* decodes[] = {"fp16", "bf16", "fp8_e4m3fn"};
  const int all = AvailableCpus();
  for (size_t bytes : kSizes) {
    const std::string size = SizeName(bytes);
    for (int threads : {1, all}) {
      const std::string t = "/threads:" + std::to_string(threads);
      Register("memcpy/" + size + t, Memcpy, bytes, threads);
      for (const char* name : encodes) {
        Register("lowp/" + std::string(name) + "/" + size + t, Encode, *FindFormat(name),
                 ConvertOptions{}, bytes, threads);
      }
      Register("lowp/fp8_e4m3fn-stochastic/" + size + t, Encode, *FindFormat("fp8_e4m3fn"),
               ConvertOptions{.rounding = Rounding::kStochastic}, bytes, threads);
      for (const char* name : {"fp8_e4m3fn", "int4"}) {
        Register("lowp-measure/" + std::string(name) + "/" + size + t, Measure, *FindFormat(name),
                 bytes, threads);
      }
      for (const char* name : decodes) {
        Register("lowp/" + std::string(name) + "->f32/" + size + t, Decode, *FindFormat(name),
                 bytes, threads);
      }
    }
#if defined(__x86_64__)
    if (__builtin_cpu_supports("f16c")) {
      Register("cpu/vcvtps2ph-ymm/" + size, CvtPs2Ph, bytes);
      Register("cpu/vcvtph2ps-ymm/" + size, CvtPh2Ps, bytes);
    }
    if (__builtin_cpu_supports("avx512f")) {
      Register("cpu/vcvtps2ph-zmm/" + size, CvtPs2Ph512, bytes);
      Register("cpu/vcvtph2ps-zmm/" + size, CvtPh2Ps512, bytes);
    }
    if (__builtin_cpu_supports("avx512bf16")) {
      Register("cpu/vcvtneps2bf16-zmm/" + size, CvtNePs2Bf16, bytes);
    }
#endif
    if (bytes < kSizes[2]) {  // ~3 s an iteration at 1 GiB
      for (const char* name :
           {"fp16", "bf16", "fp8_e4m3fn", "fp8_e5m2", "int8", "int4", "fp4_e2m1fn"}) {
        Register("reference/" + std::string(name) + "/" + size, Reference, *FindFormat(name),
                 bytes);
      }
    }
  }
}

}  // namespace
}  // namespace lowp

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  lowp::RegisterAll();
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
