// kernels::EncodeGgml against codecs' ggml::Encode (the scalar specification,
// itself checked against ggml), byte for byte and clamp count for clamp
// count, on every Highway target this CPU runs, for each type with a SIMD
// encoder: rows of varied values (normal, heavy tails, flat and zero
// groups, tiny, huge, subnormal, non-finite) with and without importance
// (ones, log-normal, some or all zeros); and against ggml's own bytes in
// tests/data/ggml/known-answers*.gguf (see PROVENANCE.md there).
#include <cmath>
#include <cstdint>
#include <iterator>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "codecs/ggml.h"
#include "gtest/gtest.h"
#include "io/tensor.h"
#include "io/tensor_set.h"
#include "kernels/ggml_encode.h"
#include "tests/simd_targets.h"

namespace lowp {
namespace {

enum class Values {
  kNormal, kHeavyTails, kFlatGroups, kTiny, kHuge, kSubnormal, kNonFinite, kZero, kTies, kScaleSweep
};
constexpr Values kAllValues[] = {Values::kNormal,    Values::kHeavyTails, Values::kFlatGroups,
                                 Values::kTiny,      Values::kHuge,       Values::kSubnormal,
                                 Values::kNonFinite, Values::kZero,       Values::kTies,
                                 Values::kScaleSweep};

// Largest magnitudes of kTies blocks: 8x an fp16 rounding tie (to inf, to 0,
// to the even subnormal, between normals) or its neighbour, or plain.
constexpr float kTieTops[] = {0.75f,
                              8 * 65520.f,
                              8 * 65504.f,
                              8 * 0x1p-25f,
                              8 * 0x1.8p-24f,
                              8 * 0x1.002p0f,
                              8 * 0x1.006p0f,
                              8 * 0x1.002p-14f};

enum class Weights { kNone, kOnes, kLogNormal, kSomeZero, kAllZero };
constexpr Weights kAllWeights[] = {Weights::kNone, Weights::kOnes, Weights::kLogNormal,
                                   Weights::kSomeZero, Weights::kAllZero};

std::vector<float> MakeRow(Values kind, size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.f, 1.f);
  std::uniform_real_distribution<float> unit(0.f, 1.f);
  std::vector<float> x(n);
  for (size_t i = 0; i < n; ++i) {
    const float z = normal(rng);
    switch (kind) {
      case Values::kNormal: x[i] = 0.02f * z; break;
      case Values::kHeavyTails:  // Student-t-like: a normal over a small |normal|
        x[i] = z / (0.05f + std::fabs(normal(rng)));
        break;
      case Values::kFlatGroups:  // runs of 16 equal values, some 0, some not
        x[i] = (i / 16) % 3 == 0 ? 0.f : (i / 16) % 3 == 1 ? 0.5f : 0.02f * z;
        if ((i / 16) % 3 == 1 && i % 16 == 5 && (i / 256) % 2 == 1) x[i] = -0.25f;
        break;
      case Values::kTiny: x[i] = 1e-20f * z; break;
      case Values::kHuge: x[i] = 1e30f * z; break;
      case Values::kSubnormal: x[i] = 1e-40f * z; break;
      case Values::kNonFinite: {
        const float u = unit(rng);
        x[i] = u < 0.01f   ? std::numeric_limits<float>::quiet_NaN()
               : u < 0.02f ? std::numeric_limits<float>::infinity()
               : u < 0.03f ? -std::numeric_limits<float>::infinity()
                           : z;
        // Every 5th 32-block all +inf, every 7th all NaN (inf - inf and
        // FLT_MAX-seeded statistics in the scales).
        if ((i / 32) % 5 == 4) x[i] = std::numeric_limits<float>::infinity();
        if ((i / 32) % 7 == 6) x[i] = std::numeric_limits<float>::quiet_NaN();
        break;
      }
      case Values::kZero: x[i] = 0.f; break;
      case Values::kScaleSweep:  // block b at 2^-(b % 48): fp16 scales normal to subnormal to 0
        x[i] = std::ldexp(z, -static_cast<int>((i / 32) % 48));
        break;
      case Values::kTies: {  // few magnitudes, both signs, +0 and -0: ties of |x|, min, max
        const float u = unit(rng);
        const float top = kTieTops[(i / 32) % std::size(kTieTops)];
        const float m = u < 0.3f ? 0.f : u < 0.6f ? top : u < 0.8f ? 0.5f * top : 3e-41f;
        // Blocks i / 32 = 1, 2 mod 4 hold one sign (a max or min of +-0).
        const float sign = (i / 32) % 4 == 1 ? -1.f : (i / 32) % 4 == 2 ? 1.f : z < 0 ? -1.f : 1.f;
        x[i] = m == 0.f ? (z < 0 ? -0.f : 0.f) : sign * m;
        break;
      }
    }
  }
  return x;
}

std::vector<float> MakeImportance(Weights kind, size_t n, uint32_t seed) {
  std::mt19937 rng(seed ^ 0x5eed);
  std::normal_distribution<float> normal(0.f, 1.f);
  std::vector<float> w;
  if (kind == Weights::kNone) return w;
  w.resize(n);
  for (size_t i = 0; i < n; ++i) {
    const float z = normal(rng);
    switch (kind) {
      case Weights::kOnes: w[i] = 1.f; break;
      case Weights::kLogNormal: w[i] = std::exp(z); break;
      case Weights::kSomeZero: w[i] = i % 10 == 3 ? 0.f : z * z; break;
      default: w[i] = 0.f; break;
    }
  }
  return w;
}

class EncodeGgmlTest : public ::testing::TestWithParam<ggml::Type> {};

TEST_P(EncodeGgmlTest, BytesEqualEncode) {
  const ggml::Type type = GetParam();
  ASSERT_TRUE(kernels::HasFastGgmlEncoder(type));
  const ggml::TypeInfo& info = ggml::Info(type);
  std::vector<size_t> lengths = {256, 768, 2304, 4096};
  if (info.block == 32) lengths.insert(lengths.begin(), {32, 96, 288});
  testing::ForEachTarget([&] {
    uint32_t seed = 1;
    for (Values values : kAllValues) {
      for (Weights weights : kAllWeights) {
        for (size_t n : lengths) {
          ++seed;
          const std::vector<float> x = MakeRow(values, n, seed);
          const std::vector<float> w = MakeImportance(weights, n, seed);
          const size_t bytes = n / info.block * info.bytes;
          std::vector<uint8_t> want(bytes, 0xAA), got(bytes, 0x55);
          uint64_t want_clipped = 0, got_clipped = 0;
          ASSERT_TRUE(ggml::Encode(type, x, want, &want_clipped, w).ok());
          ASSERT_TRUE(kernels::EncodeGgml(type, x, got, &got_clipped, w).ok());
          SCOPED_TRACE(::testing::Message() << info.name << " values " << static_cast<int>(values)
                                            << " weights " << static_cast<int>(weights) << " n "
                                            << n);
          for (size_t i = 0; i < bytes; ++i) {
            ASSERT_EQ(want[i], got[i]) << "byte " << i << " (block " << i / info.bytes << ")";
          }
          EXPECT_EQ(want_clipped, got_clipped);
        }
      }
    }
  });
}

TEST_P(EncodeGgmlTest, RefusesWhatEncodeRefuses) {
  const ggml::Type type = GetParam();
  const ggml::TypeInfo& info = ggml::Info(type);
  const std::vector<float> x(2 * info.block, 1.f);
  std::vector<uint8_t> out(2 * info.bytes);
  EXPECT_FALSE(kernels::EncodeGgml(type, std::span<const float>(x).first(info.block + 1),
                                   out).ok());
  EXPECT_FALSE(kernels::EncodeGgml(type, x, std::span<uint8_t>(out).first(info.bytes)).ok());
  const std::vector<float> short_w(info.block, 1.f);
  EXPECT_FALSE(kernels::EncodeGgml(type, x, out, nullptr, short_w).ok());
}

const TensorView* Find(const TensorSet& set, const std::string& name) {
  for (const TensorView& t : set.tensors()) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

std::vector<float> Floats(const TensorView& t) {
  std::vector<float> out(static_cast<size_t>(t.elements()));
  EXPECT_TRUE(ReadAsFloat32(t, 0, out).ok()) << t.name;
  return out;
}

// Each row of T.x (with T.w as every row's importance where `importance`)
// encodes to ggml's bytes T.q.
void CheckKnownAnswers(ggml::Type type, const std::string& file, bool importance) {
  const ggml::TypeInfo& info = ggml::Info(type);
  absl::StatusOr<TensorSet> set = TensorSet::Open(std::string(LOWP_TEST_DATA_DIR) + file);
  ASSERT_TRUE(set.ok()) << set.status();
  const std::string name(info.name);
  const TensorView* x = Find(*set, name + ".x");
  const TensorView* q = Find(*set, name + ".q");
  const TensorView* w = importance ? Find(*set, name + ".w") : nullptr;
  ASSERT_TRUE(x != nullptr && q != nullptr && (w != nullptr || !importance)) << file << " " << name;
  const std::vector<float> in = Floats(*x);
  const std::vector<float> weights = w != nullptr ? Floats(*w) : std::vector<float>();
  const size_t cols = static_cast<size_t>(x->shape.back());
  const size_t row_bytes = cols / info.block * info.bytes;
  ASSERT_EQ(q->bytes.size(), in.size() / cols * row_bytes);
  for (size_t r = 0; r < in.size() / cols; ++r) {
    std::vector<uint8_t> got(row_bytes);
    ASSERT_TRUE(kernels::EncodeGgml(type, std::span<const float>(in).subspan(r * cols, cols), got,
                                    nullptr, weights)
                    .ok());
    for (size_t i = 0; i < row_bytes; ++i) {
      ASSERT_EQ(got[i], q->bytes[r * row_bytes + i])
          << file << " " << name << " row " << r << " byte " << i;
    }
  }
}

TEST_P(EncodeGgmlTest, EqualsGgmlKnownAnswers) {
  testing::ForEachTarget([&] {
    CheckKnownAnswers(GetParam(), "/ggml/known-answers.gguf", false);
    // q8_0 has no importance (ggml ignores it), so no imatrix answers.
    if (GetParam() != ggml::Type::kQ8_0) {
      CheckKnownAnswers(GetParam(), "/ggml/known-answers-imatrix.gguf", true);
    }
  });
}

INSTANTIATE_TEST_SUITE_P(
    Types, EncodeGgmlTest,
    ::testing::Values(ggml::Type::kQ2_K, ggml::Type::kQ3_K, ggml::Type::kQ4_K, ggml::Type::kQ5_K,
                      ggml::Type::kQ6_K, ggml::Type::kQ4_0, ggml::Type::kQ4_1, ggml::Type::kQ5_0,
                      ggml::Type::kQ5_1, ggml::Type::kQ8_0),
    [](const ::testing::TestParamInfo<ggml::Type>& p) {
      return std::string(ggml::Info(p.param).name);
    });

}  // namespace
}  // namespace lowp
