// Tensor files: the safetensors and .npy parsers (every failure kind), the
// streaming writer, sharded checkpoints, ReadAsFloat32 and the real
// stories260K checkpoints in tests/data/stories260K.
#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "formats/format.h"
#include "formats/reference.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "io/npy.h"
#include "io/safetensors.h"
#include "io/tensor.h"
#include "io/tensor_set.h"

namespace lowp {
namespace {

using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

const std::string kDataDir = std::string(LOWP_TEST_DATA_DIR) + "/stories260K/";

std::vector<uint8_t> Bytes(absl::string_view s) { return {s.begin(), s.end()}; }

// A safetensors image: the header text as given, then `data`.
std::vector<uint8_t> Safetensors(const std::string& header, const std::vector<uint8_t>& data) {
  std::vector<uint8_t> file(8 + header.size() + data.size());
  for (int i = 0; i < 8; ++i) file[i] = static_cast<uint8_t>(uint64_t{header.size()} >> (8 * i));
  std::copy(header.begin(), header.end(), file.begin() + 8);
  std::copy(data.begin(), data.end(), file.begin() + 8 + header.size());
  return file;
}

std::string ParseError(const std::string& header, size_t data_bytes) {
  absl::StatusOr<ParsedSafetensors> parsed =
      ParseSafetensors(Safetensors(header, std::vector<uint8_t>(data_bytes)), "m.safetensors");
  EXPECT_FALSE(parsed.ok()) << header;
  return parsed.ok() ? "" : std::string(parsed.status().message());
}

// A temporary directory, removed with everything in it.
class TempDir {
 public:
  TempDir() {
    std::string t = ::testing::TempDir() + "/tensor_files_XXXXXX";
    path_ = mkdtemp(t.data());
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  std::string operator/(absl::string_view name) const { return absl::StrCat(path_, "/", name); }
  const std::string& path() const { return path_; }
  std::vector<std::string> Files() const {
    std::vector<std::string> names;
    for (const auto& e : std::filesystem::directory_iterator(path_)) {
      names.push_back(e.path().filename());
    }
    std::sort(names.begin(), names.end());
    return names;
  }

 private:
  std::string path_;
};

void WriteFile(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(bytes.data()), bytes.size());
}

std::vector<uint8_t> ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// ---------------------------------------------------------------- dtypes

TEST(DTypeTest, NamesSizesAndParse) {
  EXPECT_EQ(AllDTypes().size(), 19u);  // every dtype but kGgml
  for (DType d : AllDTypes()) {
    absl::StatusOr<DType> parsed = ParseDType(DTypeName(d));
    ASSERT_TRUE(parsed.ok());
    EXPECT_EQ(*parsed, d);
  }
  EXPECT_EQ(DTypeName(DType::kF8E4M3), "F8_E4M3");
  EXPECT_EQ(DTypeName(DType::kF8E8M0), "F8_E8M0");
  EXPECT_FALSE(ParseDType("GGML").ok());  // blocks are never a safetensors dtype
  EXPECT_EQ(DTypeBytes(DType::kBF16), 2u);
  EXPECT_EQ(DTypeBytes(DType::kI64), 8u);
  EXPECT_EQ(DTypeBytes(DType::kBool), 1u);
  EXPECT_TRUE(IsFloating(DType::kF8E5M2));
  EXPECT_FALSE(IsFloating(DType::kU64));
  EXPECT_THAT(std::string(ParseDType("F7").status().message()), HasSubstr("\"F7\""));
}

TEST(TensorViewTest, ShapeHelpers) {
  TensorView t;
  t.shape = {2, 3, 4};
  EXPECT_EQ(t.elements(), 24);
  EXPECT_EQ(t.cols(), 4);
  EXPECT_EQ(t.rows(), 6);
  t.shape = {};
  EXPECT_EQ(t.elements(), 1);
  EXPECT_EQ(t.rows(), 1);
  EXPECT_EQ(t.cols(), 1);
  const std::vector<int64_t> negative = {2, -1};
  EXPECT_THAT(std::string(ShapeElements(negative, "x").status().message()), HasSubstr("negative"));
  const std::vector<int64_t> huge = {int64_t{1} << 32, int64_t{1} << 32};
  EXPECT_THAT(std::string(ShapeElements(huge, "what").status().message()),
              AllOf(HasSubstr("what"), HasSubstr("overflows")));
  const std::vector<int64_t> zero = {int64_t{1} << 62, 0, int64_t{1} << 62};
  EXPECT_EQ(*ShapeElements(zero, "x"), 0);
  // Found by the npy fuzzer: a valid shape whose leading dimensions overflow
  // before a later 0 (elements() multiplied in order and overflowed).
  t.shape = zero;
  EXPECT_EQ(t.elements(), 0);
  EXPECT_EQ(t.cols(), int64_t{1} << 62);
  EXPECT_EQ(t.rows(), 0);
  t.shape = {int64_t{1} << 40, int64_t{1} << 40, 0};
  EXPECT_EQ(t.elements(), 0);
  EXPECT_EQ(t.cols(), 0);
  EXPECT_EQ(t.rows(), std::numeric_limits<int64_t>::max());  // saturates
}

// ---------------------------------------------------------------- ReadAsFloat32

// A tensor over `raw` placed at an odd address, so reads are misaligned.
struct Misaligned {
  std::vector<uint8_t> storage;
  TensorView view;
  Misaligned(DType dtype, const std::vector<uint8_t>& raw) {
    storage.assign(1, 0xEE);
    storage.insert(storage.end(), raw.begin(), raw.end());
    view.name = "t";
    view.file = "mem";
    view.dtype = dtype;
    view.shape = {static_cast<int64_t>(raw.size() * 8 / DTypeBits(dtype))};
    view.bytes = std::span<const uint8_t>(storage).subspan(1);
  }
};

template <typename T>
std::vector<uint8_t> Raw(std::initializer_list<T> values) {
  std::vector<uint8_t> raw(values.size() * sizeof(T));
  size_t i = 0;
  for (T v : values) std::memcpy(raw.data() + sizeof(T) * i++, &v, sizeof(T));
  return raw;
}

std::vector<float> ReadAll(const TensorView& t) {
  std::vector<float> out(t.elements());
  absl::Status s = ReadAsFloat32(t, 0, out);
  EXPECT_TRUE(s.ok()) << s;
  return out;
}

TEST(ReadAsFloat32Test, EveryDType) {
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_THAT(
      ReadAll(Misaligned(DType::kF16, Raw<uint16_t>({0x3C00, 0xC000, 0x7C00, 0x0001})).view),
      ElementsAre(1.0f, -2.0f, inf, std::ldexp(1.0f, -24)));
  EXPECT_THAT(ReadAll(Misaligned(DType::kBF16, Raw<uint16_t>({0x3F80, 0xC040, 0x0001})).view),
              ElementsAre(1.0f, -3.0f, std::ldexp(1.0f, -133)));
  std::vector<float> e4m3 = ReadAll(Misaligned(DType::kF8E4M3, {0x38, 0x7E, 0x01, 0x7F}).view);
  EXPECT_THAT(std::vector<float>(e4m3.begin(), e4m3.begin() + 3),
              ElementsAre(1.0f, 448.0f, std::ldexp(1.0f, -9)));
  EXPECT_TRUE(std::isnan(e4m3[3]));
  EXPECT_THAT(ReadAll(Misaligned(DType::kF8E5M2, {0x3C, 0x7C, 0x01, 0x7B, 0xC0}).view),
              ElementsAre(1.0f, inf, std::ldexp(1.0f, -16), 57344.0f, -2.0f));
  const std::vector<float> f32 = ReadAll(Misaligned(DType::kF32, Raw<float>({1.5f, -0.0f})).view);
  EXPECT_EQ(f32[0], 1.5f);
  EXPECT_TRUE(std::signbit(f32[1]));
  // F64 rounds to nearest, ties to even.
  EXPECT_THAT(
      ReadAll(Misaligned(DType::kF64, Raw<double>({1.0 + std::ldexp(1.0, -24),
                                                   1.0 + 3 * std::ldexp(1.0, -24), 0.1, 1e300}))
                  .view),
      ElementsAre(1.0f, 1.0f + std::ldexp(1.0f, -22), 0.1f, inf));
  EXPECT_THAT(ReadAll(Misaligned(DType::kBool, {0, 1, 2}).view), ElementsAre(0.0f, 1.0f, 1.0f));
  EXPECT_THAT(ReadAll(Misaligned(DType::kU8, {0, 255}).view), ElementsAre(0.0f, 255.0f));
  EXPECT_THAT(ReadAll(Misaligned(DType::kI8, {0x80, 0x7F}).view), ElementsAre(-128.0f, 127.0f));
  EXPECT_THAT(ReadAll(Misaligned(DType::kU16, Raw<uint16_t>({65535})).view), ElementsAre(65535.0f));
  EXPECT_THAT(ReadAll(Misaligned(DType::kI16, Raw<int16_t>({-32768})).view),
              ElementsAre(-32768.0f));
  EXPECT_THAT(ReadAll(Misaligned(DType::kU32, Raw<uint32_t>({4294967295u, 16777217u})).view),
              ElementsAre(4294967296.0f, 16777216.0f));
  EXPECT_THAT(ReadAll(Misaligned(DType::kI32, Raw<int32_t>({-2147483647 - 1, 16777219})).view),
              ElementsAre(-2147483648.0f, 16777220.0f));
  EXPECT_THAT(
      ReadAll(Misaligned(DType::kU64, Raw<uint64_t>({~uint64_t{0}, (uint64_t{1} << 53) + 1})).view),
      ElementsAre(18446744073709551616.0f, 9007199254740992.0f));
  EXPECT_THAT(ReadAll(Misaligned(DType::kI64, Raw<int64_t>({-5, 16777217, 16777218})).view),
              ElementsAre(-5.0f, 16777216.0f, 16777218.0f));
}

// The dtypes safetensors added after its core set: F8_E8M0 one per byte, F4
// two per byte (the first in the low nibble), F6 four per three bytes (the
// little-endian bit stream).
TEST(ReadAsFloat32Test, SubByteAndScaleDTypes) {
  std::vector<float> e8m0 = ReadAll(Misaligned(DType::kF8E8M0, {127, 0, 254, 0xFF}).view);
  EXPECT_THAT(std::vector<float>(e8m0.begin(), e8m0.begin() + 3),
              ElementsAre(1.0f, std::ldexp(1.0f, -127), std::ldexp(1.0f, 127)));
  EXPECT_TRUE(std::isnan(e8m0[3]));
  Misaligned f4(DType::kF4, {0x21, 0xF7});
  f4.view.shape = {4};
  EXPECT_THAT(ReadAll(f4.view), ElementsAre(0.5f, 1.0f, 6.0f, -6.0f));
  std::vector<float> two(2);
  ASSERT_TRUE(ReadAsFloat32(f4.view, 1, two).ok());  // an odd start
  EXPECT_THAT(two, ElementsAre(1.0f, 6.0f));
  // Codes 8 (1.0), 1 (0.125), 63 (-7.5), 31 (7.5): 0x7FF048 little-endian.
  Misaligned e2m3(DType::kF6E2M3, {0x48, 0xF0, 0x7F});
  e2m3.view.shape = {4};
  EXPECT_THAT(ReadAll(e2m3.view), ElementsAre(1.0f, 0.125f, -7.5f, 7.5f));
  ASSERT_TRUE(ReadAsFloat32(e2m3.view, 1, two).ok());
  EXPECT_THAT(two, ElementsAre(0.125f, -7.5f));
  // e3m2 code 12 (0b001100) is 1.0, 28 (0b011100) 2^(7-3) = 16.
  Misaligned e3m2(DType::kF6E3M2, {0x0C, 0x07, 0x00});  // 12 | 28 << 6
  e3m2.view.shape = {4};
  EXPECT_THAT(ReadAll(e3m2.view), ElementsAre(1.0f, 16.0f, 0.0f, 0.0f));
}

TEST(SafetensorsTest, SubByteDTypesMustFillWholeBytes) {
  EXPECT_THAT(ParseError(R"({"w":{"dtype":"F4","shape":[3],"data_offsets":[0,2]}})", 2),
              AllOf(HasSubstr("\"w\""), HasSubstr("not whole bytes")));
  EXPECT_THAT(ParseError(R"({"w":{"dtype":"F6_E3M2","shape":[2],"data_offsets":[0,2]}})", 2),
              HasSubstr("12 bits"));
  EXPECT_THAT(ParseError(R"({"w":{"dtype":"F6_E2M3","shape":[4],"data_offsets":[0,4]}})", 4),
              HasSubstr("hold 4 bytes"));
  EXPECT_THAT(ParseError(R"({"w":{"dtype":"GGML","shape":[4],"data_offsets":[0,4]}})", 4),
              HasSubstr("\"GGML\""));
}

TEST(ReadAsFloat32Test, PartialAndRangeErrors) {
  Misaligned m(DType::kF16, Raw<uint16_t>({0x3C00, 0x4000, 0x4200, 0x4400}));
  std::vector<float> two(2);
  ASSERT_TRUE(ReadAsFloat32(m.view, 1, two).ok());
  EXPECT_THAT(two, ElementsAre(2.0f, 3.0f));
  ASSERT_TRUE(ReadAsFloat32(m.view, 4, std::span<float>()).ok());
  for (int64_t first : {int64_t{3}, int64_t{-1}, int64_t{5}, std::numeric_limits<int64_t>::max()}) {
    absl::Status s = ReadAsFloat32(m.view, first, two);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << first;
    EXPECT_THAT(std::string(s.message()), AllOf(HasSubstr("\"t\""), HasSubstr("outside")));
  }
}

// ---------------------------------------------------------------- safetensors failures

TEST(SafetensorsTest, ParsesAMinimalFile) {
  const std::string header =
      R"({"__metadata__":{"a":"b"},"y":{"dtype":"U8","shape":[2],"data_offsets":[4,6]},)"
      R"("x":{"dtype":"F16","shape":[2],"data_offsets":[0,4]}})";
  std::vector<uint8_t> file = Safetensors(header, {0, 0x3C, 0, 0x40, 7, 8});
  absl::StatusOr<ParsedSafetensors> parsed = ParseSafetensors(file, "m.safetensors");
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  ASSERT_EQ(parsed->tensors.size(), 2u);
  EXPECT_EQ(parsed->tensors[0].name, "x");  // data order
  EXPECT_EQ(parsed->tensors[1].name, "y");
  EXPECT_EQ(parsed->tensors[1].bytes.data(), file.data() + 8 + header.size() + 4);
  EXPECT_EQ(parsed->tensors[0].file, "m.safetensors");
  EXPECT_EQ(parsed->metadata.at("a"), "b");
  EXPECT_THAT(ReadAll(parsed->tensors[0]), ElementsAre(1.0f, 2.0f));
}

TEST(SafetensorsTest, ShortFileAndHeaderLength) {
  EXPECT_THAT(std::string(ParseSafetensors(Bytes("abc"), "m.safetensors").status().message()),
              AllOf(HasSubstr("m.safetensors"), HasSubstr("too short")));
  std::vector<uint8_t> file = Safetensors("{}", {});
  file[0] = 200;  // header length 200 > 2 bytes present
  EXPECT_THAT(std::string(ParseSafetensors(file, "m.safetensors").status().message()),
              AllOf(HasSubstr("m.safetensors"), HasSubstr("beyond the end of the file")));
  file[0] = 0;
  file[4] = 1;  // 2^32 bytes: above safetensors' limit
  EXPECT_THAT(std::string(ParseSafetensors(file, "m.safetensors").status().message()),
              AllOf(HasSubstr("m.safetensors"), HasSubstr("above the limit")));
}

TEST(SafetensorsTest, HeaderNotAnObjectOrNotJson) {
  EXPECT_THAT(ParseError("[1, 2]", 0),
              AllOf(HasSubstr("m.safetensors"), HasSubstr("not a JSON object")));
  EXPECT_THAT(ParseError("{\"x\": ", 0),
              AllOf(HasSubstr("m.safetensors"), HasSubstr("not valid JSON")));
  EXPECT_THAT(ParseError("{} x", 0), HasSubstr("not valid JSON"));
  EXPECT_THAT(ParseError("{\"a\": \"\xff\"}", 0), HasSubstr("not valid JSON"));  // not UTF-8
  std::string deep(100, '[');
  EXPECT_THAT(ParseError("{\"a\":" + deep + std::string(100, ']') + "}", 0), HasSubstr("nested"));
}

TEST(SafetensorsTest, WrongFieldTypes) {
  EXPECT_THAT(ParseError(R"({"w": 3})", 0),
              AllOf(HasSubstr("m.safetensors"), HasSubstr("\"w\""), HasSubstr("not an object")));
  EXPECT_THAT(ParseError(R"({"w":{"dtype":3,"shape":[1],"data_offsets":[0,4]}})", 4),
              AllOf(HasSubstr("\"w\""), HasSubstr("\"dtype\" is a")));
  EXPECT_THAT(ParseError(R"({"w":{"dtype":"F32","shape":"1","data_offsets":[0,4]}})", 4),
              AllOf(HasSubstr("\"w\""), HasSubstr("\"shape\" is a string")));
  EXPECT_THAT(ParseError(R"({"w":{"dtype":"F32","shape":[1.5],"data_offsets":[0,4]}})", 4),
              AllOf(HasSubstr("\"w\""), HasSubstr("non-integer")));
  EXPECT_THAT(ParseError(R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[0]}})", 4),
              AllOf(HasSubstr("\"w\""), HasSubstr("data_offsets")));
  EXPECT_THAT(ParseError(R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[0,-4]}})", 4),
              AllOf(HasSubstr("\"w\""), HasSubstr("data_offsets")));
  EXPECT_THAT(ParseError(R"({"w":{"dtype":"F32","shape":[1],"data_offsets":"0,4"}})", 4),
              AllOf(HasSubstr("\"w\""), HasSubstr("data_offsets")));
}

