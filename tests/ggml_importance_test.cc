// ggml's quantizers with an importance matrix (llama-imatrix's weights, the
// `imatrix` argument of ggml_quantize_chunk) and its grid i-quants, against
// the known answers ggml itself wrote (tests/data/ggml/known-answers-imatrix.gguf,
// see PROVENANCE.md): for every type T, lowp's Encode of each row of T.x with
// T.w as the row's importance equals ggml's bytes T.q, and lowp's Decode of
// T.q equals ggml's to_float T.y bit for bit; for the grid types ggml also
// quantizes without importance, the same for T.q0 / T.y0 with none.
#include <bit>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "codecs/ggml.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "io/gguf.h"
#include "io/tensor.h"
#include "io/tensor_set.h"

namespace lowp {
namespace {

using ::testing::ElementsAreArray;
using ::testing::HasSubstr;

const std::string kFile = std::string(LOWP_TEST_DATA_DIR) + "/ggml/known-answers-imatrix.gguf";

// In file order.
const char* const kTypes[] = {"q4_0",  "q4_1",  "q5_0",   "q5_1",    "q2_K",  "q3_K",
                              "q4_K",  "q5_K",  "q6_K",   "iq4_nl",  "iq4_xs", "iq2_xxs",
                              "iq2_xs", "iq2_s", "iq3_xxs", "iq3_s", "iq1_s",  "iq1_m"};
// The grid types ggml also quantizes without importance (T.q0, T.y0).
const char* const kAlsoWithout[] = {"iq2_s", "iq3_xxs", "iq3_s", "iq1_m"};
// ggml_quantize_requires_imatrix.
const char* const kNeedImportance[] = {"iq2_xxs", "iq2_xs", "iq1_s"};

constexpr int64_t kRows = 10, kCols = 256;

const TensorSet& Set() {
  static const TensorSet* set = [] {
    absl::StatusOr<TensorSet> s = TensorSet::Open(kFile);
    if (!s.ok()) {
      ADD_FAILURE() << s.status();
      return static_cast<TensorSet*>(nullptr);
    }
    return new TensorSet(*std::move(s));
  }();
  return *set;
}

const TensorView* Find(absl::string_view name) {
  for (const TensorView& t : Set().tensors()) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

std::vector<float> Floats(const TensorView& t) {
  std::vector<float> out(static_cast<size_t>(t.elements()));
  const absl::Status s = ReadAsFloat32(t, 0, out);
  EXPECT_TRUE(s.ok()) << t.name << ": " << s;
  return out;
}

// The row kinds (lowp.row_kinds), for messages.
std::string RowKind(int64_t row) {
  const GgufValue* kinds = Set().gguf()->Find("lowp.row_kinds");
  if (kinds == nullptr) return "?";
  const std::vector<GgufValue> e = kinds->Elements();
  return row < static_cast<int64_t>(e.size()) ? e[row].s : "?";
}

std::string Where(absl::string_view type, int64_t row) {
  return absl::StrCat(type, " row ", row, " (", RowKind(row), ")");
}

// "byte 17 of block 3" for the first difference, or "" when equal.
std::string FirstDifference(std::span<const uint8_t> got, std::span<const uint8_t> want,
                            int64_t block_bytes) {
  for (size_t i = 0; i < got.size() && i < want.size(); ++i) {
    if (got[i] != want[i]) {
      return absl::StrCat("byte ", i % block_bytes, " of block ", i / block_bytes, ": lowp 0x",
                          absl::Hex(got[i]), ", ggml 0x", absl::Hex(want[i]));
    }
  }
  return got.size() == want.size() ? "" : "sizes differ";
}

// Encode of every row of `x` with `importance` (empty: none) equals `q`'s
// bytes, and Decode of `q` equals `y` bit for bit.
void CheckType(absl::string_view type, const TensorView& x, std::span<const float> importance,
               const TensorView& q, const TensorView& y) {
  ASSERT_EQ(q.dtype, DType::kGgml) << q.name;
  ASSERT_NE(q.ggml, nullptr);
  ASSERT_EQ(q.ggml->name, type);
  const std::vector<int64_t> shape = {kRows, kCols};
  ASSERT_EQ(x.shape, shape) << x.name;
  ASSERT_EQ(q.shape, shape) << q.name;
  ASSERT_EQ(y.shape, shape) << y.name;
  const ggml::TypeInfo& info = *q.ggml;
  const int64_t row_bytes = ggml::RowBytes(info, kCols);
  ASSERT_EQ(static_cast<int64_t>(q.bytes.size()), kRows * row_bytes);
  const std::vector<float> in = Floats(x), want = Floats(y);
  const std::string with = importance.empty() ? "without importance" : "with importance";

  for (int64_t r = 0; r < kRows; ++r) {
    const std::span<const uint8_t> ggml_row = q.bytes.subspan(r * row_bytes, row_bytes);
    std::vector<uint8_t> bytes(static_cast<size_t>(row_bytes));
    const absl::Status s = ggml::Encode(
        info.type, std::span<const float>(in).subspan(r * kCols, kCols), bytes, nullptr,
        importance);
    if (!s.ok()) {
      ADD_FAILURE() << Where(type, r) << ": Encode " << with << ": " << s;
    } else {
      const std::string diff = FirstDifference(bytes, ggml_row, info.bytes);
      EXPECT_EQ(diff, "") << Where(type, r) << ": Encode " << with
                          << " differs from ggml's quantizer";
    }

    std::vector<float> got(kCols);
    const absl::Status d = ggml::Decode(info.type, ggml_row, got);
    if (!d.ok()) {
      ADD_FAILURE() << Where(type, r) << ": Decode: " << d;
      continue;
    }
    for (int64_t i = 0; i < kCols; ++i) {
      const float w = want[r * kCols + i];
      if (std::bit_cast<uint32_t>(got[i]) != std::bit_cast<uint32_t>(w)) {
        ADD_FAILURE() << Where(type, r) << ": Decode of ggml's bytes " << with
                      << " differs from ggml's to_float at element " << i << " (block "
                      << i / info.block << "): lowp " << got[i] << ", ggml " << w;
        break;
      }
    }
  }
}

TEST(GgmlImportanceFile, HoldsEveryTypeAndItsMetadata) {
  ASSERT_NE(Set().gguf(), nullptr);
  const ParsedGguf& g = *Set().gguf();
  const GgufValue* commit = g.Find("lowp.ggml_commit");
  ASSERT_NE(commit, nullptr);
  EXPECT_EQ(commit->s, "d99724f2b141fed9e1a9f402213506c081433465");
  const GgufValue* kind = g.Find("lowp.importance_kind");
  ASSERT_NE(kind, nullptr);
  EXPECT_EQ(kind->s, "act");
  const GgufValue* kinds = g.Find("lowp.row_kinds");
  ASSERT_NE(kinds, nullptr);
  EXPECT_EQ(kinds->Elements().size(), 10u);
  std::vector<std::string> names, want;
  for (const TensorView& t : Set().tensors()) names.push_back(t.name);
  for (const char* type : kTypes) {
    for (const char* part : {".x", ".w", ".q", ".y"}) want.push_back(absl::StrCat(type, part));
    for (const char* t0 : kAlsoWithout) {
      if (absl::string_view(t0) == type) {
        want.push_back(absl::StrCat(type, ".q0"));
        want.push_back(absl::StrCat(type, ".y0"));
      }
    }
  }
  EXPECT_THAT(names, ElementsAreArray(want));
}

class GgmlImportance : public ::testing::TestWithParam<const char*> {};

TEST_P(GgmlImportance, EncodeAndDecodeWithImportanceEqualGgml) {
  const std::string type = GetParam();
  const TensorView* x = Find(type + ".x");
  const TensorView* w = Find(type + ".w");
  const TensorView* q = Find(type + ".q");
  const TensorView* y = Find(type + ".y");
  ASSERT_TRUE(x && w && q && y) << type << ": tensors missing from " << kFile;
  ASSERT_EQ(w->shape, std::vector<int64_t>{kCols});
  const std::vector<float> importance = Floats(*w);
  CheckType(type, *x, importance, *q, *y);
}

TEST_P(GgmlImportance, WithoutImportanceAsGgml) {
  const std::string type = GetParam();
  const TensorView* x = Find(type + ".x");
  const TensorView* q = Find(type + ".q");
  ASSERT_TRUE(x && q) << type;
  bool needs = false, also = false;
  for (const char* t : kNeedImportance) needs |= type == t;
  for (const char* t : kAlsoWithout) also |= type == t;
  ASSERT_NE(q->ggml, nullptr);
  EXPECT_EQ(q->ggml->needs_importance, needs) << type;
  if (needs) {
    // ggml asserts an imatrix; lowp refuses.
    std::vector<float> in(kCols, 1.0f);
    std::vector<uint8_t> bytes(static_cast<size_t>(ggml::RowBytes(*q->ggml, kCols)));
    const absl::Status s = ggml::Encode(q->ggml->type, in, bytes);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << type << ": " << s;
    EXPECT_THAT(s.message(), HasSubstr("importance")) << type;
  }
  if (also) {
    const TensorView* q0 = Find(type + ".q0");
    const TensorView* y0 = Find(type + ".y0");
    ASSERT_TRUE(q0 && y0) << type;
    CheckType(type, *x, {}, *q0, *y0);
  }
  if (!needs && !also) GTEST_SKIP() << type << ": in the file with importance only";
}

INSTANTIATE_TEST_SUITE_P(Types, GgmlImportance, ::testing::ValuesIn(kTypes),
                         [](const ::testing::TestParamInfo<const char*>& info) {
                           return std::string(info.param);
                         });

}  // namespace
}  // namespace lowp
