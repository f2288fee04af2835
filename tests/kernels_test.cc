// The SIMD kernels against the scalar reference, on every Highway target
// this CPU supports: every format x rounding mode x policy on the inputs
// where rounding decisions change, all 2^16 fp16/bf16 inputs, every code's
// decoding, lengths and alignments, in place, thread counts, the fused
// measurement and misuse. The long sweeps are kernels_exhaustive_test.
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "formats/format.h"
#include "formats/packing.h"
#include "formats/reference.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "hwy/targets.h"
#include "kernels/convert.h"
#include "kernels/dispatch.h"
#include "tests/inputs.h"
#include "tests/oracle.h"
#include "tests/sweep.h"

namespace lowp::testing {
namespace {

using ::testing::HasSubstr;

// Runs body() once per Highway target that this binary has and this CPU runs.
template <class Body>
void ForEachTarget(Body body) {
  for (int64_t target : hwy::SupportedAndGeneratedTargets()) {
    hwy::SetSupportedTargetsForTest(target);
    SCOPED_TRACE(hwy::TargetName(target));
    body(std::string(hwy::TargetName(target)));
  }
  hwy::SetSupportedTargetsForTest(0);
}

const std::vector<std::string>& FormatNames() {
  static const auto* names = new std::vector<std::string>{"fp32",
                                                          "tf32",
                                                          "fp16",
                                                          "bf16",
                                                          "fp8_e4m3fn",
                                                          "fp8_e5m2",
                                                          "fp8_e4m3fnuz",
                                                          "fp8_e5m2fnuz",
                                                          "fp8_e4m3b11fnuz",
                                                          "fp6_e2m3fn",
                                                          "fp6_e3m2fn",
                                                          "fp4_e2m1fn",
                                                          "e8m0fnu",
                                                          "int8",
                                                          "uint8",
                                                          "int4",
                                                          "uint4",
                                                          "e3m4",
                                                          "e2m5fn",
                                                          "e6m1fnuz",
                                                          "float(e=3,m=0,inf=fn)",
                                                          "float(e=4,m=3,bias=3,inf=none)",
                                                          "int3",
                                                          "uint12",
                                                          "int16",
                                                          "e6m9"};
  return *names;
}

std::string TestName(const std::string& name) {
  std::string out;
  for (char c : name) out += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
  return out;
}

std::vector<uint32_t> Unpacked(const Format& f, const std::vector<uint8_t>& bytes, size_t n) {
  std::vector<uint32_t> codes;
  EXPECT_TRUE(UnpackCodes(f, bytes, 0, &codes).ok());
  codes.resize(n);
  return codes;
}

TEST(Targets, DispatchFollowsTheChosenTarget) {
  std::vector<std::string> seen;
  ForEachTarget([&](const std::string& name) {
    EXPECT_EQ(KernelTarget(), name);
    seen.push_back(name);
  });
  EXPECT_GE(seen.size(), 2u) << "expected a SIMD target and the scalar fallback";
}

// Which targets this binary runs here (the log says), and in the sanitized
// build exactly the two it is compiled for (CMakeLists.txt, LOWP_SANITIZE).
TEST(Targets, CompiledTargets) {
  std::string names;
  for (int64_t target : hwy::SupportedAndGeneratedTargets()) {
    names += std::string(names.empty() ? "" : " ") + hwy::TargetName(target);
  }
  std::printf("targets run on this CPU: %s\n", names.c_str());
#ifdef LOWP_SANITIZE
  EXPECT_EQ(HWY_TARGETS, HWY_AVX2 | HWY_SCALAR);
  if (hwy::SupportedTargets() & HWY_AVX2) EXPECT_EQ(names, "AVX2 SCALAR");
#endif
}

// Formats of up to 16 bits: the boundary inputs (every value and midpoint, 4
// ulps either side). Wider ones (fp32, tf32), whose boundaries are too many:
// random values and midpoints with 2 ulps either side, and every 65537th bit
// pattern.
std::vector<uint32_t> SampledInputs(const Format& f) {
  if (f.bits <= 16) {
    std::vector<uint32_t> inputs = BoundaryInputs(Oracle(f), 65537);
#ifdef LOWP_SANITIZE
    // Under the sanitizers the 16-bit formats' millions of boundary inputs
    // took 100-175 s each (590 s of the stage's 650): every 32nd of them
    // drives the same code, and the normal build checks them all.
    if (f.bits > 8) {
      std::vector<uint32_t> kept;
      for (size_t i = 0; i < inputs.size(); i += 32) kept.push_back(inputs[i]);
      return kept;
    }
#endif
    return inputs;
  }
  std::vector<uint32_t> inputs;
  for (uint64_t b = 0; b < (uint64_t{1} << 32); b += 65537)
    inputs.push_back(static_cast<uint32_t>(b));
  std::mt19937 rng(17);
  const int drop = 23 - f.mantissa_bits;
  for (int i = 0; i < 20000 && drop > 0; ++i) {
    const uint32_t value = static_cast<uint32_t>(rng()) >> drop << drop;
    const uint32_t mid = value | (1u << (drop - 1));
    for (uint32_t d = 0; d <= 2; ++d) {
      for (uint32_t anchor : {value, mid}) {
        inputs.push_back(anchor + d);
        inputs.push_back(anchor - d);
      }
    }
  }
  for (uint32_t special : {0x00000000u, 0x80000000u, 0x7F800000u, 0xFF800000u, 0x7FC00000u,
                           0xFFC00001u, 0x7F800001u, 0x00000001u, 0x807FFFFFu, 0x7F7FFFFFu}) {
    inputs.push_back(special);
  }
  return inputs;
}

class EveryFormat : public ::testing::TestWithParam<std::string> {};

// Each case's reference codes and events are computed once and every target
// must reproduce them, through both entry points: unpacked codes with events,
// and EncodeArray's packed storage.
TEST_P(EveryFormat, EveryModeAndPolicyOnBoundaryInputs) {
  const Format f = *FindFormat(GetParam());
  std::vector<uint32_t> bits = SampledInputs(f);
  std::vector<float> in(bits.size());
  std::memcpy(in.data(), bits.data(), bits.size() * 4);
  const size_t n = in.size();
  std::vector<ConvertOptions> cases;
  for (const ConvertOptions& o : AllCases(f)) {
    if (ValidateOptions(f, o).ok()) cases.push_back(o);
  }
  std::vector<std::vector<uint32_t>> codes(cases.size(), std::vector<uint32_t>(n));
  std::vector<std::vector<uint32_t>> events(cases.size(), std::vector<uint32_t>(n));
  std::vector<std::vector<float>> decoded(cases.size(), std::vector<float>(n));
  ParallelFor(static_cast<uint32_t>(cases.size()), [&](uint32_t c) {
    for (size_t i = 0; i < n; ++i) {
      codes[c][i] = EncodeFloat32(f, in[i], cases[c], i, &events[c][i]);
      decoded[c][i] = DecodeToFloat32(f, codes[c][i]);
    }
  });
  ForEachTarget([&](const std::string&) {
    std::vector<int> bad(cases.size());
    ParallelFor(static_cast<uint32_t>(cases.size()), [&](uint32_t c) {
      const kernels::EncodePlan plan =
          kernels::MakeEncodePlan(f, cases[c], kernels::Source::kFloat32);
      std::vector<uint32_t> got(n), got_events(n);
      kernels::DispatchEncodeWithEvents(plan, in.data(), n, 0, got.data(), got_events.data());
      std::vector<uint8_t> stored(StorageBytes(f, n));
      const absl::Status s = EncodeArray(f, in, stored, cases[c], {.threads = 1});
      const std::vector<uint32_t> unpacked = Unpacked(f, stored, n);
      // One-pass rounding: the reference's decoded value, bit for bit.
      std::vector<float> rounded(n);
      const absl::Status r = RoundArray(f, in, rounded, cases[c], {.threads = 1});
      for (size_t i = 0; i < n && bad[c] < 3; ++i) {
        const float want = decoded[c][i];
        if (!r.ok() || std::bit_cast<uint32_t>(rounded[i]) != std::bit_cast<uint32_t>(want)) {
          ++bad[c];
          ADD_FAILURE() << f.name << " " << Describe(cases[c]) << " input 0x" << std::hex << bits[i]
                        << ": RoundArray 0x" << std::bit_cast<uint32_t>(rounded[i])
                        << ", the reference's decoded code 0x" << std::bit_cast<uint32_t>(want);
        }
      }
      for (size_t i = 0; i < n && bad[c] < 3; ++i) {
        if (got[i] != codes[c][i] || got_events[i] != events[c][i] || unpacked[i] != codes[c][i]) {
          ++bad[c];
          ADD_FAILURE() << f.name << " " << Describe(cases[c]) << " input 0x" << std::hex << bits[i]
                        << " (" << in[i] << "): reference 0x" << codes[c][i] << " events 0x"
                        << events[c][i] << "; kernel 0x" << got[i] << " events 0x" << got_events[i]
                        << "; stored 0x" << unpacked[i] << (s.ok() ? "" : " !ok");
        }
      }
    });
  });
}

// All 65536 fp16 and bf16 inputs, converted to this format.
TEST_P(EveryFormat, SixteenBitInputs) {
  const Format to = *FindFormat(GetParam());
  std::vector<uint16_t> in(65536);
  for (uint32_t i = 0; i < 65536; ++i) in[i] = static_cast<uint16_t>(i);
  std::vector<ConvertOptions> cases = {
      {},
      {.rounding = Rounding::kStochastic, .seed = 7},
      {.rounding = Rounding::kTowardNegative,
       .overflow = Overflow::kSaturate,
       .subnormals = Subnormals::kFlushBoth,
       .nan = NanPolicy::kKeepPayload},
      {.rounding = Rounding::kNearestAway, .subnormals = Subnormals::kInputsAreZero},
      {.rounding = Rounding::kOdd, .subnormals = Subnormals::kFlushToZero},
  };
  for (const char* from_name : {"fp16", "bf16"}) {
    const Format from = *FindFormat(from_name);
    for (const ConvertOptions& o : cases) {
      std::vector<uint32_t> expected(in.size());
      for (size_t i = 0; i < in.size(); ++i) expected[i] = ConvertCode(from, in[i], to, o, 100 + i);
      ForEachTarget([&](const std::string&) {
        std::vector<uint8_t> out(StorageBytes(to, in.size()));
        ASSERT_TRUE(EncodeArray16(from, in, to, out, o, {.first_index = 100}).ok());
        const std::vector<uint32_t> got = Unpacked(to, out, in.size());
        int bad = 0;
        for (size_t i = 0; i < in.size() && bad < 3; ++i) {
          if (got[i] != expected[i]) {
            ++bad;
            ADD_FAILURE() << from_name << " 0x" << std::hex << i << " -> " << to.name << " "
                          << Describe(o) << ": reference 0x" << expected[i] << " kernel 0x"
                          << got[i];
          }
        }
      });
    }
  }
}

// Every code (a sample of 2^20 for 32-bit formats) decodes to the
// reference's float32 bits, NaN payloads included.
TEST_P(EveryFormat, DecodesEveryCode) {
  const Format f = *FindFormat(GetParam());
  std::vector<uint32_t> codes;
  if (f.bits <= 16) {
    for (uint32_t c = 0; c <= f.code_mask(); ++c) codes.push_back(c);
  } else {
    std::mt19937 rng(1);
    for (int i = 0; i < (1 << 20); ++i) codes.push_back(rng() & f.code_mask());
    for (uint32_t c : {0u, f.sign_mask(), f.code_mask(), f.max_finite_magnitude(), 1u})
      codes.push_back(c);
  }
  std::vector<uint8_t> bytes;
  PackCodes(f, codes, &bytes);
  ForEachTarget([&](const std::string&) {
    std::vector<float> out(codes.size());
    ASSERT_TRUE(DecodeArray(f, bytes, out).ok());
    int bad = 0;
    for (size_t i = 0; i < codes.size() && bad < 3; ++i) {
      const uint32_t expected = std::bit_cast<uint32_t>(DecodeToFloat32(f, codes[i]));
      if (std::bit_cast<uint32_t>(out[i]) != expected) {
        ++bad;
        ADD_FAILURE() << f.name << " code 0x" << std::hex << codes[i] << ": reference 0x"
                      << expected << " kernel 0x" << std::bit_cast<uint32_t>(out[i]);
      }
    }
  });
}

// The fused measurement equals the same quantities computed from the
// reference's codes, events and decoded values.
TEST_P(EveryFormat, MeasurementMatchesReference) {
  const Format f = *FindFormat(GetParam());
  std::mt19937 rng(3);
  std::vector<float> in(20000);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (size_t i = 0; i < in.size(); ++i) {
    const float scale = std::ldexp(1.0f, static_cast<int>(rng() % 60) - 30);
    in[i] = normal(rng) * scale;
  }
  for (float special :
       {0.0f, -0.0f, std::numeric_limits<float>::infinity(),
        -std::numeric_limits<float>::infinity(), std::numeric_limits<float>::quiet_NaN(), 1e-40f,
        -3e38f, 3e38f, 2.5f, -1e-3f, 7.0f}) {
    in.push_back(special);  // and 20011 elements: a partial last vector
  }
  for (const ConvertOptions& o :
       {ConvertOptions{}, ConvertOptions{.rounding = Rounding::kStochastic, .seed = 5},
        ConvertOptions{.overflow = Overflow::kSaturate, .subnormals = Subnormals::kFlushBoth}}) {
    if (!ValidateOptions(f, o).ok()) continue;
    ConversionError expected;
    for (size_t i = 0; i < in.size(); ++i) {
      uint32_t ev = 0;
      const uint32_t code = EncodeFloat32(f, in[i], o, i, &ev);
      const float q = DecodeToFloat32(f, code);
      kernels::Accumulate(&in[i], &q, &ev, 1, &expected);
      ++expected.error.count;
    }
    ForEachTarget([&](const std::string&) {
      const absl::StatusOr<ConversionError> got = MeasureArray(f, in, o);
      ASSERT_TRUE(got.ok()) << got.status();
      EXPECT_EQ(got->error.count, expected.error.count);
      EXPECT_EQ(got->error.nan_inputs, expected.error.nan_inputs);
      EXPECT_EQ(got->error.inf_inputs, expected.error.inf_inputs);
      EXPECT_EQ(got->inexact, expected.inexact);
      EXPECT_EQ(got->overflow, expected.overflow);
      EXPECT_EQ(got->saturated, expected.saturated);
      EXPECT_EQ(got->flushed, expected.flushed);
      EXPECT_EQ(got->underflow, expected.underflow);
      EXPECT_EQ(got->nan_replaced, expected.nan_replaced);
      EXPECT_EQ(got->error.measured, expected.error.measured);
      EXPECT_EQ(got->error.nonfinite_outputs, expected.error.nonfinite_outputs);
      EXPECT_EQ(got->error.count, got->error.nan_inputs + got->error.inf_inputs +
                                      got->error.nonfinite_outputs + got->error.measured);
      EXPECT_EQ(got->error.max_abs_error, expected.error.max_abs_error);
      // Sums in another order: equal to a relative 1e-12.
      EXPECT_NEAR(got->error.sum_squared_error, expected.error.sum_squared_error,
                  1e-12 * expected.error.sum_squared_error);
      EXPECT_NEAR(got->error.sum_squared_input, expected.error.sum_squared_input,
                  1e-12 * expected.error.sum_squared_input);
    });
  }
}

// Every element overflows: nothing is measured and every element is counted
// as a non-finite result, so no reader takes the empty sums for a perfect
// score (issue 29).
TEST(MeasureArray, CountsEveryOverflowAsNonFinite) {
  const std::vector<float> in(1000, 1e6f);  // beyond fp8_e4m3fn's 448 and fp16's 65504
  for (const char* name : {"fp8_e4m3fn", "fp8_e5m2", "fp16"}) {
    SCOPED_TRACE(name);
    ForEachTarget([&](const std::string&) {
      const absl::StatusOr<ConversionError> got = MeasureArray(*FindFormat(name), in);
      ASSERT_TRUE(got.ok()) << got.status();
      EXPECT_EQ(got->error.nonfinite_outputs, in.size());
      EXPECT_EQ(got->error.measured, 0u);
      EXPECT_EQ(got->error.sum_squared_error, 0);
    });
  }
}

INSTANTIATE_TEST_SUITE_P(Formats, EveryFormat, ::testing::ValuesIn(FormatNames()),
                         [](const auto& info) { return TestName(info.param); });

std::vector<float> MixedInputs(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<float> v(n);
  for (float& x : v) {
    const uint32_t r = rng();
    // Mostly values near 1 with occasional extremes, NaN and infinity.
    x = (r & 7) == 0 ? std::bit_cast<float>(static_cast<uint32_t>(rng()))
                     : std::ldexp(float(r % 10000) / 777.0f - 6, -3);
  }
  return v;
}

// Every length up to several vectors plus one, at every misalignment.
TEST(Shapes, LengthsAndAlignments) {
  const size_t max_lanes = 64 / 4;  // AVX-512
  for (const char* name :
       {"fp4_e2m1fn", "int4", "fp8_e4m3fn", "fp6_e3m2fn", "fp16", "bf16", "tf32", "e8m0fnu"}) {
    const Format f = *FindFormat(name);
    const ConvertOptions o{.rounding = Rounding::kStochastic, .seed = 11};
    ForEachTarget([&](const std::string&) {
      for (size_t n = 0; n <= 4 * max_lanes + 1; ++n) {
        for (size_t shift = 0; shift < 4; ++shift) {
          std::vector<float> storage(n + 1);
          const std::vector<float> values = MixedInputs(n, static_cast<uint32_t>(n));
          // An input that starts `shift` bytes past a float boundary.
          std::vector<uint8_t> raw(n * 4 + 4);
          if (n > 0) std::memcpy(raw.data() + shift, values.data(), n * 4);  // data() may be null
          const float* in = reinterpret_cast<const float*>(raw.data() + shift);
          std::vector<uint8_t> out(StorageBytes(f, n) + 4, 0xAB);
          std::span<uint8_t> dest(out.data() + shift, StorageBytes(f, n));
          ASSERT_TRUE(EncodeArray(f, {in, n}, dest, o).ok());
          std::vector<uint32_t> expected;
          for (size_t i = 0; i < n; ++i) expected.push_back(EncodeFloat32(f, values[i], o, i));
          std::vector<uint8_t> packed;
          PackCodes(f, expected, &packed);
          ASSERT_EQ(std::vector<uint8_t>(dest.begin(), dest.end()), packed) << name << " n=" << n;
          for (size_t k = 0; k < shift; ++k) ASSERT_EQ(out[k], 0xAB) << "wrote before the output";
          for (size_t k = shift + dest.size(); k < out.size(); ++k)
            ASSERT_EQ(out[k], 0xAB) << "wrote past the output";
          // And back, from the same misaligned bytes.
          std::vector<uint8_t> back_raw(n * 4 + 4);
          std::span<float> back(reinterpret_cast<float*>(back_raw.data() + shift), n);
          ASSERT_TRUE(DecodeArray(f, dest, back).ok());
          for (size_t i = 0; i < n; ++i) {
            float b;
            std::memcpy(&b, back_raw.data() + shift + 4 * i, 4);
            ASSERT_EQ(std::bit_cast<uint32_t>(b),
                      std::bit_cast<uint32_t>(DecodeToFloat32(f, expected[i])));
          }
        }
      }
    });
  }
}

TEST(Shapes, InPlaceNarrowingEqualsOutOfPlace) {
  for (const char* name : {"fp8_e5m2", "fp16", "fp4_e2m1fn", "tf32"}) {
    const Format f = *FindFormat(name);
    const std::vector<float> values = MixedInputs(100003, 5);
    std::vector<uint8_t> expected(StorageBytes(f, values.size()));
    ASSERT_TRUE(EncodeArray(f, values, expected).ok());
    std::vector<float> buffer = values;
    std::span<uint8_t> out(reinterpret_cast<uint8_t*>(buffer.data()), expected.size());
    ASSERT_TRUE(EncodeArray(f, buffer, out).ok());
    EXPECT_EQ(std::vector<uint8_t>(out.begin(), out.end()), expected) << name;
  }
}

TEST(Threads, OneTwoThreeThreadsAndPiecesGiveIdenticalBytes) {
  const std::vector<float> values = MixedInputs(3'000'017, 9);
  for (const char* name : {"fp8_e4m3fn", "int4", "bf16"}) {
    const Format f = *FindFormat(name);
    const ConvertOptions o{.rounding = Rounding::kStochastic, .seed = 0x123456789ull};
    std::vector<uint8_t> one(StorageBytes(f, values.size()));
    ASSERT_TRUE(EncodeArray(f, values, one, o, {.first_index = 1ull << 33, .threads = 1}).ok());
    for (int threads : {2, 3}) {
      std::vector<uint8_t> many(one.size());
      ASSERT_TRUE(
          EncodeArray(f, values, many, o, {.first_index = 1ull << 33, .threads = threads}).ok());
      EXPECT_EQ(many, one) << name << " threads=" << threads;
    }
    // Two pieces with first_index set give the bytes of the whole.
    const size_t half = 1'500'000;
    std::vector<uint8_t> pieces(one.size());
    ASSERT_TRUE(EncodeArray(f, std::span(values).first(half),
                            std::span(pieces).first(StorageBytes(f, half)), o,
                            {.first_index = 1ull << 33})
                    .ok());
    ASSERT_TRUE(EncodeArray(f, std::span(values).subspan(half),
                            std::span(pieces).subspan(StorageBytes(f, half)), o,
                            {.first_index = (1ull << 33) + half})
                    .ok());
    EXPECT_EQ(pieces, one) << name;
    for (int threads : {1, 2, 3}) {
      const auto m = MeasureArray(f, values, o, {.threads = threads});
      ASSERT_TRUE(m.ok());
      const auto m1 = MeasureArray(f, values, o, {.threads = 1});
      EXPECT_EQ(m->inexact, m1->inexact);
      EXPECT_EQ(m->error.max_abs_error, m1->error.max_abs_error);
      EXPECT_NEAR(m->error.sum_squared_error, m1->error.sum_squared_error, 1e-9 * m1->error.sum_squared_error);
    }
  }
}

// Outputs of 32 MiB and more take non-temporal stores after an aligning head
// (fp16 and bf16 encoding, decoding): the bytes must not change, at any
// output alignment (an odd address cannot be aligned and streams nothing).
TEST(Streaming, LargeArraysGiveTheReferenceBytes) {
  const size_t n = (size_t{32} << 20) / 2 + 1001;
  const std::vector<float> values = MixedInputs(n, 13);
  for (const char* name : {"fp16", "bf16"}) {
    const Format f = *FindFormat(name);
    std::vector<uint8_t> expected(2 * n);
    for (size_t i = 0; i < n; ++i) {
      const uint32_t code = EncodeFloat32(f, values[i]);
      expected[2 * i] = static_cast<uint8_t>(code);
      expected[2 * i + 1] = static_cast<uint8_t>(code >> 8);
    }
    for (size_t shift : {0, 1, 2, 6}) {
      std::vector<uint8_t> buffer(2 * n + 64);
      std::span<uint8_t> out(buffer.data() + shift, 2 * n);
      ASSERT_TRUE(EncodeArray(f, values, out).ok());
      EXPECT_TRUE(std::equal(out.begin(), out.end(), expected.begin())) << name << " " << shift;
      std::vector<uint8_t> back_raw(4 * n + 64);
      std::span<float> back(reinterpret_cast<float*>(back_raw.data() + 4 * (shift % 2)), n);
      ASSERT_TRUE(DecodeArray(f, out, back).ok());
      size_t bad = 0;
      for (size_t i = 0; i < n; ++i) {
        const uint32_t code = expected[2 * i] | (uint32_t{expected[2 * i + 1]} << 8);
        bad +=
            std::bit_cast<uint32_t>(back[i]) != std::bit_cast<uint32_t>(DecodeToFloat32(f, code));
      }
      EXPECT_EQ(bad, 0u) << name << " decoded, shift " << shift;
    }
  }
}

// Random bits for element indices whose low 32 bits wrap inside a vector.
TEST(Stochastic, IndicesAcrossTwoToThe32) {
  const Format f = *FindFormat("fp8_e5m2");
  const std::vector<float> values = MixedInputs(1000, 2);
  const ConvertOptions o{.rounding = Rounding::kStochastic, .seed = 3};
  const uint64_t first = (1ull << 32) - 500;
  ForEachTarget([&](const std::string&) {
    std::vector<uint8_t> out(values.size());
    ASSERT_TRUE(EncodeArray(f, values, out, o, {.first_index = first}).ok());
    for (size_t i = 0; i < values.size(); ++i) {
      ASSERT_EQ(out[i], EncodeFloat32(f, values[i], o, first + i)) << i;
    }
  });
}

TEST(Misuse, ClearErrorsAndNothingWritten) {
  const Format e4m3 = *FindFormat("fp8_e4m3fn");
  std::vector<float> in(10, 1.0f);
  std::vector<uint8_t> out(9, 0xCD);
  absl::Status s = EncodeArray(e4m3, in, out);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("output holds 9 bytes; 10 codes of fp8_e4m3fn take 10"));
  EXPECT_EQ(out, std::vector<uint8_t>(9, 0xCD));
  out.resize(10);
  s = EncodeArray(e4m3, in, out, {.overflow = Overflow::kInfinity});
  EXPECT_THAT(s.message(), HasSubstr("has no infinity"));
  std::vector<uint16_t> halves(10);
  s = EncodeArray16(e4m3, halves, e4m3, out);
  EXPECT_THAT(s.message(), HasSubstr("must be fp16 or bf16, not fp8_e4m3fn"));
  // Decoding: a wrong size, a code above the format's width.
  const Format fp6 = *FindFormat("fp6_e2m3fn");
  std::vector<uint8_t> codes(8, 0x01);
  codes[5] = 0x40;
  std::vector<float> values(8, -1.0f);
  s = DecodeArray(fp6, codes, values);
  EXPECT_THAT(s.message(), HasSubstr("code at index 5 has bits above the 6-bit width"));
  EXPECT_EQ(values, std::vector<float>(8, -1.0f));
  s = DecodeArray(fp6, std::span(codes).first(7), values);
  EXPECT_THAT(s.message(), HasSubstr("input holds 7 bytes; 8 codes of fp6_e2m3fn take 8"));
  // Overlap that is not in-place narrowing.
  std::vector<float> buffer(16, 1.0f);
  std::span<uint8_t> shifted(reinterpret_cast<uint8_t*>(buffer.data()) + 4, 8);
  s = EncodeArray(e4m3, std::span(buffer).first(8), shifted);
  EXPECT_THAT(s.message(), HasSubstr("overlap"));
  std::span<const uint8_t> bytes(reinterpret_cast<const uint8_t*>(buffer.data()), 8);
  s = DecodeArray(e4m3, bytes, std::span(buffer).first(8));
  EXPECT_THAT(s.message(), HasSubstr("overlap"));
}

}  // namespace
}  // namespace lowp::testing