TEST(SafetensorsTest, MissingFields) {
  for (const char* field : {"dtype", "shape", "data_offsets"}) {
    nlohmann::json entry = {{"dtype", "F32"}, {"shape", {1}}, {"data_offsets", {0, 4}}};
    entry.erase(field);
    const nlohmann::json header = {{"w", entry}};
    EXPECT_THAT(ParseError(header.dump(), 4),
                AllOf(HasSubstr("m.safetensors"), HasSubstr("\"w\""),
                      HasSubstr(absl::StrCat("missing field \"", field, "\""))));
  }
}

TEST(SafetensorsTest, OffsetsOutOfBoundsAndTruncatedData) {
  EXPECT_THAT(ParseError(R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", 4),
              AllOf(HasSubstr("m.safetensors"), HasSubstr("\"w\""), HasSubstr("out of bounds"),
                    HasSubstr("truncated")));
  // A real file cut short.
  TempDir dir;
  std::vector<uint8_t> bytes = ReadFile(kDataDir + "stories260K.bf16.safetensors");
  bytes.resize(bytes.size() - 100);
  WriteFile(dir / "cut.safetensors", bytes);
  absl::StatusOr<TensorSet> set = TensorSet::Open(dir / "cut.safetensors");
  ASSERT_FALSE(set.ok());
  EXPECT_THAT(std::string(set.status().message()),
              AllOf(HasSubstr("cut.safetensors"), HasSubstr("out of bounds")));
}

TEST(SafetensorsTest, OverlapGapOrderAndTrailingBytes) {
  EXPECT_THAT(ParseError(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                         R"("b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
                         8),
              AllOf(HasSubstr("m.safetensors"), HasSubstr("\"b\""), HasSubstr("overlap"),
                    HasSubstr("\"a\"")));
  EXPECT_THAT(ParseError(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
                         R"("b":{"dtype":"F32","shape":[1],"data_offsets":[8,12]}})",
                         12),
              AllOf(HasSubstr("\"b\""), HasSubstr("gap of 4 bytes")));
  EXPECT_THAT(ParseError(R"({"a":{"dtype":"F32","shape":[0],"data_offsets":[8,4]}})", 8),
              AllOf(HasSubstr("\"a\""), HasSubstr("out of order")));
  EXPECT_THAT(ParseError(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})", 6),
              AllOf(HasSubstr("m.safetensors"), HasSubstr("2 bytes after the last tensor")));
  // Header order need not be data order, and empty tensors may share an offset.
  absl::StatusOr<ParsedSafetensors> ok =
      ParseSafetensors(Safetensors(R"({"b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]},)"
                                   R"("e":{"dtype":"F32","shape":[0,3],"data_offsets":[4,4]},)"
                                   R"("a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})",
                                   std::vector<uint8_t>(8)),
                       "m.safetensors");
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_EQ(ok->tensors[0].name, "a");
  EXPECT_EQ(ok->tensors[1].name, "e");
  EXPECT_EQ(ok->tensors[2].name, "b");
}

