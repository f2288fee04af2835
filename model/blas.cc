#include "model/blas.h"

#include <cblas.h>
#include <dlfcn.h>

#include <cstdlib>
#include <mutex>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"

extern "C" {
// OpenBLAS's own descriptions (cblas.h declares them in 0.3.21; declared
// again here so that the contract is visible).
char* openblas_get_config(void);
char* openblas_get_corename(void);
}

namespace lowp {
namespace {

#if defined(__x86_64__) || defined(__i386__)
// XCR0: which register states the operating system saves.
uint64_t Xgetbv() {
  uint32_t eax = 0, edx = 0;
  __asm__ volatile("xgetbv" : "=a"(eax), "=d"(edx) : "c"(0));
  return (static_cast<uint64_t>(edx) << 32) | eax;
}
#endif

// OpenBLAS's DYNAMIC_ARCH entry points: gotoblas_dynamic_quit() forgets the
// kernel table, gotoblas_dynamic_init() picks one again, reading
// OPENBLAS_CORETYPE as it does when the library loads. Looked up at run time:
// a build without DYNAMIC_ARCH has neither.
using DynamicFn = void (*)();

}  // namespace

CpuFeatures ReadCpuFeatures() {
  CpuFeatures f;
#if defined(__x86_64__) || defined(__i386__)
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (__get_cpuid(0, &a, &b, &c, &d) == 0) return f;
  const unsigned max_leaf = a;
  f.intel = b == 0x756e6547 && d == 0x49656e69 && c == 0x6c65746e;  // "GenuineIntel"
  __get_cpuid(1, &a, &b, &c, &d);
  const bool osxsave = (c >> 27) & 1, fma = (c >> 12) & 1;
  if (!osxsave || !((c >> 28) & 1)) return f;
  const uint64_t xcr0 = Xgetbv();
  if ((xcr0 & 0x6) != 0x6) return f;  // SSE and AVX state
  f.avx = true;
  if (max_leaf < 7) return f;
  __get_cpuid_count(7, 0, &a, &b, &c, &d);
  f.avx2_fma = ((b >> 5) & 1) && fma;
  const bool avx512 = ((b >> 16) & 1) && ((b >> 17) & 1) && ((b >> 28) & 1) && ((b >> 30) & 1) &&
                      ((b >> 31) & 1);         // F, DQ, CD, BW, VL
  f.avx512 = avx512 && (xcr0 & 0xE0) == 0xE0;  // opmask, ZMM upper halves, ZMM16-31
  unsigned a1 = 0, b1 = 0, c1 = 0, d1 = 0;
  __get_cpuid_count(7, 1, &a1, &b1, &c1, &d1);
  f.avx512_bf16 = f.avx512 && ((a1 >> 5) & 1);
#endif
  return f;
}

std::string BestOpenBlasCore(const CpuFeatures& cpu) {
  if (cpu.avx512) return cpu.avx512_bf16 ? "Cooperlake" : "SkylakeX";
  if (cpu.avx2_fma) return cpu.intel ? "Haswell" : "Zen";
  if (cpu.avx) return "Sandybridge";
  return "";
}

int OpenBlasCoreClass(absl::string_view core) {
  const std::string c = absl::AsciiStrToLower(core);
  for (const char* name : {"skylakex", "cooperlake", "sapphirerapids"}) {
    if (c == name) return 4;
  }
  for (const char* name : {"haswell", "zen"}) {
    if (c == name) return 3;
  }
  for (const char* name : {"sandybridge", "bulldozer", "piledriver", "steamroller", "excavator"}) {
    if (c == name) return 2;
  }
  for (const char* name :
       {"prescott", "core2", "penryn", "dunnington", "nehalem", "atom", "opteron", "opteron_sse3",
        "barcelona", "bobcat", "nano", "katmai", "coppermine", "northwood", "banias", "athlon"}) {
    if (c == name) return 1;
  }
  return 0;
}

absl::Status SwitchOpenBlasCore(const std::string& core) {
  const auto quit = reinterpret_cast<DynamicFn>(dlsym(RTLD_DEFAULT, "gotoblas_dynamic_quit"));
  const auto init = reinterpret_cast<DynamicFn>(dlsym(RTLD_DEFAULT, "gotoblas_dynamic_init"));
  if (quit == nullptr || init == nullptr) {
    return absl::FailedPreconditionError(
        "this OpenBLAS has no gotoblas_dynamic_init (not a DYNAMIC_ARCH build)");
  }
  // The variable is read inside init and put back as it was: the process's
  // environment (and its children's) stays the user's.
  const char* before = std::getenv("OPENBLAS_CORETYPE");
  const std::string saved = before != nullptr ? before : "";
  setenv("OPENBLAS_CORETYPE", core.c_str(), 1);
  quit();
  init();
  if (before != nullptr) {
    setenv("OPENBLAS_CORETYPE", saved.c_str(), 1);
  } else {
    unsetenv("OPENBLAS_CORETYPE");
  }
  const std::string now = openblas_get_corename();
  if (absl::AsciiStrToLower(now) != absl::AsciiStrToLower(core)) {
    return absl::FailedPreconditionError(
        absl::StrCat("OpenBLAS runs ", now, " kernels after asking for ", core));
  }
  return absl::OkStatus();
}

const BlasKernels& BlasSetup() {
  static const BlasKernels* const kernels = [] {
    auto* k = new BlasKernels;
    openblas_set_num_threads(1);
    k->cpu_best = BestOpenBlasCore(ReadCpuFeatures());
    const std::string chosen = openblas_get_corename();
    if (std::getenv("OPENBLAS_CORETYPE") != nullptr) {
      k->chosen_by = "OPENBLAS_CORETYPE";
    } else if (!k->cpu_best.empty() && OpenBlasCoreClass(chosen) < OpenBlasCoreClass(k->cpu_best)) {
      const absl::Status s = SwitchOpenBlasCore(k->cpu_best);
      k->chosen_by =
          s.ok() ? absl::StrCat("lowp's choice: OpenBLAS chose ", chosen, ", below this CPU's")
                 : absl::StrCat("OpenBLAS's choice; ", k->cpu_best, " would suit this CPU, but ",
                                s.message());
    } else {
      k->chosen_by = "OpenBLAS's choice";
    }
    k->core = openblas_get_corename();
    k->library = openblas_get_config();
    return k;
  }();
  return *kernels;
}

void Sgemm(bool b_transposed, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
           int64_t lda, const float* b, int64_t ldb, float* c, int64_t ldc) {
  if (m == 0 || n == 0) return;
  cblas_sgemm(CblasRowMajor, CblasNoTrans, b_transposed ? CblasTrans : CblasNoTrans,
              static_cast<blasint>(m), static_cast<blasint>(n), static_cast<blasint>(k), alpha, a,
              static_cast<blasint>(lda), b, static_cast<blasint>(ldb), 0.0f, c,
              static_cast<blasint>(ldc));
}

}  // namespace lowp
