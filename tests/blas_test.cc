// OpenBLAS's kernels: the choice for a CPU's instructions, the switch in
// process, and what a run without OPENBLAS_CORETYPE gets (this binary runs
// with OPENBLAS_CORETYPE=Prescott, tests/CMakeLists.txt: the worst x86-64
// kernels, whatever the CPU).

#include "model/blas.h"

#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/cli_run.h"

extern "C" char* openblas_get_corename(void);

namespace lowp {
namespace {

TEST(Blas, TheBestKernelsFollowTheInstructions) {
  CpuFeatures f;
  EXPECT_EQ(BestOpenBlasCore(f), "");
  f.avx = true;
  EXPECT_EQ(BestOpenBlasCore(f), "Sandybridge");
  f.avx2_fma = true;
  EXPECT_EQ(BestOpenBlasCore(f), "Zen");  // not GenuineIntel
  f.intel = true;
  EXPECT_EQ(BestOpenBlasCore(f), "Haswell");
  f.avx512 = true;
  EXPECT_EQ(BestOpenBlasCore(f), "SkylakeX");
  f.intel = false;  // AMD Zen 4 and 5 have AVX-512 too
  EXPECT_EQ(BestOpenBlasCore(f), "SkylakeX");
  f.avx512_bf16 = true;
  EXPECT_EQ(BestOpenBlasCore(f), "Cooperlake");
}

TEST(Blas, CoreClassesOrderTheKernels) {
  EXPECT_EQ(OpenBlasCoreClass("Prescott"), 1);
  EXPECT_EQ(OpenBlasCoreClass("NEHALEM"), 1);
  EXPECT_EQ(OpenBlasCoreClass("Sandybridge"), 2);
  EXPECT_EQ(OpenBlasCoreClass("Haswell"), 3);
  EXPECT_EQ(OpenBlasCoreClass("Zen"), 3);
  EXPECT_EQ(OpenBlasCoreClass("SkylakeX"), 4);
  EXPECT_EQ(OpenBlasCoreClass("cooperlake"), 4);
  EXPECT_EQ(OpenBlasCoreClass("Unknown"), 0);
}

TEST(Blas, TheUsersCoreTypeWins) {
  ASSERT_STREQ(std::getenv("OPENBLAS_CORETYPE"), "Prescott");
  const BlasKernels& k = BlasSetup();
  EXPECT_EQ(k.core, "Prescott");
  EXPECT_EQ(k.chosen_by, "OPENBLAS_CORETYPE");
  EXPECT_NE(k.library.find("OpenBLAS"), std::string::npos);
}

// A product on the kernels in use, against double precision.
double ProductError() {
  const int m = 37, n = 53, k = 300;
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> u(-1, 1);
  std::vector<float> a(m * k), b(n * k), c(m * n);
  for (float& x : a) x = u(rng);
  for (float& x : b) x = u(rng);
  Sgemm(true, m, n, k, 1.0f, a.data(), k, b.data(), k, c.data(), n);
  double worst = 0;
  for (int i = 0; i < m; ++i) {
    for (int j = 0; j < n; ++j) {
      double s = 0;
      for (int l = 0; l < k; ++l) s += static_cast<double>(a[i * k + l]) * b[j * k + l];
      worst = std::max(worst, std::abs(s - c[i * n + j]));
    }
  }
  return worst;
}

TEST(Blas, SwitchingKernelsInProcessWorks) {
  const std::string best = BestOpenBlasCore(ReadCpuFeatures());
  if (OpenBlasCoreClass(best) < 3) GTEST_SKIP() << "no AVX2 on this CPU";
  ASSERT_EQ(std::string(openblas_get_corename()), "Prescott");
  EXPECT_LT(ProductError(), 1e-4);
  ASSERT_TRUE(SwitchOpenBlasCore("Haswell").ok());
  EXPECT_EQ(std::string(openblas_get_corename()), "Haswell");
  EXPECT_LT(ProductError(), 1e-4);
  // The environment is the user's again.
  EXPECT_STREQ(std::getenv("OPENBLAS_CORETYPE"), "Prescott");
  EXPECT_FALSE(SwitchOpenBlasCore("NoSuchCore").ok());
  ASSERT_TRUE(SwitchOpenBlasCore("Prescott").ok());
}

TEST(Blas, ARunWithoutCoreTypeGetsTheCpusBestKernels) {
  const std::string best = BestOpenBlasCore(ReadCpuFeatures());
  if (best.empty()) GTEST_SKIP() << "no AVX on this CPU: OpenBLAS's choice stands";
  const Result r = RunLowp("eval --sample 1:8 --weights bf16 --json", 120, "-u OPENBLAS_CORETYPE");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const nlohmann::json j = nlohmann::json::parse(r.output);
  const std::string core = j["blas"]["core"];
  EXPECT_GE(OpenBlasCoreClass(core), OpenBlasCoreClass(best)) << core << " for " << best;
}

}  // namespace
}  // namespace lowp
