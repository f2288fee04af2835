// One thread encoding rows of 4096 float32 N(0, 0.02^2) values (64 rows,
// seeded) into ggml's types, without and with an importance vector (one
// log-normal weight per column, the same for every row):
//   ggml_encode/TYPE/IMPORTANCE/fast     kernels::EncodeGgml, row by row
//   ggml_encode/TYPE/IMPORTANCE/scalar   codecs' ggml::Encode, row by row:
//                                        ggml's algorithm as written (the
//                                        peer; /work/ggmlref's ggmlbench
//                                        times ggml_quantize_chunk itself)
// IMPORTANCE is none or imatrix (q8_0: none only). Compare the CPU times of fast and scalar
// of the same type and importance; items are elements.
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "benchmark/benchmark.h"
#include "codecs/ggml.h"
#include "kernels/ggml_encode.h"

namespace {

constexpr size_t kCols = 4096;
constexpr size_t kRows = 64;

const std::vector<float>& Input() {
  static const std::vector<float> x = [] {
    std::mt19937 rng(29);
    std::normal_distribution<float> normal(0.f, 0.02f);
    std::vector<float> v(kCols * kRows);
    for (float& e : v) e = normal(rng);
    return v;
  }();
  return x;
}

const std::vector<float>& Importance() {
  static const std::vector<float> w = [] {
    std::mt19937 rng(0x494d);
    std::normal_distribution<float> normal(0.f, 1.f);
    std::vector<float> v(kCols);
    for (float& e : v) e = std::exp(normal(rng));
    return v;
  }();
  return w;
}

void Run(benchmark::State& state, lowp::ggml::Type type, bool weighted, bool fast) {
  const lowp::ggml::TypeInfo& info = lowp::ggml::Info(type);
  const std::vector<float>& x = Input();
  const std::span<const float> w =
      weighted ? std::span<const float>(Importance()) : std::span<const float>();
  const size_t row_bytes = kCols / info.block * info.bytes;
  std::vector<uint8_t> out(row_bytes * kRows);
  for (auto _ : state) {
    for (size_t r = 0; r < kRows; ++r) {
      const std::span<const float> row(x.data() + r * kCols, kCols);
      const std::span<uint8_t> bytes(out.data() + r * row_bytes, row_bytes);
      const absl::Status s = fast ? lowp::kernels::EncodeGgml(type, row, bytes, nullptr, w)
                                  : lowp::ggml::Encode(type, row, bytes, nullptr, w);
      if (!s.ok()) state.SkipWithError(std::string(s.message()).c_str());
    }
    benchmark::DoNotOptimize(out.data());
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * kCols * kRows));
}

const int kRegistered = [] {
  using lowp::ggml::Type;
  for (Type type : {Type::kQ4_K, Type::kQ5_K, Type::kQ6_K, Type::kQ2_K, Type::kQ3_K, Type::kQ4_0,
                    Type::kQ4_1, Type::kQ5_0, Type::kQ5_1, Type::kQ8_0}) {
    for (bool weighted : {false, true}) {
      if (weighted && type == Type::kQ8_0) continue;  // ggml's q8_0 ignores importance
      for (bool fast : {true, false}) {
        const std::string name = "ggml_encode/" + std::string(lowp::ggml::Info(type).name) +
                                 (weighted ? "/imatrix" : "/none") + (fast ? "/fast" : "/scalar");
        benchmark::RegisterBenchmark(name.c_str(), [=](benchmark::State& s) {
          Run(s, type, weighted, fast);
        })->Unit(benchmark::kMillisecond);
      }
    }
  }
  return 0;
}();

}  // namespace

BENCHMARK_MAIN();
