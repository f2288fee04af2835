// lowp update-error's speed: AdamW steps per recipe on a 4096 x 4096 tensor
// (the float64 reference and the recipe, element by element, with the
// gradient model), beside a plain float32 AdamW step over the same tensor and
// a memcpy of the state it touches (weights, gradient, two moments: 16
// bytes a parameter). Items are parameter-steps; CPU time, one thread.
// bench/optim_numpy.py times NumPy's float32 AdamW step on the same shape.
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "benchmark/benchmark.h"
#include "optim/recipe.h"
#include "optim/update_error.h"

namespace lowp {
namespace {

constexpr int64_t kRows = 4096, kCols = 4096, kN = kRows * kCols;

const std::vector<float>& Weights() {
  static const std::vector<float>* w = [] {
    auto* v = new std::vector<float>(kN);
    std::mt19937 rng(1);
    std::normal_distribution<float> normal(0.0f, 0.02f);
    for (float& x : *v) x = normal(rng);
    return v;
  }();
  return *w;
}

// Four steps per iteration from the tensor's values (the setup: the start
// values rounded, the persistent gradient direction, amortized over them);
// items are parameter-steps.
constexpr int64_t kSteps = 4;
void Recipe(benchmark::State& state, std::string name) {
  const std::vector<TrainingRecipe> recipes = {*ParseTrainingRecipe(name)};
  UpdateErrorOptions o;
  o.adamw.steps = kSteps;
  o.threads = 1;
  std::vector<UpdateReport> reports(1);
  for (auto _ : state) {
    absl::Status s = MeasureUpdates("w", Weights(), 0, o, recipes, reports);
    if (!s.ok()) state.SkipWithError(std::string(s.message()).c_str());
    benchmark::DoNotOptimize(reports[0].lost);
  }
  state.SetItemsProcessed(state.iterations() * kN * kSteps);
}

// AdamW in float32 as a framework's fused kernel computes it.
void PlainAdamW(benchmark::State& state) {
  std::vector<float> p = Weights(), g(kN), m(kN, 0.0f), v(kN, 0.0f);
  for (int64_t i = 0; i < kN; ++i)
    g[i] = 1e-5f * static_cast<float>((i * 2654435761u) % 2001) - 0.01f;
  const float b1 = 0.9f, b2 = 0.95f, lr = 1e-4f, eps = 1e-8f, decay = 1 - 1e-5f;
  int t = 0;
  for (auto _ : state) {
    ++t;
    const float step = -lr / (1 - std::pow(b1, static_cast<float>(t)));
    const float root = std::sqrt(1 - std::pow(b2, static_cast<float>(t)));
    for (int64_t i = 0; i < kN; ++i) {
      m[i] = b1 * m[i] + (1 - b1) * g[i];
      v[i] = b2 * v[i] + (1 - b2) * g[i] * g[i];
      p[i] = p[i] * decay + step * (m[i] / (std::sqrt(v[i]) / root + eps));
    }
    benchmark::DoNotOptimize(p.data());
  }
  state.SetItemsProcessed(state.iterations() * kN);
}

// Reading and writing the state once: 16 bytes a parameter copied.
void Memcpy(benchmark::State& state) {
  std::vector<char> from(static_cast<size_t>(kN) * 16, 1), to(from.size());
  for (auto _ : state) {
    std::memcpy(to.data(), from.data(), from.size());
    benchmark::DoNotOptimize(to.data());
  }
  state.SetItemsProcessed(state.iterations() * kN);
}

void RegisterAll() {
  benchmark::RegisterBenchmark("optim/memcpy-state", Memcpy)
      ->UseRealTime()
      ->Unit(benchmark::kMillisecond);
  benchmark::RegisterBenchmark("optim/plain-adamw-fp32", PlainAdamW)->Unit(benchmark::kMillisecond);
  for (const TrainingRecipe& r : TrainingRecipes()) {
    benchmark::RegisterBenchmark(("optim/update-error/" + r.name).c_str(), Recipe, r.name)
        ->Unit(benchmark::kMillisecond)
        ->MeasureProcessCPUTime();
  }
}

}  // namespace
}  // namespace lowp

int main(int argc, char** argv) {
  lowp::RegisterAll();
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