TEST(SafetensorsTest, ShapeMismatchOverflowNegative) {
  EXPECT_THAT(ParseError(R"({"w":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", 8),
              AllOf(HasSubstr("m.safetensors"), HasSubstr("\"w\""), HasSubstr("3 elements"),
                    HasSubstr("8 bytes")));
  EXPECT_THAT(
      ParseError(R"({"w":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,0]}})",
                 0),
      AllOf(HasSubstr("\"w\""), HasSubstr("overflows int64")));
  EXPECT_THAT(ParseError(R"({"w":{"dtype":"F64","shape":[4611686018427387904],)"
                         R"("data_offsets":[0,0]}})",
                         0),
              AllOf(HasSubstr("\"w\""), HasSubstr("elements")));
  EXPECT_THAT(ParseError(R"({"w":{"dtype":"F32","shape":[18446744073709551615],)"
                         R"("data_offsets":[0,0]}})",
                         0),
              AllOf(HasSubstr("\"w\""), HasSubstr("overflows int64")));
  EXPECT_THAT(ParseError(R"({"w":{"dtype":"F32","shape":[2,-1],"data_offsets":[0,0]}})", 0),
              AllOf(HasSubstr("\"w\""), HasSubstr("negative dimension -1")));
}

TEST(SafetensorsTest, UnknownDType) {
  EXPECT_THAT(ParseError(R"({"w":{"dtype":"F7","shape":[1],"data_offsets":[0,1]}})", 1),
              AllOf(HasSubstr("m.safetensors"), HasSubstr("\"w\""), HasSubstr("\"F7\"")));
}

