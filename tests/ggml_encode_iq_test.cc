// kernels::EncodeGgml against codecs' ggml::Encode (the scalar specification,
// itself checked against ggml) for the types with a SIMD search here, byte
// for byte and clamped count for count, on every Highway target this CPU
// runs, with and without importance; and against ggml's own bytes (the known
// answers in tests/data/ggml).
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "codecs/ggml.h"
#include "codecs/ggml_blocks.h"
#include "codecs/ggml_iq4.h"
#include "gtest/gtest.h"
#include "io/tensor.h"
#include "io/tensor_set.h"
#include "kernels/ggml_encode.h"
#include "kernels/ggml_iq4_simd.h"
#include "tests/simd_targets.h"

namespace lowp {
namespace {

using ggml::Type;

// Every float within `span` steps of each grid value and each midpoint
// between neighbours (where ggml's tie rule decides), the specials, and
// random bit patterns: the SIMD nearest value equals Iq4BestIndex's.
TEST(GgmlEncodeIq, NearestValueEqualsBestIndexNearEveryBoundary) {
  std::vector<float> a = {0.0f, -0.0f, std::numeric_limits<float>::infinity(),
                          -std::numeric_limits<float>::infinity(),
                          std::numeric_limits<float>::quiet_NaN(),
                          -std::numeric_limits<float>::quiet_NaN(),
                          std::numeric_limits<float>::max(), -std::numeric_limits<float>::max(),
                          std::numeric_limits<float>::denorm_min(),
                          -std::numeric_limits<float>::denorm_min()};
  std::vector<float> centres;
  for (int k = 0; k < 16; ++k) {
    centres.push_back(ggml::kIq4Values[k]);
    if (k < 15) centres.push_back((ggml::kIq4Values[k] + ggml::kIq4Values[k + 1]) / 2.0f);
  }
  constexpr int kSpan = 1 << 16;
  for (float c : centres) {
    float up = c, down = c;
    a.push_back(c);
    for (int s = 0; s < kSpan; ++s) {
      up = std::nextafter(up, std::numeric_limits<float>::infinity());
      down = std::nextafter(down, -std::numeric_limits<float>::infinity());
      a.push_back(up);
      a.push_back(down);
    }
  }
  std::mt19937 rng(29);
  for (int i = 0; i < 1 << 18; ++i) a.push_back(std::bit_cast<float>(static_cast<uint32_t>(rng())));
  std::uniform_real_distribution<float> grid(-140.0f, 130.0f);
  for (int i = 0; i < 1 << 18; ++i) a.push_back(grid(rng));

  std::vector<float> want(a.size());
  for (size_t i = 0; i < a.size(); ++i) {
    want[i] = ggml::kIq4Values[ggml::internal::Iq4BestIndex(a[i], nullptr)];
  }
  testing::ForEachTarget([&] {
    std::vector<float> got(a.size());
    kernels::Iq4NearestValues(a.data(), a.size(), got.data());
    for (size_t i = 0; i < a.size(); ++i) {
      ASSERT_EQ(want[i], got[i]) << "a = " << a[i] << " (bits " << std::hex
                                 << std::bit_cast<uint32_t>(a[i]) << ")";
    }
  });
}

struct Case {
  std::string name;
  std::vector<float> x;
  std::vector<float> importance;  // one row's worth, repeated per row
};

std::vector<float> Normal(size_t n, float sigma, std::mt19937& rng) {
  std::normal_distribution<float> dist(0.0f, sigma);
  std::vector<float> x(n);
  for (float& v : x) v = dist(rng);
  return x;
}

// Inputs that reach each branch of the search and the packing: ordinary
// weights, heavy tails, zero and constant groups, magnitudes near the ends
// of float32 (and of fp16 for the scales), subnormals; importance that is
// one, spread over decades, or zero for some or all of a group.
std::vector<Case> Cases() {
  std::mt19937 rng(2029);
  std::vector<Case> cases;
  for (size_t n : {256u, 512u, 4096u}) {
    cases.push_back({"normal" + std::to_string(n), Normal(n, 0.02f, rng), {}});
  }
  {
    std::vector<float> x = Normal(2048, 1.0f, rng);
    std::student_t_distribution<float> t(1.5f);
    for (float& v : x) v = t(rng);
    cases.push_back({"heavy_tails", x, {}});
  }
  {
    std::vector<float> x = Normal(1024, 0.02f, rng);
    for (size_t i = 0; i < x.size(); i += 97) x[i] *= 1000.0f;  // one outlier per few groups
    cases.push_back({"outliers", x, {}});
  }
  cases.push_back({"zeros", std::vector<float>(512, 0.0f), {}});
  {
    std::vector<float> x(1024);
    for (size_t i = 0; i < x.size(); ++i) x[i] = (i / 32) % 3 == 0 ? 0.0f : ((i / 32) % 3 == 1 ? 0.5f : -3.0f);
    cases.push_back({"constant_groups", x, {}});
  }
  for (float scale : {1e-30f, 1e-18f, 1e-10f, 1e4f, 1e20f, 1e30f, 3e38f}) {
    std::vector<float> x = Normal(512, 1.0f, rng);
    for (float& v : x) v *= scale;
    cases.push_back({"scale" + std::to_string(scale), x, {}});
  }
  {
    std::vector<float> x = Normal(512, 1.0f, rng);
    for (float& v : x) v *= 1e-40f;  // subnormal
    cases.push_back({"subnormal", x, {}});
  }
  {
    std::vector<float> x = Normal(768, 1.0f, rng);
    for (size_t i = 0; i < x.size(); ++i) {
      if ((i / 32) % 4 == 1) x[i] *= 1e-16f;  // some groups below GROUP_MAX_EPS
      if ((i / 32) % 4 == 2) x[i] = std::round(x[i] * 4.0f);  // integers: ties on the grid
    }
    cases.push_back({"mixed_groups", x, {}});
  }
  {
    // Small integers and repeated patterns: equal distances to several grid
    // points, where the first of equals must win.
    std::vector<float> x(2048);
    std::uniform_int_distribution<int> small(-9, 9);
    for (size_t i = 0; i < 1024; ++i) x[i] = static_cast<float>(small(rng));
    for (size_t i = 1024; i < x.size(); ++i) x[i] = static_cast<float>(1 + (i % 4 == 0) + 2 * (i % 8 == 5));
    cases.push_back({"integers", x, {}});
  }
  // Importance kinds, on normal rows.
  const size_t n = 1024;
  std::vector<float> x = Normal(n, 0.02f, rng);
  cases.push_back({"w_ones", x, std::vector<float>(n, 1.0f)});
  {
    std::vector<float> w(n);
    std::normal_distribution<float> z(0.0f, 1.0f);
    for (float& v : w) v = std::exp(2.0f * z(rng));
    cases.push_back({"w_lognormal", x, w});
    std::vector<float> sparse = w;
    for (size_t i = 0; i < n; ++i) {
      if (i % 10 == 3) sparse[i] = 0.0f;
      if (i / 32 == 5) sparse[i] = 0.0f;  // a whole group without weight
    }
    cases.push_back({"w_sparse", x, sparse});
  }
  cases.push_back({"w_zero", x, std::vector<float>(n, 0.0f)});
  {
    std::vector<float> w(n);
    for (size_t i = 0; i < n; ++i) w[i] = i % 7 == 0 ? 1e30f : 1e-30f;
    cases.push_back({"w_extreme", x, w});
  }
  {
    std::vector<float> h = Normal(n, 1.0f, rng);
    std::student_t_distribution<float> t(1.5f);
    for (float& v : h) v = t(rng);
    std::vector<float> w(n);
    for (size_t i = 0; i < n; ++i) w[i] = 1.0f + static_cast<float>(i % 13);
    cases.push_back({"w_heavy_tails", h, w});
  }
  {
    // Few distinct values (-0 and +0 among them) under uneven weights: runs
    // of equal values in iq1's sorted order (a stable sort's).
    std::vector<float> x(2048), w(2048);
    const float values[] = {-2.0f, -1.0f, -0.0f, 0.0f, 0.5f, 1.0f, 3.0f};
    std::uniform_int_distribution<int> pick(0, 6);
    std::normal_distribution<float> z(0.0f, 1.0f);
    for (size_t i = 0; i < x.size(); ++i) {
      x[i] = values[pick(rng)];
      w[i] = std::exp(2.0f * z(rng));
    }
    cases.push_back({"w_ties", x, w});
  }
  return cases;
}

void ExpectSameAsScalar(Type type, const Case& c, bool with_importance) {
  const ggml::TypeInfo& info = ggml::Info(type);
  SCOPED_TRACE(std::string(info.name) + " " + c.name + (with_importance ? " importance" : ""));
  std::vector<float> importance;
  if (with_importance) {
    importance = c.importance.empty() ? std::vector<float>(c.x.size(), 1.0f) : c.importance;
  }
  const size_t bytes = static_cast<size_t>(ggml::RowBytes(info, static_cast<int64_t>(c.x.size())));
  std::vector<uint8_t> want(bytes), got(bytes);
  if (importance.empty() && info.needs_importance) {  // ggml asserts; both refuse
    EXPECT_FALSE(ggml::Encode(type, c.x, want).ok());
    EXPECT_FALSE(kernels::EncodeGgml(type, c.x, got).ok());
    return;
  }
  uint64_t want_clipped = 0;
  ASSERT_TRUE(ggml::Encode(type, c.x, want, &want_clipped, importance).ok());
  testing::ForEachTarget([&] {
    uint64_t got_clipped = 0;
    std::fill(got.begin(), got.end(), 0xA5);
    ASSERT_TRUE(kernels::EncodeGgml(type, c.x, got, &got_clipped, importance).ok());
    for (size_t i = 0; i < bytes; ++i) {
      ASSERT_EQ(want[i], got[i]) << "byte " << i << " of block " << i / info.bytes;
    }
    EXPECT_EQ(want_clipped, got_clipped);
  });
}

class GgmlEncodeIqTypes : public ::testing::TestWithParam<Type> {};

TEST_P(GgmlEncodeIqTypes, HasSimdEncoder) { EXPECT_TRUE(kernels::HasFastGgmlEncoder(GetParam())); }

TEST_P(GgmlEncodeIqTypes, BytesEqualEncodeWithoutImportance) {
  for (const Case& c : Cases()) {
    if (!c.importance.empty()) continue;
    ExpectSameAsScalar(GetParam(), c, false);
  }
}

TEST_P(GgmlEncodeIqTypes, BytesEqualEncodeWithImportance) {
  for (const Case& c : Cases()) ExpectSameAsScalar(GetParam(), c, true);
}

// What Encode refuses, EncodeGgml refuses.
TEST_P(GgmlEncodeIqTypes, RefusesWhatEncodeRefuses) {
  const ggml::TypeInfo& info = ggml::Info(GetParam());
  std::vector<float> x(static_cast<size_t>(info.block) + 1, 0.5f);
  std::vector<uint8_t> out(static_cast<size_t>(info.bytes) * 2);
  EXPECT_FALSE(kernels::EncodeGgml(GetParam(), x, out).ok());
  x.resize(static_cast<size_t>(info.block));
  std::vector<float> w(3, 1.0f);
  out.resize(static_cast<size_t>(info.bytes));
  EXPECT_FALSE(kernels::EncodeGgml(GetParam(), x, out, nullptr, w).ok());
}

// ggml's own bytes (tests/data/ggml, PROVENANCE.md): T.q of T.x, row by row,
// without importance in known-answers.gguf; in known-answers-imatrix.gguf
// with T.w as every row's importance, and T.q0 without (where ggml made it).
TEST_P(GgmlEncodeIqTypes, BytesEqualGgmlKnownAnswers) {
  const std::string type(ggml::Info(GetParam()).name);
  struct Answer {
    const char* file;
    const char* bytes;
    bool importance;
  };
  int checked = 0;
  for (const Answer& a : {Answer{"known-answers.gguf", ".q", false},
                          Answer{"known-answers-imatrix.gguf", ".q", true},
                          Answer{"known-answers-imatrix.gguf", ".q0", false}}) {
    SCOPED_TRACE(std::string(a.file) + " " + type + a.bytes);
    absl::StatusOr<TensorSet> set =
        TensorSet::Open(std::string(LOWP_TEST_DATA_DIR) + "/ggml/" + a.file);
    ASSERT_TRUE(set.ok()) << set.status();
    const TensorView *x = nullptr, *w = nullptr, *q = nullptr;
    for (const TensorView& t : set->tensors()) {
      if (t.name == type + ".x") x = &t;
      if (t.name == type + ".w") w = &t;
      if (t.name == type + a.bytes) q = &t;
    }
    if (q == nullptr) continue;
    ASSERT_NE(x, nullptr);
    ASSERT_EQ(x->shape.size(), 2u);
    const size_t rows = static_cast<size_t>(x->shape[0]), cols = static_cast<size_t>(x->shape[1]);
    std::vector<float> in(rows * cols), importance;
    ASSERT_TRUE(ReadAsFloat32(*x, 0, in).ok());
    if (a.importance) {
      ASSERT_NE(w, nullptr);
      importance.resize(cols);
      ASSERT_TRUE(ReadAsFloat32(*w, 0, importance).ok());
    }
    const size_t row_bytes =
        static_cast<size_t>(ggml::RowBytes(ggml::Info(GetParam()), static_cast<int64_t>(cols)));
    ASSERT_EQ(q->bytes.size(), rows * row_bytes);
    testing::ForEachTarget([&] {
      for (size_t r = 0; r < rows; ++r) {
        std::vector<uint8_t> got(row_bytes);
        ASSERT_TRUE(kernels::EncodeGgml(GetParam(), std::span<const float>(in).subspan(r * cols, cols),
                                        got, nullptr, importance)
                        .ok());
        EXPECT_TRUE(std::equal(got.begin(), got.end(), q->bytes.begin() + r * row_bytes))
            << "row " << r;
      }
    });
    ++checked;
  }
  EXPECT_GE(checked, 1);
}

INSTANTIATE_TEST_SUITE_P(Types, GgmlEncodeIqTypes,
                         ::testing::Values(Type::kIQ4_NL, Type::kIQ4_XS, Type::kIQ3_XXS,
                                           Type::kIQ3_S, Type::kIQ2_XXS, Type::kIQ2_XS,
                                           Type::kIQ2_S, Type::kIQ1_S, Type::kIQ1_M),
                         [](const auto& p) { return std::string(ggml::Info(p.param).name); });

}  // namespace
}  // namespace lowp
