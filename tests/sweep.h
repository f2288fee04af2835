// Runs the reference (and optionally the SIMD kernels) against the oracle
// over many float32 inputs on every core, counting mismatches per case and keeping the first few to
// report.
#ifndef LOWP_TESTS_SWEEP_H_
#define LOWP_TESTS_SWEEP_H_

#include <algorithm>
#include <array>
#include <atomic>
#include <bit>
#include <climits>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <iterator>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "formats/packing.h"
#include "formats/reference.h"
#include "kernels/convert.h"
#include "kernels/thread_pool.h"
#include "tests/oracle.h"

namespace lowp::testing {

// Calls body(chunk) for chunk in [0, chunks) on every CPU the process may run on.
inline void ParallelFor(uint32_t chunks, const std::function<void(uint32_t)>& body) {
  std::atomic<uint32_t> next{0};
  const unsigned threads = static_cast<unsigned>(AvailableCpus());
  std::vector<std::thread> pool;
  for (unsigned t = 0; t < threads; ++t) {
    pool.emplace_back([&] {
      for (uint32_t c; (c = next.fetch_add(1)) < chunks;) body(c);
    });
  }
  for (std::thread& t : pool) t.join();
}

inline std::string Describe(const ConvertOptions& o) {
  std::string s = absl::StrCat(RoundingName(o.rounding), "/", OverflowName(o.overflow), "/",
                               SubnormalsName(o.subnormals), "/", NanPolicyName(o.nan));
  if (o.rounding == Rounding::kStochastic) absl::StrAppend(&s, "/seed=", o.seed);
  return s;
}

class SweepResult {
 public:
  explicit SweepResult(size_t cases) : mismatches_(cases) {}
  void Record(size_t c, uint32_t input, uint32_t expected, uint32_t actual) {
    if (mismatches_[c].fetch_add(1) < 3) {
      std::lock_guard<std::mutex> lock(mu_);
      examples_.push_back(absl::StrFormat("case %d: input 0x%08x (%.9g) expected 0x%x got 0x%x", c,
                                          input, std::bit_cast<float>(input), expected, actual));
    }
  }
  uint64_t mismatches(size_t c) const { return mismatches_[c].load(); }
  uint64_t total() const {
    uint64_t t = 0;
    for (const auto& m : mismatches_) t += m.load();
    return t;
  }
  std::string Report() const {
    std::lock_guard<std::mutex> lock(mu_);
    std::string s;
    for (size_t c = 0; c < mismatches_.size(); ++c) {
      if (mismatches_[c] != 0)
        absl::StrAppend(&s, "case ", c, ": ", mismatches_[c].load(), " mismatches\n");
    }
    for (const std::string& e : examples_) absl::StrAppend(&s, e, "\n");
    return s;
  }