TEST(SafetensorsTest, DuplicateTensorNamesAndKeys) {
  EXPECT_THAT(ParseError(R"({"w":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},)"
                         R"("w":{"dtype":"U8","shape":[1],"data_offsets":[1,2]}})",
                         2),
              AllOf(HasSubstr("m.safetensors"), HasSubstr("duplicate key \"w\"")));
  EXPECT_THAT(
      ParseError(R"({"w":{"dtype":"U8","dtype":"F32","shape":[1],"data_offsets":[0,1]}})", 1),
      HasSubstr("duplicate key \"dtype\""));
  // The same key in two different objects is fine.
  EXPECT_TRUE(
      ParseSafetensors(Safetensors(R"({"__metadata__":{"w":"x"},)"
                                   R"("w":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}})",
                                   {1}),
                       "m.safetensors")
          .ok());
}

TEST(SafetensorsTest, Metadata) {
  EXPECT_THAT(ParseError(R"({"__metadata__":{"a":1}})", 0),
              AllOf(HasSubstr("m.safetensors"), HasSubstr("\"a\""), HasSubstr("not a string")));
  EXPECT_THAT(ParseError(R"({"__metadata__":["a"]})", 0), HasSubstr("not an object"));
  EXPECT_THAT(ParseError(R"({"__metadata__":{"a":"x","a":"y"}})", 0),
              HasSubstr("duplicate key \"a\""));
  absl::StatusOr<ParsedSafetensors> null_metadata =
      ParseSafetensors(Safetensors(R"({"__metadata__":null})", {}), "m.safetensors");
  ASSERT_TRUE(null_metadata.ok());
  EXPECT_TRUE(null_metadata->metadata.empty());
}

TEST(MappedFileTest, ErrorsAndEmptyFile) {
  TempDir dir;
  absl::StatusOr<std::unique_ptr<MappedFile>> missing = MappedFile::Open(dir / "none.safetensors");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(missing.status().message()),
              AllOf(HasSubstr(dir / "none.safetensors"), HasSubstr("No such file")));
  EXPECT_THAT(std::string(MappedFile::Open(dir.path()).status().message()),
              HasSubstr("not a regular file"));
  WriteFile(dir / "empty.safetensors", {});
  absl::StatusOr<std::unique_ptr<MappedFile>> empty = MappedFile::Open(dir / "empty.safetensors");
  ASSERT_TRUE(empty.ok());
  EXPECT_TRUE((*empty)->bytes().empty());
  (*empty)->Release((*empty)->bytes());
  EXPECT_THAT(std::string(TensorSet::Open(dir / "empty.safetensors").status().message()),
              AllOf(HasSubstr("empty.safetensors"), HasSubstr("too short")));
  EXPECT_THAT(std::string(TensorSet::Open(dir / "x.bin").status().message()),
              AllOf(HasSubstr("x.bin"), HasSubstr("unknown kind")));
}

// A file truncated after it was mapped: reading its views past the new end
// would raise SIGBUS; instead they read zeros and CheckIntact says so.
TEST(MappedFileTest, ATruncatedFileIsAnErrorNotACrash) {
  TempDir dir;
  const size_t n = 1 << 20;  // 4 MiB of float32, many pages
  std::vector<uint8_t> data(n * 4);
  for (size_t i = 0; i < n; ++i) {
    const float v = 1.0f + static_cast<float>(i % 7);
    std::memcpy(&data[4 * i], &v, 4);
  }
  const std::string header =
      absl::StrCat(R"({"w":{"dtype":"F32","shape":[)", n, R"(],"data_offsets":[0,)", n * 4, "]}}");
  const std::string path = dir / "m.safetensors";
  WriteFile(path, Safetensors(header, data));
  absl::StatusOr<TensorSet> set = TensorSet::Open(path);
  ASSERT_TRUE(set.ok()) << set.status();
  ASSERT_TRUE(set->CheckIntact().ok());
  ASSERT_EQ(truncate(path.c_str(), 8 + header.size() + 4096 * 3 + 100), 0);
  std::vector<float> values(n);
  // Reads every page: past the end without the guard the process dies.
  ASSERT_TRUE(ReadAsFloat32(set->tensors()[0], 0, values).ok());
  EXPECT_EQ(values[0], 1.0f);
  EXPECT_EQ(values[n - 1], 0.0f);  // zeros past the end, never reported:
  const absl::Status intact = set->CheckIntact();
  EXPECT_EQ(intact.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(std::string(intact.message()),
              AllOf(HasSubstr(path), HasSubstr("shrank from"), HasSubstr("while being read")));
  // Grown back to its size, the read past the end is still remembered.
  ASSERT_EQ(truncate(path.c_str(), 8 + header.size() + n * 4), 0);
  EXPECT_THAT(std::string(set->CheckIntact().message()), HasSubstr("truncated while being read"));
}

// A SIGBUS outside every mapping still ends the process as SIGBUS.
TEST(MappedFileDeathTest, OtherBusErrorsStillKill) {
  TempDir dir;
  WriteFile(dir / "m.safetensors", Safetensors(R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})",
                                               std::vector<uint8_t>(4)));
  ASSERT_TRUE(TensorSet::Open(dir / "m.safetensors").ok());  // the guard is installed
  // Killed by it, or (under AddressSanitizer, whose handler comes before
  // lowp's) reported and exited.
  EXPECT_DEATH(raise(SIGBUS), "");
}

