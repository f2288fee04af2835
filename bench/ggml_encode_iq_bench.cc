// ggml's iq4 and grid i-quant encoders on one thread: kernels::EncodeGgml (the
// SIMD scale search) beside ggml::Encode (codecs' scalar specification, the
// same bytes) in the same run, row by row as the llama.cpp codec schemes call
// them:
//   ggml_encode/TYPE/IMPORTANCE/IMPL
// TYPE iq4_nl, iq4_xs, iq3_xxs, iq3_s, iq2_xxs, iq2_xs, iq2_s, iq1_s or iq1_m (iq2_xxs,
// iq2_xs and iq1_s with importance only, as ggml); IMPORTANCE none or imatrix (one positive weight per
// column, exp(N(0, 1)), the same for every row); IMPL simd (EncodeGgml) or
// scalar (ggml::Encode). Input: a seeded 64 x 4096 float32 matrix of
// N(0, 0.02^2). items/s are input elements per second of this thread's CPU
// time (Google Benchmark's default); simd / scalar is the speed-up.
#include <cmath>
#include <cstdint>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "benchmark/benchmark.h"
#include "codecs/ggml.h"
#include "kernels/ggml_encode.h"

namespace {

using lowp::ggml::Type;

constexpr size_t kRows = 64, kCols = 4096;

const std::vector<float>& Input() {
  static const std::vector<float> x = [] {
    std::mt19937 rng(29);
    std::normal_distribution<float> dist(0.0f, 0.02f);
    std::vector<float> v(kRows * kCols);
    for (float& e : v) e = dist(rng);
    return v;
  }();
  return x;
}

const std::vector<float>& Imatrix() {
  static const std::vector<float> w = [] {
    std::mt19937 rng(2029);
    std::normal_distribution<float> dist(0.0f, 1.0f);
    std::vector<float> v(kCols);
    for (float& e : v) e = std::exp(dist(rng));
    return v;
  }();
  return w;
}

void BM_Encode(benchmark::State& state, Type type, bool importance, bool simd) {
  const std::vector<float>& x = Input();
  const std::span<const float> w = importance ? std::span<const float>(Imatrix())
                                              : std::span<const float>();
  const int64_t row_bytes = lowp::ggml::RowBytes(lowp::ggml::Info(type), kCols);
  std::vector<uint8_t> out(row_bytes * kRows);
  for (auto _ : state) {
    for (size_t r = 0; r < kRows; ++r) {
      const std::span<const float> row(x.data() + r * kCols, kCols);
      const std::span<uint8_t> dst(out.data() + r * row_bytes, row_bytes);
      const absl::Status s = simd ? lowp::kernels::EncodeGgml(type, row, dst, nullptr, w)
                                  : lowp::ggml::Encode(type, row, dst, nullptr, w);
      if (!s.ok()) {
        state.SkipWithError(s.ToString().c_str());
        return;
      }
    }
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * kRows * kCols));
}

void Register() {
  for (Type type : {Type::kIQ4_NL, Type::kIQ4_XS, Type::kIQ3_XXS, Type::kIQ3_S, Type::kIQ2_XXS,
                    Type::kIQ2_XS, Type::kIQ2_S, Type::kIQ1_S, Type::kIQ1_M}) {
    for (bool importance : {false, true}) {
      if (!importance && lowp::ggml::Info(type).needs_importance) continue;
      for (bool simd : {true, false}) {
        const std::string name = "ggml_encode/" + std::string(lowp::ggml::Info(type).name) + "/" +
                                 (importance ? "imatrix" : "none") + "/" +
                                 (simd ? "simd" : "scalar");
        benchmark::RegisterBenchmark(name.c_str(), BM_Encode, type, importance, simd)
            ->Unit(benchmark::kMillisecond);
      }
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  Register();
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