 private:
  std::vector<std::atomic<uint64_t>> mismatches_;
  mutable std::mutex mu_;
  std::vector<std::string> examples_;
};

// The expected code for a NaN input under --nan keep-payload: the quiet bit
// set and the top payload bits kept (what x86's conversions do). Formats
// without room for a payload give their canonical NaN.
inline uint32_t ExpectNanKeepingPayload(const Format& f, const Oracle& oracle, float x) {
  if (f.specials != SpecialEncoding::kIeee) return oracle.NanExpected(x);
  const uint32_t bits = std::bit_cast<uint32_t>(x);
  const int m = f.mantissa_bits;
  const uint32_t sign = (bits >> 31) << (f.bits - 1);
  const uint32_t exponent = ((1u << f.exponent_bits) - 1) << m;
  return sign | exponent | (1u << (m - 1)) | ((bits & 0x7FFFFF) >> (23 - m));
}

// Checks the float32 bit patterns bits_at(0), ..., bits_at(n - 1) under
// every case. They should run in increasing order of bit pattern within one
// sign (so that their values are monotonic and the oracle's search costs
// O(1) per input); any order gives the same answers, only slower.
//
// Within one interval between neighbouring values, the oracle's answer for a
// deterministic mode depends only on where x lies against the interval's
// ends and midpoint (and on x's sign, which the interval fixes, since zero is
// one of the values), so the four answers are asked once per interval and
// case and reused; inputs that the oracle treats specially, zeros and float32
// subnormals (daz) and stochastic rounding ask the oracle every time.
//
// The reference is called with the bit pattern b as the element index (for
// stochastic rounding's RandomBits). With `kernel`, kernel->codes[c][k] is
// the SIMD kernels' code for input bits_at(k) under case c, which must equal
// the reference's.
struct KernelAnswers {
  std::vector<std::vector<uint32_t>> codes;
};
template <typename BitsAt>
inline void CheckInputs(const Format& f, const Oracle& oracle,
                        const std::vector<ConvertOptions>& cases, size_t n, BitsAt bits_at,
                        SweepResult* result, const KernelAnswers* kernel = nullptr) {
  ptrdiff_t hint = -1;
  // The interval [lo, hi) whose answers are cached; empty while lo > hi.
  double lo = 1, hi = 0, mid = 0;
  std::vector<std::array<uint32_t, 4>> cached(cases.size());  // exact, below, at, above mid
  const bool deterministic =
      std::none_of(cases.begin(), cases.end(),
                   [](const ConvertOptions& o) { return o.rounding == Rounding::kStochastic; });
  for (size_t k = 0; k < n;) {
    const uint64_t b = bits_at(k);
    const uint32_t bits = static_cast<uint32_t>(b);
    const float x = std::bit_cast<float>(bits);
    const bool tiny = std::fabs(x) < 0x1p-126f;  // zero or a float32 subnormal
    Oracle::Place place;
    const bool in_cached = x >= lo && x < hi && !tiny;
    if (!in_cached) {
      if (std::isfinite(x)) hint = oracle.Locate(x, hint);
      place = oracle.Where(x, hint);
      lo = 1, hi = 0;
      constexpr double kMax = 3.4028234663852886e38;  // largest finite float32
      if (std::isfinite(x) && !tiny && (x >= oracle.above() || x <= oracle.below())) {
        // Past a virtual end: one answer per case for every finite x there.
        lo = x > 0 ? oracle.above() : -kMax;
        hi = x > 0 ? std::nextafter(kMax, HUGE_VAL) : std::nextafter(oracle.below(), HUGE_VAL);
        mid = HUGE_VAL;  // every slot holds the same answer
        for (size_t c = 0; c < cases.size(); ++c) {
          if (cases[c].rounding == Rounding::kStochastic) continue;
          cached[c].fill(oracle.Pick(place, x, cases[c], 0));
        }
      } else if (!place.special && !tiny && hint >= 0) {
        lo = oracle.values()[static_cast<size_t>(hint)];
        hi = static_cast<size_t>(hint) + 1 < oracle.values().size()
                 ? oracle.values()[static_cast<size_t>(hint) + 1]
                 : oracle.above();
        mid = (lo + hi) / 2;
        for (size_t c = 0; c < cases.size(); ++c) {
          if (cases[c].rounding == Rounding::kStochastic) continue;
          Oracle::Place side = place;
          side.exact = true;
          cached[c][0] = oracle.Pick(side, x, cases[c], 0);
          side.exact = false;
          for (int m = -1; m <= 1; ++m) {
            side.versus_mid = m;
            cached[c][static_cast<size_t>(m + 2)] = oracle.Pick(side, x, cases[c], 0);
          }
        }
      }
    }
    const bool cacheable = x >= lo && x < hi && !tiny;
    const size_t slot = x == lo ? 0 : (x < mid ? 1 : (x == mid ? 2 : 3));
    for (size_t c = 0; c < cases.size(); ++c) {
      const ConvertOptions& o = cases[c];
      uint32_t expected;
      if (cacheable && o.rounding != Rounding::kStochastic) {
        expected = cached[c][slot];
      } else if (std::isnan(x) && o.nan == NanPolicy::kKeepPayload) {
        expected = ExpectNanKeepingPayload(f, oracle, x);
      } else {
        if (in_cached) place = oracle.Where(x, hint);
        const uint32_t random = o.rounding == Rounding::kStochastic ? RandomBits(o.seed, b) : 0;
        expected = oracle.Pick(place, x, o, random);
      }
      const uint32_t actual = EncodeFloat32(f, x, o, b);
      if (expected != actual) result->Record(c, bits, expected, actual);
      if (kernel != nullptr && kernel->codes[c][k] != actual) {
        result->Record(c, bits, actual, kernel->codes[c][k]);
      }
    }
    ++k;
    // The inputs after it that lie strictly inside the same open half of the
    // interval (between its low end and the midpoint, or the midpoint and its
    // high end) have the same answers: checked in a tight loop, each input
    // still tested for lying there, so any order of inputs stays correct.
    // This is most of a sweep's inputs, and the sweep's time is then mostly
    // the reference's own.
    if (!deterministic || !cacheable || (slot != 1 && slot != 3)) continue;
    const double from = slot == 1 ? lo : mid;
    const double to = slot == 1 ? std::min(mid, hi) : hi;
    for (; k < n; ++k) {
      const uint64_t run_b = bits_at(k);
      const uint32_t run_bits = static_cast<uint32_t>(run_b);
      const float run_x = std::bit_cast<float>(run_bits);
      if (!(run_x > from && run_x < to) || std::fabs(run_x) < 0x1p-126f) break;
      for (size_t c = 0; c < cases.size(); ++c) {
        const uint32_t expected = cached[c][slot];
        const uint32_t actual = EncodeFloat32(f, run_x, cases[c], run_b);
        if (expected != actual) result->Record(c, run_bits, expected, actual);
        if (kernel != nullptr && kernel->codes[c][k] != actual) {
          result->Record(c, run_bits, actual, kernel->codes[c][k]);
        }
      }
    }
  }
}

// Inputs [begin, end) of the float32 bit patterns, every `stride`-th, which
// must all have one sign; with `kernel` (stride 1 only),
// kernel->codes[c][b - begin] is the kernels' code for input b.
inline void CheckRange(const Format& f, const Oracle& oracle,
                       const std::vector<ConvertOptions>& cases, uint64_t begin, uint64_t end,
                       uint64_t stride, SweepResult* result,
                       const KernelAnswers* kernel = nullptr) {
  CheckInputs(
      f, oracle, cases, static_cast<size_t>((end - begin + stride - 1) / stride),
      [&](size_t k) { return begin + k * stride; }, result, kernel);
}

// The kernels' codes for the float32 inputs `in` (element i with stochastic
// index first_index + i), through EncodeArray's storage (4-bit codes
// packed), on the target dispatch picks.
inline void RunKernelsOn(const Format& f, const std::vector<ConvertOptions>& cases,
                         const std::vector<float>& in, uint64_t first_index, KernelAnswers* k) {
  const size_t n = in.size();
  thread_local std::vector<uint8_t> stored;
  stored.resize(StorageBytes(f, n));
  k->codes.resize(cases.size());
  for (size_t c = 0; c < cases.size(); ++c) {
    if (!EncodeArray(f, in, stored, cases[c], {.first_index = first_index, .threads = 1}).ok()) {
      std::abort();
    }
    std::vector<uint32_t>& codes = k->codes[c];
    codes.resize(n);
    const int unit = f.storage_bits();
    for (size_t i = 0; i < n; ++i) {
      switch (unit) {
        case 4:
          codes[i] = (stored[i / 2] >> (4 * (i % 2))) & 0xF;
          break;
        case 8:
          codes[i] = stored[i];
          break;
        case 16:
          codes[i] = stored[2 * i] | (uint32_t{stored[2 * i + 1]} << 8);
          break;
        default:
          std::memcpy(&codes[i], &stored[4 * i], 4);
      }
    }
  }
}

// The kernels' codes for the float32 bit patterns [begin, begin + n).
inline void RunKernels(const Format& f, const std::vector<ConvertOptions>& cases, uint64_t begin,
                       size_t n, KernelAnswers* k) {
  thread_local std::vector<float> in;
  in.resize(n);
  for (size_t i = 0; i < n; ++i) in[i] = std::bit_cast<float>(static_cast<uint32_t>(begin + i));
  RunKernelsOn(f, cases, in, begin, k);
}

// All 2^32 float32 inputs (every `stride`-th with stride > 1), in 256 chunks.
// With `kernels`, the kernels must also give the reference's code for
// every input.
inline void CheckAllFloat32(const Format& f, const Oracle& oracle,
                            const std::vector<ConvertOptions>& cases, uint64_t stride,
                            SweepResult* result, bool kernels = false) {
  constexpr uint64_t kBlock = uint64_t{1} << 16;
  ParallelFor(256, [&](uint32_t chunk) {
    const uint64_t begin = uint64_t{chunk} << 24;
    const uint64_t end = begin + (uint64_t{1} << 24);
    if (!kernels || stride != 1) {
      CheckRange(f, oracle, cases, begin, end, stride, result);
      return;
    }
    KernelAnswers answers;
    for (uint64_t b = begin; b < end; b += kBlock) {
      RunKernels(f, cases, b, kBlock, &answers);
      CheckRange(f, oracle, cases, b, b + kBlock, 1, result, &answers);
    }
  });
}

// The i-th input of the 1-in-`stride` sample of all 2^32 float32 bit
// patterns (stride a power of two, at most 2^24): i * stride + h(i), h(i)
// the top log2(stride) bits of i * 0x9E3779B97F4A7C15 (Fibonacci hashing).
// The high bits run through every value (every sign, exponent and top
// mantissa pattern, once each), and the low bits below the stride, which a
// plain i * stride would leave zero, take values spread evenly and
// independently of any group of the high bits, so the sample also holds
// inputs whose only nonzero dropped bits are the lowest ones (sticky bits).
// (An offset that is a function of i mod stride, such as 37 i mod stride,
// is zero whenever input bits log2(stride) .. 2 log2(stride) - 1 are, so
// with it those inputs keep their low bits zero: a toward-positive that
// ignored the lowest 6 dropped bits passed 1 in 64 of fp16's inputs with
// 37 i mod 64 and failed with this hash.)
inline uint32_t StridedInput(uint64_t i, uint64_t stride) {
  const int shift = std::countr_zero(stride);
  const uint64_t offset = shift == 0 ? 0 : (i * 0x9E3779B97F4A7C15u) >> (64 - shift);
  return static_cast<uint32_t>(i * stride + offset);
}

// The union of `listed` (sorted, no repeats) and the 1-in-`stride` sample of
// StridedInput, each input once, in bit-pattern order: the reference against
// the oracle and, with `kernels`, the kernels against the reference on every
// one. Deterministic modes only (the kernels' stochastic index would not be
// the bit pattern). Returns how many inputs each case was checked on.
inline uint64_t CheckSampledFloat32(const Format& f, const Oracle& oracle,
                                    const std::vector<ConvertOptions>& cases,
                                    const std::vector<uint32_t>& listed, uint64_t stride,
                                    SweepResult* result, bool kernels) {
  for (const ConvertOptions& o : cases) {
    if (o.rounding == Rounding::kStochastic) std::abort();
  }
  constexpr uint64_t kChunk = uint64_t{1} << 24;
  constexpr size_t kBlock = size_t{1} << 16;
  std::atomic<uint64_t> checked{0};
  ParallelFor(256, [&](uint32_t chunk) {
    const uint64_t begin = uint64_t{chunk} * kChunk;
    std::vector<uint32_t> strided;
    for (uint64_t i = begin / stride; i < (begin + kChunk) / stride; ++i) {
      strided.push_back(StridedInput(i, stride));
    }
    const auto first = std::lower_bound(listed.begin(), listed.end(), begin);
    const auto last = std::lower_bound(first, listed.end(), begin + kChunk);
    std::vector<uint32_t> inputs;
    inputs.reserve(strided.size() + static_cast<size_t>(last - first));
    std::set_union(strided.begin(), strided.end(), first, last, std::back_inserter(inputs));
    checked += inputs.size();
    KernelAnswers answers;
    std::vector<float> in;
    for (size_t at = 0; at < inputs.size(); at += kBlock) {
      const size_t n = std::min(kBlock, inputs.size() - at);
      const auto bits_at = [&](size_t k) { return uint64_t{inputs[at + k]}; };
      if (!kernels) {
        CheckInputs(f, oracle, cases, n, bits_at, result);
        continue;
      }
      in.resize(n);
      for (size_t k = 0; k < n; ++k) in[k] = std::bit_cast<float>(inputs[at + k]);
      RunKernelsOn(f, cases, in, 0, &answers);
      CheckInputs(f, oracle, cases, n, bits_at, result, &answers);
    }
  });
  return checked.load();
}

}  // namespace lowp::testing

#endif  // LOWP_TESTS_SWEEP_H_