TEST(MappedFileTest, FifosAndDevicesAreRefusedWithoutBlocking) {
  TempDir dir;
  ASSERT_EQ(mkfifo((dir / "p.safetensors").c_str(), 0600), 0);
  for (const std::string& path : {dir / "p.safetensors", std::string("/dev/zero"), dir.path()}) {
    absl::StatusOr<std::unique_ptr<MappedFile>> file = MappedFile::Open(path);
    ASSERT_FALSE(file.ok()) << path;
    EXPECT_THAT(std::string(file.status().message()),
                AllOf(HasSubstr(path), HasSubstr("not a regular file")));
  }
  EXPECT_THAT(std::string(MappedFile::Open(dir / "p.safetensors").status().message()),
              HasSubstr("a named pipe (FIFO)"));
  EXPECT_THAT(std::string(MappedFile::Open(std::string("a\0b", 3)).status().message()),
              HasSubstr("NUL"));
}

// ---------------------------------------------------------------- writer

std::vector<uint8_t> Pattern(size_t n, int seed) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<uint8_t>(i * 7 + seed * 31 + 1);
  return v;
}

TEST(SafetensorsWriterTest, RoundTripEveryDType) {
  TempDir dir;
  std::vector<SafetensorsWriter::Entry> entries;
  int k = 0;
  for (DType d : AllDTypes()) {
    entries.push_back({absl::StrCat("t.", DTypeName(d)), d, {k % 3 + 1, 4}});
    ++k;
  }
  entries.push_back({"scalar", DType::kF32, {}});
  entries.push_back({"empty", DType::kF16, {0, 5}});
  const std::map<std::string, std::string> metadata = {{"format", "pt"}, {"note", "\"q\" \u00e9"}};
  const std::string path = dir / "rt.safetensors";
  auto writer = SafetensorsWriter::Create(path, entries, metadata);
  ASSERT_TRUE(writer.ok()) << writer.status();
  std::vector<std::vector<uint8_t>> contents;
  for (size_t i = 0; i < entries.size(); ++i) {
    const int64_t n = *ShapeElements(entries[i].shape, "x");
    contents.push_back(Pattern(*DTypeStorageBytes(entries[i].dtype, static_cast<uint64_t>(n), "x"),
                               static_cast<int>(i)));
    // In pieces of 5 bytes, across tensor boundaries too.
  }
  std::vector<uint8_t> all;
  for (const auto& c : contents) all.insert(all.end(), c.begin(), c.end());
  for (size_t i = 0; i < all.size(); i += 5) {
    const size_t n = std::min<size_t>(5, all.size() - i);
    ASSERT_TRUE((*writer)->Write(std::span<const uint8_t>(all).subspan(i, n)).ok());
  }
  EXPECT_FALSE(std::filesystem::exists(path));  // not before Finish
  ASSERT_TRUE((*writer)->Finish().ok());
  EXPECT_THAT(dir.Files(), ElementsAre("rt.safetensors"));  // no temporary left

  const std::vector<uint8_t> file = ReadFile(path);
  uint64_t header_bytes = 0;
  std::memcpy(&header_bytes, file.data(), 8);
  EXPECT_EQ((8 + header_bytes) % 8, 0u);  // data 8-byte aligned

  absl::StatusOr<TensorSet> set = TensorSet::Open(path);
  ASSERT_TRUE(set.ok()) << set.status();
  EXPECT_EQ(set->metadata(), metadata);
  ASSERT_EQ(set->tensors().size(), entries.size());
  for (size_t i = 0; i < entries.size(); ++i) {
    const TensorView& t = set->tensors()[i];
    EXPECT_EQ(t.name, entries[i].name);
    EXPECT_EQ(t.dtype, entries[i].dtype);
    EXPECT_EQ(t.shape, entries[i].shape);
    EXPECT_EQ(t.file, path);
    EXPECT_EQ(std::vector<uint8_t>(t.bytes.begin(), t.bytes.end()), contents[i]) << t.name;
  }
}

TEST(SafetensorsWriterTest, ErrorsLeaveNothingBehind) {
  TempDir dir;
  const std::string path = dir / "w.safetensors";
  EXPECT_THAT(
      std::string(SafetensorsWriter::Create(path, {{"a", DType::kU8, {1}}, {"a", DType::kU8, {1}}})
                      .status()
                      .message()),
      AllOf(HasSubstr("w.safetensors"), HasSubstr("\"a\" declared twice")));
  EXPECT_THAT(
      std::string(SafetensorsWriter::Create(path, {{"a", DType::kU8, {-1}}}).status().message()),
      HasSubstr("negative"));
  EXPECT_FALSE(SafetensorsWriter::Create(dir / "no/such/dir.safetensors", {}).ok());
  {
    auto writer = SafetensorsWriter::Create(path, {{"a", DType::kU16, {2}}});
    ASSERT_TRUE(writer.ok());
    ASSERT_TRUE((*writer)->Write(Pattern(3, 0)).ok());
    absl::Status s = (*writer)->Finish();
    EXPECT_THAT(std::string(s.message()), AllOf(HasSubstr("\"a\""), HasSubstr("3 of its 4")));
  }
  {
    auto writer = SafetensorsWriter::Create(path, {{"a", DType::kU16, {2}}});
    ASSERT_TRUE(writer.ok());
    EXPECT_THAT(std::string((*writer)->Write(Pattern(5, 0)).message()),
                HasSubstr("beyond the end"));
    EXPECT_FALSE((*writer)->Finish().ok());
  }
  {
    auto writer = SafetensorsWriter::Create(path, {{"a", DType::kU16, {2}}});
    ASSERT_TRUE(writer.ok());
    ASSERT_TRUE((*writer)->Write(Pattern(4, 0)).ok());
    EXPECT_EQ(dir.Files().size(), 1u);  // the temporary
    // Destroyed without Finish.
  }
  EXPECT_TRUE(dir.Files().empty());
}

// ---------------------------------------------------------------- sharded

void WriteShard(const std::string& path, const std::vector<std::string>& names,
                const std::map<std::string, std::string>& metadata = {}) {
  std::vector<SafetensorsWriter::Entry> entries;
  for (const std::string& name : names) entries.push_back({name, DType::kF32, {2}});
  auto writer = SafetensorsWriter::Create(path, entries, metadata);
  ASSERT_TRUE(writer.ok()) << writer.status();
  for (size_t i = 0; i < names.size(); ++i) {
    const float v[2] = {static_cast<float>(i), 0.5f};
    ASSERT_TRUE((*writer)->Write({reinterpret_cast<const uint8_t*>(v), sizeof(v)}).ok());
  }
  ASSERT_TRUE((*writer)->Finish().ok());
}

