// The BLAS behind the forward pass's matrix products: Debian's OpenBLAS
// (0.3.21, built with DYNAMIC_ARCH: it picks its kernels for the CPU when it
// loads), called on one BLAS thread at a time (lowp's pool splits the
// products, model/gemm.h).
//
// OpenBLAS 0.3.21 picks its SSE3 kernels ("Prescott") on CPUs its table does
// not know, whatever instructions they have: on a recent Xeon or an AMD Zen 5
// that is a fifth of the machine. BlasSetup() compares the kernels OpenBLAS
// chose with the best the CPU's instructions allow (cpuid, and the operating
// system's support for the registers) and, where OpenBLAS chose worse and the
// user did not set OPENBLAS_CORETYPE, switches it to those kernels in
// process (OpenBLAS's own gotoblas_dynamic_init, as if OPENBLAS_CORETYPE had
// been set when it loaded: the products are the same bits as that). The
// user's OPENBLAS_CORETYPE always wins; tests that compare bits set it.
#ifndef LOWP_MODEL_BLAS_H_
#define LOWP_MODEL_BLAS_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace lowp {

// What runs the products, for reports and benchmarks.
struct BlasKernels {
  std::string library;   // openblas_get_config(): "OpenBLAS 0.3.21 NO_LAPACKE DYNAMIC_ARCH ..."
  std::string core;      // the kernels in use: "Cooperlake", "Haswell", ...
  std::string cpu_best;  // the best kernels for the CPU's instructions ("" when unknown)
  // Who chose `core`, in words: "OpenBLAS's choice" (as good as the CPU
  // allows), "OPENBLAS_CORETYPE" (the user), "lowp's choice: OpenBLAS chose
  // Prescott, below this CPU's" (switched), or "OpenBLAS's choice; SkylakeX
  // would suit this CPU, but ..." when switching was not possible.
  std::string chosen_by;
};

// Sets OpenBLAS to one thread and its best kernels, once per process (every
// product of lowp calls it first); later calls return the same description.
const BlasKernels& BlasSetup();

// The x86 instructions that decide OpenBLAS's kernels, each usable (the CPU
// has it and the operating system saves its registers).
struct CpuFeatures {
  bool intel = false;  // GenuineIntel (else AMD or another vendor)
  bool avx = false;
  bool avx2_fma = false;  // AVX2 and FMA3
  bool avx512 = false;    // AVX-512 F, CD, BW, DQ and VL
  bool avx512_bf16 = false;
};
CpuFeatures ReadCpuFeatures();

// OpenBLAS's name for the best kernels `cpu` can run: "Cooperlake" (AVX-512
// with BF16), "SkylakeX" (AVX-512), "Haswell" (AVX2 and FMA; "Zen" on AMD),
// "Sandybridge" (AVX), or "" (leave OpenBLAS's choice).
std::string BestOpenBlasCore(const CpuFeatures& cpu);

// The instruction-set class of an OpenBLAS core name, for comparing two:
// 0 unknown, 1 SSE, 2 AVX, 3 AVX2 + FMA, 4 AVX-512.
int OpenBlasCoreClass(absl::string_view core);

// Switches OpenBLAS's kernels to `core` (an OpenBLAS core name) now. No
// product may run during the call. FailedPrecondition when this OpenBLAS
// cannot switch (not a DYNAMIC_ARCH build) or ends on another core.
absl::Status SwitchOpenBlasCore(const std::string& core);

// C[m, n] = alpha A[m, k] op(B), row-major, on the calling thread: op(B) =
// B^T for B stored [n, k] (a weight matrix), else B stored [k, n].
void Sgemm(bool b_transposed, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
           int64_t lda, const float* b, int64_t ldb, float* c, int64_t ldc);

}  // namespace lowp

#endif  // LOWP_MODEL_BLAS_H_