void WriteIndex(const std::string& path, const nlohmann::ordered_json& weight_map) {
  const nlohmann::ordered_json index = {{"metadata", {{"total_size", 48}}},
                                        {"weight_map", weight_map}};
  const std::string text = index.dump(2);
  WriteFile(path, Bytes(text));
}

TEST(ShardedTest, OpensEveryShardInIndexOrder) {
  TempDir dir;
  WriteShard(dir / "model-00002.safetensors", {"c", "d"});
  WriteShard(dir / "model-00001.safetensors", {"a", "b"}, {{"format", "pt"}});
  nlohmann::ordered_json map;
  map["a"] = "model-00001.safetensors";
  map["c"] = "model-00002.safetensors";
  map["b"] = "model-00001.safetensors";
  map["d"] = "model-00002.safetensors";
  WriteIndex(dir / "model.safetensors.index.json", map);
  absl::StatusOr<TensorSet> set = TensorSet::Open(dir / "model.safetensors.index.json");
  ASSERT_TRUE(set.ok()) << set.status();
  std::vector<std::string> names;
  for (const TensorView& t : set->tensors()) names.push_back(t.name);
  EXPECT_THAT(names, ElementsAre("a", "b", "c", "d"));
  EXPECT_EQ(set->tensors()[2].file, dir / "model-00002.safetensors");
  EXPECT_EQ(set->metadata().at("format"), "pt");
  std::vector<float> v(2);
  ASSERT_TRUE(ReadAsFloat32(set->tensors()[3], 0, v).ok());
  EXPECT_THAT(v, ElementsAre(1.0f, 0.5f));
}

TEST(ShardedTest, IndexAndShardMustAgree) {
  TempDir dir;
  WriteShard(dir / "s1.safetensors", {"a", "b"});
  WriteShard(dir / "s2.safetensors", {"c"});
  const std::string index = dir / "m.safetensors.index.json";
  auto error = [&](const nlohmann::ordered_json& map) {
    WriteIndex(index, map);
    absl::StatusOr<TensorSet> set = TensorSet::Open(index);
    EXPECT_FALSE(set.ok());
    return std::string(set.status().message());
  };
  // The index names a tensor its shard lacks.
  EXPECT_THAT(error({{"a", "s1.safetensors"},
                     {"b", "s1.safetensors"},
                     {"z", "s1.safetensors"},
                     {"c", "s2.safetensors"}}),
              AllOf(HasSubstr("m.safetensors.index.json"), HasSubstr("\"z\""),
                    HasSubstr("\"s1.safetensors\""), HasSubstr("does not hold it")));
  // A shard holds a tensor the index does not name.
  EXPECT_THAT(error({{"a", "s1.safetensors"}, {"c", "s2.safetensors"}}),
              AllOf(HasSubstr("m.safetensors.index.json"), HasSubstr("\"b\""),
                    HasSubstr("\"s1.safetensors\""), HasSubstr("does not name")));
  // The index puts a tensor in the wrong shard.
  EXPECT_THAT(error({{"a", "s1.safetensors"}, {"b", "s2.safetensors"}, {"c", "s2.safetensors"}}),
              AllOf(HasSubstr("\"b\""), HasSubstr("\"s2.safetensors\"")));
  // A missing shard file.
  EXPECT_THAT(error({{"a", "s3.safetensors"}}),
              AllOf(HasSubstr("m.safetensors.index.json"), HasSubstr("s3.safetensors"),
                    HasSubstr("No such file")));
  // Malformed indexes.
  WriteFile(index, Bytes(R"({"weight_map": [1]})"));
  EXPECT_THAT(std::string(TensorSet::Open(index).status().message()),
              AllOf(HasSubstr("m.safetensors.index.json"), HasSubstr("\"weight_map\" is a")));
  WriteFile(index, Bytes(R"({"weight_map": {}, "metadata": 3})"));
  EXPECT_THAT(std::string(TensorSet::Open(index).status().message()),
              HasSubstr("\"metadata\" is a"));
  WriteFile(index, Bytes(R"([])"));
  EXPECT_THAT(std::string(TensorSet::Open(index).status().message()),
              HasSubstr("not a JSON object"));
  WriteFile(index, Bytes(R"({"weight_map": {"a": "s1.safetensors", "a": "s1.safetensors"}})"));
  EXPECT_THAT(std::string(TensorSet::Open(index).status().message()),
              AllOf(HasSubstr("m.safetensors.index.json"), HasSubstr("duplicate key \"a\"")));
  WriteFile(index, Bytes(R"({"metadata": {}})"));
  EXPECT_THAT(std::string(TensorSet::Open(index).status().message()),
              HasSubstr("missing \"weight_map\""));
  WriteFile(index, Bytes(R"({"weight_map": {"a": 3}})"));
  EXPECT_THAT(std::string(TensorSet::Open(index).status().message()),
              AllOf(HasSubstr("\"a\""), HasSubstr("not a string")));
}

TEST(ShardedTest, ShardNamesMustBePlainFileNames) {
  TempDir dir;
  std::filesystem::create_directory(dir / "sub");
  WriteShard(dir / "sub/s.safetensors", {"a"});
  WriteShard(dir / "outside.safetensors", {"a"});
  for (const char* shard : {"../outside.safetensors", "sub/s.safetensors", "/etc/passwd", "..", "",
                            "a\\b.safetensors"}) {
    const std::string index = dir / "sub/m.safetensors.index.json";
    WriteIndex(index, {{"a", shard}});
    absl::StatusOr<TensorSet> set = TensorSet::Open(index);
    ASSERT_FALSE(set.ok()) << shard;
    EXPECT_THAT(std::string(set.status().message()),
                AllOf(HasSubstr("m.safetensors.index.json"), HasSubstr("\"a\""),
                      HasSubstr("not a plain file name")))
        << shard;
  }
}

TEST(TensorSetTest, OpenAllRejectsDuplicateNames) {
  TempDir dir;
  WriteShard(dir / "a.safetensors", {"x", "y"}, {{"k", "first"}});
  WriteShard(dir / "b.safetensors", {"z"}, {{"k", "second"}});
  WriteShard(dir / "c.safetensors", {"y"});
  absl::StatusOr<TensorSet> ok = TensorSet::OpenAll({dir / "a.safetensors", dir / "b.safetensors"});
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_EQ(ok->tensors().size(), 3u);
  EXPECT_EQ(ok->metadata().at("k"), "first");
  absl::StatusOr<TensorSet> dup =
      TensorSet::OpenAll({dir / "a.safetensors", dir / "c.safetensors"});
  ASSERT_FALSE(dup.ok());
  EXPECT_THAT(std::string(dup.status().message()),
              AllOf(HasSubstr("\"y\""), HasSubstr("a.safetensors"), HasSubstr("c.safetensors")));
}

// ---------------------------------------------------------------- npy

// A .npy image: magic, version, header length, the dict padded to 64 bytes.
std::vector<uint8_t> Npy(int major, const std::string& dict, const std::vector<uint8_t>& data) {
  const size_t prefix = major == 1 ? 10 : 12;
  std::string header = dict;
  while ((prefix + header.size() + 1) % 64 != 0) header += ' ';
  header += '\n';
  std::vector<uint8_t> file = {0x93, 'N', 'U', 'M', 'P', 'Y', static_cast<uint8_t>(major), 0};
  for (size_t i = 0; i < prefix - 8; ++i) {
    file.push_back(static_cast<uint8_t>(header.size() >> (8 * i)));
  }
  file.insert(file.end(), header.begin(), header.end());
  file.insert(file.end(), data.begin(), data.end());
  return file;
}

std::string NpyError(const std::vector<uint8_t>& file) {
  absl::StatusOr<TensorView> t = ParseNpy(file, "dir/w.npy");
  EXPECT_FALSE(t.ok());
  return t.ok() ? "" : std::string(t.status().message());
}

TEST(NpyTest, Versions1To3) {
  const std::vector<uint8_t> data = Raw<float>({1, 2, 3, 4, 5, 6});
  for (int major : {1, 2, 3}) {
    const std::vector<uint8_t> file =
        Npy(major, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", data);
    absl::StatusOr<TensorView> t = ParseNpy(file, "dir/w.npy");
    ASSERT_TRUE(t.ok()) << t.status();
    EXPECT_EQ(t->name, "w");
    EXPECT_EQ(t->file, "dir/w.npy");
    EXPECT_EQ(t->dtype, DType::kF32);
    EXPECT_THAT(t->shape, ElementsAre(2, 3));
    EXPECT_THAT(ReadAll(*t), ElementsAre(1, 2, 3, 4, 5, 6));
  }
  // Through TensorSet, from a file; a scalar and a 1-tuple; double quotes.
  TempDir dir;
  WriteFile(dir / "bias.npy",
            Npy(1, R"({"descr": "<f8", "shape": (), "fortran_order": False})", Raw<double>({0.5})));
  absl::StatusOr<TensorSet> set = TensorSet::Open(dir / "bias.npy");
  ASSERT_TRUE(set.ok()) << set.status();
  ASSERT_EQ(set->tensors().size(), 1u);
  EXPECT_EQ(set->tensors()[0].name, "bias");
  EXPECT_TRUE(set->tensors()[0].shape.empty());
  EXPECT_THAT(ReadAll(set->tensors()[0]), ElementsAre(0.5f));
  absl::StatusOr<TensorView> one =
      ParseNpy(Npy(3, "{'descr':'|b1','fortran_order':False,'shape':(3,)}", {0, 1, 1}), "x.npy");
  ASSERT_TRUE(one.ok()) << one.status();
  EXPECT_EQ(one->dtype, DType::kBool);
}

TEST(NpyTest, EveryDescr) {
  const std::map<std::string, DType> descrs = {
      {"<f2", DType::kF16}, {"<f4", DType::kF32}, {"<f8", DType::kF64}, {"|i1", DType::kI8},
      {"|u1", DType::kU8},  {"<i2", DType::kI16}, {"<u2", DType::kU16}, {"<i4", DType::kI32},
      {"<u4", DType::kU32}, {"<i8", DType::kI64}, {"<u8", DType::kU64}, {"|b1", DType::kBool}};
  for (const auto& [descr, dtype] : descrs) {
    absl::StatusOr<TensorView> t =
        ParseNpy(Npy(1, "{'descr': '" + descr + "', 'fortran_order': False, 'shape': (2,), }",
                     std::vector<uint8_t>(2 * DTypeBytes(dtype))),
                 "w.npy");
    ASSERT_TRUE(t.ok()) << descr << t.status();
    EXPECT_EQ(t->dtype, dtype) << descr;
  }
}

TEST(NpyTest, Rejections) {
  const std::vector<uint8_t> data(24);
  EXPECT_THAT(NpyError(Npy(1, "{'descr': '>f4', 'fortran_order': False, 'shape': (2, 3), }", data)),
              AllOf(HasSubstr("dir/w.npy"), HasSubstr("big-endian"), HasSubstr(">f4")));
  EXPECT_THAT(NpyError(Npy(1, "{'descr': '<f4', 'fortran_order': True, 'shape': (2, 3), }", data)),
              AllOf(HasSubstr("dir/w.npy"), HasSubstr("Fortran")));
  EXPECT_THAT(NpyError(Npy(1, "{'descr': '<c8', 'fortran_order': False, 'shape': (3,), }", data)),
              AllOf(HasSubstr("unsupported dtype '<c8'")));
  EXPECT_THAT(
      NpyError(Npy(1, "{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (6,), }", data)),
      HasSubstr("structured"));
  EXPECT_THAT(NpyError(Npy(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 4), }", data)),
              AllOf(HasSubstr("dir/w.npy"), HasSubstr("truncated")));
  EXPECT_THAT(NpyError(Npy(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 2), }", data)),
              HasSubstr("8 bytes after"));
  EXPECT_THAT(NpyError(Npy(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (6), }", data)),
              HasSubstr("not a tuple"));
  EXPECT_THAT(NpyError(Npy(1, "{'descr': '<f4', 'fortran_order': False}", data)),
              HasSubstr("needs the keys"));
  EXPECT_THAT(NpyError(Npy(1,
                           "{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, "
                           "'shape': (6,)}",
                           data)),
              HasSubstr("duplicate key 'descr'"));
  EXPECT_THAT(
      NpyError(Npy(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (6,), 'x': 1}", data)),
      HasSubstr("expected a string"));
  EXPECT_THAT(NpyError(Npy(1, "{'descr': '<f4', 'fortran_order': 0, 'shape': (6,)}", data)),
              HasSubstr("expected a string, True"));
  EXPECT_THAT(NpyError(Npy(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (6,)} x", data)),
              HasSubstr("after the header dict"));
  EXPECT_THAT(NpyError(Npy(1,
                           "{'descr': '<f4', 'fortran_order': False, "
                           "'shape': (20000000000000000000,)}",
                           data)),
              HasSubstr("overflows"));
  // 2^63 - 1 is the largest dimension; one more overflows.
  EXPECT_THAT(NpyError(Npy(1,
                           "{'descr': '<f4', 'fortran_order': False, "
                           "'shape': (9223372036854775808,)}",
                           data)),
              HasSubstr("overflows int64"));
  EXPECT_THAT(NpyError(Npy(1,
                           "{'descr': '<f4', 'fortran_order': False, "
                           "'shape': (9223372036854775807, 0)}",
                           data)),
              HasSubstr("24 bytes after"));
  EXPECT_THAT(NpyError(Npy(1,
                           "{'descr': '<f4', 'fortran_order': False, "
                           "'shape': (4294967296, 4294967296)}",
                           data)),
              HasSubstr("overflows"));
  std::vector<uint8_t> version =
      Npy(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (6,)}", data);
  version[6] = 4;
  EXPECT_THAT(NpyError(version), HasSubstr("unsupported npy version 4.0"));
  std::vector<uint8_t> magic = version;
  magic[1] = 'n';
  EXPECT_THAT(NpyError(magic), HasSubstr("magic"));
  std::vector<uint8_t> long_header =
      Npy(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (6,)}", data);
  long_header[9] = 0xFF;
  EXPECT_THAT(NpyError(long_header), HasSubstr("beyond the end of the file"));
  EXPECT_THAT(NpyError(Bytes("\x93NUMPY")), HasSubstr("magic"));
}

// ---------------------------------------------------------------- patterns

TEST(MatchesPatternTest, Globs) {
  EXPECT_TRUE(MatchesPattern("", "anything"));
  EXPECT_TRUE(MatchesPattern("*", "model.norm.weight"));
  EXPECT_TRUE(MatchesPattern("*.weight", "model.norm.weight"));
  EXPECT_FALSE(MatchesPattern("*.weight", "model.norm.bias"));
  EXPECT_TRUE(MatchesPattern("model.layers.?.mlp.*", "model.layers.3.mlp.up_proj.weight"));
  EXPECT_FALSE(MatchesPattern("model.layers.?.mlp.*", "model.layers.12.mlp.up_proj.weight"));
  EXPECT_TRUE(MatchesPattern("lm_head.weight,*embed*", "model.embed_tokens.weight"));
  EXPECT_TRUE(MatchesPattern("lm_head.weight,*embed*", "lm_head.weight"));
  EXPECT_TRUE(MatchesPattern("lm_head.weight, *embed*", "model.embed_tokens.weight"));
  EXPECT_FALSE(MatchesPattern("lm_head.weight,*embed*", "lm_head.weight2"));
  EXPECT_FALSE(MatchesPattern("norm", "model.norm.weight"));  // whole name only
  EXPECT_TRUE(MatchesPattern("a*b*c", "aXbYbZc"));
  EXPECT_FALSE(MatchesPattern("a*b*c", "aXbYbZ"));
  EXPECT_TRUE(MatchesPattern("**?", "x"));
  EXPECT_FALSE(MatchesPattern("?", ""));
}

// ---------------------------------------------------------------- stories260K

TEST(Stories260KTest, BothFilesHoldTheModel) {
  absl::StatusOr<TensorSet> f32 = TensorSet::Open(kDataDir + "stories260K.f32.safetensors");
  absl::StatusOr<TensorSet> bf16 = TensorSet::Open(kDataDir + "stories260K.bf16.safetensors");
  ASSERT_TRUE(f32.ok()) << f32.status();
  ASSERT_TRUE(bf16.ok()) << bf16.status();
  ASSERT_EQ(f32->tensors().size(), 48u);
  ASSERT_EQ(bf16->tensors().size(), 48u);
  std::map<std::string, const TensorView*> by_name;
  int64_t total = 0;
  for (const TensorView& t : f32->tensors()) {
    EXPECT_EQ(t.dtype, DType::kF32) << t.name;
    by_name[t.name] = &t;
    total += t.elements();
  }
  EXPECT_EQ(total, 292800);
  EXPECT_THAT(by_name.at("model.embed_tokens.weight")->shape, ElementsAre(512, 64));
  EXPECT_THAT(by_name.at("lm_head.weight")->shape, ElementsAre(512, 64));
  EXPECT_THAT(by_name.at("model.norm.weight")->shape, ElementsAre(64));
  EXPECT_THAT(by_name.at("model.layers.4.mlp.gate_proj.weight")->shape, ElementsAre(172, 64));
  EXPECT_THAT(by_name.at("model.layers.4.mlp.down_proj.weight")->shape, ElementsAre(64, 172));
  EXPECT_THAT(by_name.at("model.layers.0.self_attn.k_proj.weight")->shape, ElementsAre(32, 64));
  for (int i = 0; i < 5; ++i) {
    for (const char* part : {"self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj",
                             "self_attn.o_proj", "mlp.gate_proj", "mlp.up_proj", "mlp.down_proj",
                             "input_layernorm", "post_attention_layernorm"}) {
      EXPECT_TRUE(by_name.count(absl::StrCat("model.layers.", i, ".", part, ".weight")))
          << i << part;
    }
  }
  EXPECT_EQ(f32->metadata().at("dtype"), "F32");

  // The bf16 file is the f32 file rounded to nearest even.
  const Format bf16_format = *FindFormat("bf16");
  float absmax = 0;
  for (const TensorView& t : bf16->tensors()) {
    EXPECT_EQ(t.dtype, DType::kBF16) << t.name;
    const TensorView& ref = *by_name.at(t.name);
    ASSERT_EQ(t.shape, ref.shape) << t.name;
    std::vector<float> wide(ref.elements()), narrow(t.elements());
    ASSERT_TRUE(ReadAsFloat32(ref, 0, wide).ok());
    ASSERT_TRUE(ReadAsFloat32(t, 0, narrow).ok());
    for (size_t i = 0; i < wide.size(); ++i) {
      absmax = std::max(absmax, std::abs(wide[i]));
      const uint32_t code = EncodeFloat32(bf16_format, wide[i]);
      uint16_t stored;
      std::memcpy(&stored, t.bytes.data() + 2 * i, 2);
      ASSERT_EQ(stored, code) << t.name << "[" << i << "]";
      ASSERT_EQ(narrow[i], std::bit_cast<float>(code << 16)) << t.name << "[" << i << "]";
    }
  }
  EXPECT_NEAR(absmax, 4.425f, 0.0005f);  // as PROVENANCE.md records it
}

TEST(Stories260KTest, ReleaseKeepsViewsUsable) {
  absl::StatusOr<TensorSet> set = TensorSet::Open(kDataDir + "stories260K.f32.safetensors");
  ASSERT_TRUE(set.ok()) << set.status();
  std::vector<std::vector<float>> before;
  for (const TensorView& t : set->tensors()) before.push_back(ReadAll(t));
  for (const TensorView& t : set->tensors()) set->Release(t);
  TensorView outside;  // a view of no file: ignored
  set->Release(outside);
  for (size_t i = 0; i < set->tensors().size(); ++i) {
    EXPECT_EQ(ReadAll(set->tensors()[i]), before[i]) << set->tensors()[i].name;
  }
  // A moved set keeps its mappings.
  TensorSet moved = std::move(*set);
  EXPECT_EQ(ReadAll(moved.tensors()[0]), before[0]);
}

}  // namespace
}  // namespace lowp
