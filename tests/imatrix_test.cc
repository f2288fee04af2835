// llama.cpp's importance-matrix files (io/imatrix.h): a legacy .dat and a
// GGUF built here byte by byte from llama.cpp's save_imatrix_legacy and
// save_imatrix (with ggml's gguf_write_out layout), read to the values
// llama-quantize computes; lowp's writers give those same bytes; both formats
// round trip; every malformed case is refused naming the file and the entry;
// lookups by llama.cpp's and Hugging Face's names; FIFOs and directories
// refused; a failed write leaves no file behind.
#include <sys/stat.h>
#include <unistd.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "io/imatrix.h"

namespace lowp {
namespace {

using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::ElementsAreArray;
using ::testing::HasSubstr;

// ------------------------------------------------------------ byte builders

template <typename T>
void Put(std::vector<uint8_t>& out, T v) {
  uint8_t b[sizeof(T)];
  std::memcpy(b, &v, sizeof(T));
  out.insert(out.end(), b, b + sizeof(T));
}
void PutBytes(std::vector<uint8_t>& out, const std::string& s) {
  out.insert(out.end(), s.begin(), s.end());
}
void PutFloats(std::vector<uint8_t>& out, const std::vector<float>& v) {
  for (float f : v) Put<float>(out, f);
}

// A legacy entry as save_imatrix_legacy writes it: i32 name length, name,
// i32 ncall, i32 nval, nval f32.
void LegacyEntry(std::vector<uint8_t>& out, const std::string& name, int32_t ncall,
                 const std::vector<float>& values) {
  Put<int32_t>(out, static_cast<int32_t>(name.size()));
  PutBytes(out, name);
  Put<int32_t>(out, ncall);
  Put<int32_t>(out, static_cast<int32_t>(values.size()));
  PutFloats(out, values);
}
// The tail: i32 chunk count, i32 dataset length, the dataset.
void LegacyTail(std::vector<uint8_t>& out, int32_t chunks, const std::string& dataset) {
  Put<int32_t>(out, chunks);
  Put<int32_t>(out, static_cast<int32_t>(dataset.size()));
  PutBytes(out, dataset);
}

// GGUF as ggml's gguf_write_out writes it: version 3, i64 counts, keys with
// i32 types, tensor infos (u32 n_dims, i64 ne, i32 type, u64 offset), zeros
// to 32, each tensor's data padded to 32.
struct Kv {
  std::string key;
  std::vector<uint8_t> typed_value;  // i32 type and the value
};
Kv Str(const std::string& key, const std::string& v) {
  Kv kv{key, {}};
  Put<int32_t>(kv.typed_value, 8);
  Put<uint64_t>(kv.typed_value, v.size());
  PutBytes(kv.typed_value, v);
  return kv;
}
Kv U32(const std::string& key, uint32_t v) {
  Kv kv{key, {}};
  Put<int32_t>(kv.typed_value, 4);
  Put<uint32_t>(kv.typed_value, v);
  return kv;
}
Kv U64(const std::string& key, uint64_t v) {
  Kv kv{key, {}};
  Put<int32_t>(kv.typed_value, 10);
  Put<uint64_t>(kv.typed_value, v);
  return kv;
}
Kv StrArray(const std::string& key, const std::vector<std::string>& v) {
  Kv kv{key, {}};
  Put<int32_t>(kv.typed_value, 9);
  Put<int32_t>(kv.typed_value, 8);
  Put<uint64_t>(kv.typed_value, v.size());
  for (const std::string& s : v) {
    Put<uint64_t>(kv.typed_value, s.size());
    PutBytes(kv.typed_value, s);
  }
  return kv;
}
struct T {
  std::string name;
  std::vector<int64_t> ne;  // as written (already trimmed as ggml_n_dims does)
  std::vector<uint8_t> data;
  int32_t type = 0;  // GGML_TYPE_F32
};
T F32(const std::string& name, std::vector<int64_t> ne, const std::vector<float>& v) {
  T t{name, std::move(ne), {}, 0};
  PutFloats(t.data, v);
  return t;
}
std::vector<uint8_t> Gguf(const std::vector<Kv>& kvs, const std::vector<T>& tensors) {
  std::vector<uint8_t> out;
  PutBytes(out, "GGUF");
  Put<uint32_t>(out, 3);
  Put<int64_t>(out, static_cast<int64_t>(tensors.size()));
  Put<int64_t>(out, static_cast<int64_t>(kvs.size()));
  for (const Kv& kv : kvs) {
    Put<uint64_t>(out, kv.key.size());
    PutBytes(out, kv.key);
    out.insert(out.end(), kv.typed_value.begin(), kv.typed_value.end());
  }
  uint64_t offset = 0;
  for (const T& t : tensors) {
    Put<uint64_t>(out, t.name.size());
    PutBytes(out, t.name);
    Put<uint32_t>(out, static_cast<uint32_t>(t.ne.size()));
    for (int64_t d : t.ne) Put<int64_t>(out, d);
    Put<int32_t>(out, t.type);
    Put<uint64_t>(out, offset);
    offset += (t.data.size() + 31) / 32 * 32;
  }
  while (out.size() % 32 != 0) out.push_back(0);
  for (const T& t : tensors) {
    out.insert(out.end(), t.data.begin(), t.data.end());
    while (out.size() % 32 != 0) out.push_back(0);
  }
  return out;
}
// llama-imatrix's metadata, in save_imatrix's order.
std::vector<Kv> Metadata(const std::vector<std::string>& datasets, uint32_t chunks,
                         uint32_t chunk_size) {
  return {Str("general.type", "imatrix"), StrArray("imatrix.datasets", datasets),
          U32("imatrix.chunk_count", chunks), U32("imatrix.chunk_size", chunk_size)};
}

// ------------------------------------------------------------------ files

class ImatrixTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = ::testing::TempDir() + "/imatrix_test_XXXXXX";
    ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::string Path(const std::string& name) const { return dir_ + "/" + name; }
  std::string Write(const std::string& name, const std::vector<uint8_t>& bytes) const {
    const std::string path = Path(name);
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
    return path;
  }
  static std::vector<uint8_t> Bytes(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  }
  // Reading `bytes` fails with a message naming the file and `parts`.
  void ExpectRefused(const std::string& name, const std::vector<uint8_t>& bytes,
                     const std::vector<std::string>& parts) {
    SCOPED_TRACE(name);
    const std::string path = Write(name, bytes);
    absl::StatusOr<Imatrix> read = ReadImatrix(path);
    ASSERT_FALSE(read.ok());
    EXPECT_TRUE(absl::IsInvalidArgument(read.status())) << read.status();
    EXPECT_THAT(read.status().message(), HasSubstr(path));
    for (const std::string& p : parts) EXPECT_THAT(read.status().message(), HasSubstr(p));
  }

  std::string dir_;
};

ImatrixEntry Entry(const std::string& name, int64_t columns, int64_t matrices,
                   std::vector<float> sum2, std::vector<float> counts,
                   std::vector<float> sum = {}) {
  ImatrixEntry e;
  e.name = name;
  e.columns = columns;
  e.matrices = matrices;
  e.sum2 = std::move(sum2);
  e.counts = std::move(counts);
  e.sum = std::move(sum);
  return e;
}

uint32_t Bits(float f) { return std::bit_cast<uint32_t>(f); }
void ExpectSameBits(const std::vector<float>& got, const std::vector<float>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(Bits(got[i]), Bits(want[i])) << "at " << i << ": " << got[i] << " vs " << want[i];
  }
}

// ------------------------------------------------------------------ legacy

TEST_F(ImatrixTest, ReadsAHandMadeLegacyFileAsLlamaQuantizeDoes) {
  std::vector<uint8_t> b;
  Put<int32_t>(b, 3);
  // Values are (in_sum2 / count) * ncall; llama-quantize divides by ncall.
  LegacyEntry(b, "blk.0.attn_q.weight", 3, {3.0f, 1.0f, 0.3f, 9.0f});
  LegacyEntry(b, "blk.0.ffn_down_exps.weight", 0, {2.0f, 4.0f, 6.0f, 8.0f, 10.0f, 12.0f});
  LegacyEntry(b, "output.weight", 1, {0.25f});
  LegacyTail(b, 17, "wiki.train.raw");
  const std::string path = Write("legacy.dat", b);
  absl::StatusOr<Imatrix> im = ReadImatrix(path);
  ASSERT_TRUE(im.ok()) << im.status();
  EXPECT_EQ(im->format, ImatrixFormat::kLegacyDat);
  EXPECT_EQ(im->entries().size(), 3u);
  EXPECT_EQ(im->chunk_count, 17u);
  EXPECT_EQ(im->chunk_size, 512u);
  EXPECT_THAT(im->datasets, ElementsAre("wiki.train.raw"));

  const ImatrixEntry* q = im->FindExact("blk.0.attn_q.weight");
  ASSERT_NE(q, nullptr);
  EXPECT_EQ(q->columns, 4);
  EXPECT_EQ(q->matrices, 1);
  // load_imatrix_legacy's state: values x 512, counts ncall x 512.
  ExpectSameBits(q->sum2, {3.0f * 512, 1.0f * 512, 0.3f * 512, 9.0f * 512});
  ExpectSameBits(q->counts, {3.0f * 512});
  EXPECT_TRUE(q->sum.empty());
  absl::StatusOr<std::vector<float>> v = im->Importance("blk.0.attn_q.weight", 0);
  ASSERT_TRUE(v.ok()) << v.status();
  // Exactly what llama-quantize computes: stored / float(ncall).
  ExpectSameBits(*v, {3.0f / 3.0f, 1.0f / 3.0f, 0.3f / 3.0f, 9.0f / 3.0f});

  // ncall 0: llama-quantize takes the values as they are. Three experts of
  // two columns: the weight's shape splits the .dat's one row.
  for (int64_t e = 0; e < 3; ++e) {
    absl::StatusOr<std::vector<float>> x = im->Importance("blk.0.ffn_down_exps.weight", 2, 3, e);
    ASSERT_TRUE(x.ok()) << x.status();
    ExpectSameBits(*x, {2.0f + 4 * e, 4.0f + 4 * e});
  }
  EXPECT_FALSE(im->Importance("blk.0.ffn_down_exps.weight", 2, 2, 0).ok());
  ExpectSameBits(*im->Importance("output.weight", 0), {0.25f});
}

TEST_F(ImatrixTest, LegacyTailIsOptionalAndMayNameNoDataset) {
  std::vector<uint8_t> b;
  Put<int32_t>(b, 1);
  LegacyEntry(b, "blk.0.attn_k.weight", 1, {1.0f, 2.0f});
  absl::StatusOr<Imatrix> none = ReadImatrix(Write("no_tail.dat", b));
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_EQ(none->chunk_count, 0u);
  EXPECT_TRUE(none->datasets.empty());
  LegacyTail(b, 5, "");
  absl::StatusOr<Imatrix> empty = ReadImatrix(Write("empty_dataset.dat", b));
  ASSERT_TRUE(empty.ok()) << empty.status();
  EXPECT_EQ(empty->chunk_count, 5u);
  EXPECT_TRUE(empty->datasets.empty());
}

TEST_F(ImatrixTest, WritesTheLegacyBytesSaveImatrixLegacyWrites) {
  Imatrix im;
  im.chunk_size = 512;
  im.chunk_count = 3;
  im.datasets = {"first.txt", "second.txt"};
  // Dense: 1000 tokens -> ncall = ceil(1000 / 512) = 2.
  ASSERT_TRUE(im.Add(Entry("blk.1.attn_v.weight", 3, 1, {10.0f, 20.0f, 0.0f}, {1000})).ok());
  // Experts with 600 and 0 tokens: ncall 2, the empty expert stored as 1 x 2.
  ASSERT_TRUE(im.Add(Entry("blk.1.ffn_up_exps.weight", 2, 2, {6.0f, 3.0f, 0.0f, 0.0f}, {600, 0},
                           {1.0f, -1.0f, 0.0f, 0.0f}))
                  .ok());
  // No data at all: skipped ("has no data - skipping").
  ASSERT_TRUE(im.Add(Entry("blk.0.ffn_gate_exps.weight", 1, 2, {0.0f, 0.0f}, {0, 0})).ok());
  const std::string path = Path("written.dat");
  ASSERT_TRUE(WriteImatrixDat(im, path).ok());

  std::vector<uint8_t> want;
  Put<int32_t>(want, 2);
  LegacyEntry(want, "blk.1.attn_v.weight", 2,
              {(10.0f / 1000.0f) * 2.0f, (20.0f / 1000.0f) * 2.0f, 0.0f});
  LegacyEntry(want, "blk.1.ffn_up_exps.weight", 2,
              {(6.0f / 600.0f) * 2.0f, (3.0f / 600.0f) * 2.0f, 2.0f, 2.0f});
  LegacyTail(want, 3, "second.txt");  // the last dataset
  EXPECT_EQ(Bytes(path), want);
}

// ------------------------------------------------------------------ GGUF

// The file save_imatrix writes for two entries: a dense one with in_sum
// (1-D tensors: ggml_n_dims drops the trailing 1) and one of three experts,
// the second never routed to.
std::vector<uint8_t> HandMadeGguf() {
  return Gguf(Metadata({"calibration.txt"}, 7, 512),
              {F32("blk.0.attn_q.weight.in_sum2", {4}, {4.0f, 8.0f, 1.0f, 0.0f}),
               F32("blk.0.attn_q.weight.counts", {1}, {3.0f}),
               F32("blk.0.attn_q.weight.in_sum", {4}, {1.0f, -2.0f, 0.5f, 0.0f}),
               F32("blk.1.ffn_up_exps.weight.in_sum2", {2, 3}, {10.0f, 20.0f, 0.0f, 0.0f, 3.0f, 1.0f}),
               F32("blk.1.ffn_up_exps.weight.counts", {1, 3}, {10.0f, 0.0f, 4.0f})});
}

TEST_F(ImatrixTest, ReadsAHandMadeGgufAsLlamaQuantizeDoes) {
  const std::string path = Write("hand.gguf", HandMadeGguf());
  absl::StatusOr<Imatrix> im = ReadImatrix(path);
  ASSERT_TRUE(im.ok()) << im.status();
  EXPECT_EQ(im->format, ImatrixFormat::kGguf);
  EXPECT_THAT(im->datasets, ElementsAre("calibration.txt"));
  EXPECT_EQ(im->chunk_count, 7u);
  EXPECT_EQ(im->chunk_size, 512u);
  ASSERT_EQ(im->entries().size(), 2u);

  const ImatrixEntry* q = im->FindExact("blk.0.attn_q.weight");
  ASSERT_NE(q, nullptr);
  EXPECT_EQ(q->columns, 4);
  EXPECT_EQ(q->matrices, 1);
  ExpectSameBits(q->sum, {1.0f, -2.0f, 0.5f, 0.0f});
  ExpectSameBits(*im->Importance("blk.0.attn_q.weight", 0),
                 {4.0f / 3.0f, 8.0f / 3.0f, 1.0f / 3.0f, 0.0f});

  const ImatrixEntry* up = im->FindExact("blk.1.ffn_up_exps.weight");
  ASSERT_NE(up, nullptr);
  EXPECT_EQ(up->columns, 2);
  EXPECT_EQ(up->matrices, 3);
  EXPECT_TRUE(up->sum.empty());
  ExpectSameBits(*im->Importance("blk.1.ffn_up_exps.weight", 0), {1.0f, 2.0f});
  // Count 0: llama-quantize gives 1 ("partial imatrix data").
  ExpectSameBits(*im->Importance("blk.1.ffn_up_exps.weight", 1), {1.0f, 1.0f});
  ExpectSameBits(*im->Importance("blk.1.ffn_up_exps.weight", 2), {3.0f / 4.0f, 1.0f / 4.0f});
  ExpectSameBits(up->Values(), {1.0f, 2.0f, 1.0f, 1.0f, 0.75f, 0.25f});
}

TEST_F(ImatrixTest, WritesTheGgufBytesSaveImatrixWrites) {
  absl::StatusOr<Imatrix> im = ReadImatrix(Write("hand.gguf", HandMadeGguf()));
  ASSERT_TRUE(im.ok()) << im.status();
  const std::string path = Path("again.gguf");
  ASSERT_TRUE(WriteImatrixGguf(*im, path).ok());
  EXPECT_EQ(Bytes(path), HandMadeGguf());
}

TEST_F(ImatrixTest, IgnoresOtherTensorsAsLlamaCppDoes) {
  std::vector<T> tensors = {F32("blk.0.attn_k.weight.in_sum2", {2}, {1.0f, 2.0f}),
                            F32("blk.0.attn_k.weight.counts", {1}, {1.0f}),
                            F32("something.else", {3}, {1.0f, 2.0f, 3.0f})};
  absl::StatusOr<Imatrix> im = ReadImatrix(Write("other.gguf", Gguf(Metadata({}, 1, 64), tensors)));
  ASSERT_TRUE(im.ok()) << im.status();
  EXPECT_EQ(im->entries().size(), 1u);
  EXPECT_TRUE(im->datasets.empty());
}

// ------------------------------------------------------------ round trips

Imatrix Sample() {
  Imatrix im;
  im.chunk_size = 512;
  im.chunk_count = 12;
  im.datasets = {"a.txt", "b.txt"};
  uint32_t state = 12345;
  const auto next = [&] {
    state = state * 1664525u + 1013904223u;
    return static_cast<float>(state >> 8) / static_cast<float>(1 << 24);
  };
  std::vector<float> s2(64), s(64);
  for (size_t i = 0; i < s2.size(); ++i) {
    s2[i] = next() * 1000.0f;
    s[i] = next() * 20.0f - 10.0f;
  }
  EXPECT_TRUE(im.Add(Entry("blk.0.attn_q.weight", 64, 1, s2, {6144}, s)).ok());
  std::vector<float> e2(8 * 4);
  for (float& v : e2) v = next() * 50.0f;
  // ncall = ceil(1500 / 512) = 3: not a power of two.
  EXPECT_TRUE(im.Add(Entry("blk.0.ffn_down_exps.weight", 8, 4, e2, {1500, 0, 7, 1024})).ok());
  std::vector<float> o2(16);
  for (float& v : o2) v = next();
  // ncall = 1: exact.
  EXPECT_TRUE(im.Add(Entry("output.weight", 16, 1, o2, {300})).ok());
  return im;
}

TEST_F(ImatrixTest, GgufRoundTripsBitForBit) {
  const Imatrix im = Sample();
  const std::string path = Path("round.gguf");
  ASSERT_TRUE(WriteImatrixGguf(im, path).ok());
  absl::StatusOr<Imatrix> back = ReadImatrix(path);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->datasets, im.datasets);
  EXPECT_EQ(back->chunk_count, im.chunk_count);
  EXPECT_EQ(back->chunk_size, im.chunk_size);
  ASSERT_EQ(back->entries().size(), im.entries().size());
  for (const auto& [name, e] : im.entries()) {
    SCOPED_TRACE(name);
    const ImatrixEntry* b = back->FindExact(name);
    ASSERT_NE(b, nullptr);
    EXPECT_EQ(b->columns, e.columns);
    EXPECT_EQ(b->matrices, e.matrices);
    ExpectSameBits(b->sum2, e.sum2);
    ExpectSameBits(b->sum, e.sum);
    ExpectSameBits(b->counts, e.counts);
  }
  // And written again, the same bytes.
  ASSERT_TRUE(WriteImatrixGguf(*back, Path("round2.gguf")).ok());
  EXPECT_EQ(Bytes(Path("round2.gguf")), Bytes(path));
}

TEST_F(ImatrixTest, GgufToDatKeepsImportanceWithinOneUlp) {
  const Imatrix im = Sample();
  const std::string path = Path("round.dat");
  ASSERT_TRUE(WriteImatrixDat(im, path).ok());
  absl::StatusOr<Imatrix> back = ReadImatrix(path);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->chunk_count, im.chunk_count);
  EXPECT_THAT(back->datasets, ElementsAre("b.txt"));
  int inexact = 0;
  for (const auto& [name, e] : im.entries()) {
    SCOPED_TRACE(name);
    const float ncall = std::ceil(*std::max_element(e.counts.begin(), e.counts.end()) / 512.0f);
    for (int64_t m = 0; m < e.matrices; ++m) {
      // The weight's shape: the .dat's entry is one row of every matrix.
      absl::StatusOr<std::vector<float>> got = back->Importance(name, e.columns, e.matrices, m);
      absl::StatusOr<std::vector<float>> want = im.Importance(name, m);
      ASSERT_TRUE(got.ok()) << got.status();
      ASSERT_TRUE(want.ok()) << want.status();
      for (size_t i = 0; i < want->size(); ++i) {
        const float w = (*want)[i];
        // Exactly float(float(w) * ncall) / ncall: what llama-quantize reads.
        EXPECT_EQ(Bits((*got)[i]), Bits((w * ncall) / ncall));
        EXPECT_LE(std::abs((*got)[i] - w),
                  std::nextafter(w, std::numeric_limits<float>::infinity()) - w);
        if (ncall == 1.0f) {
          EXPECT_EQ(Bits((*got)[i]), Bits(w));
        }
        inexact += Bits((*got)[i]) != Bits(w);
      }
    }
  }
  // ncall 3 does lose a bit somewhere in 32 values (the test means something).
  EXPECT_GT(inexact, 0);
}

TEST_F(ImatrixTest, DatRoundTripsThroughGgufExactly) {
  std::vector<uint8_t> b;
  Put<int32_t>(b, 1);
  LegacyEntry(b, "blk.2.ffn_gate.weight", 7, {1.0f, 0.1f, 123.456f});
  LegacyTail(b, 7, "d");
  absl::StatusOr<Imatrix> dat = ReadImatrix(Write("x.dat", b));
  ASSERT_TRUE(dat.ok()) << dat.status();
  ASSERT_TRUE(WriteImatrixGguf(*dat, Path("x.gguf")).ok());
  absl::StatusOr<Imatrix> gguf = ReadImatrix(Path("x.gguf"));
  ASSERT_TRUE(gguf.ok()) << gguf.status();
  EXPECT_EQ(gguf->chunk_size, 512u);
  EXPECT_THAT(gguf->datasets, ElementsAre("d"));
  ExpectSameBits(*gguf->Importance("blk.2.ffn_gate.weight", 0),
                 {1.0f / 7.0f, 0.1f / 7.0f, 123.456f / 7.0f});
}

// ------------------------------------------------------------------- names

TEST_F(ImatrixTest, FindsEntriesByLlamaCppOrHuggingFaceName) {
  const Imatrix im = Sample();
  const ImatrixEntry* q = im.Find("model.layers.0.self_attn.q_proj.weight");
  ASSERT_NE(q, nullptr);
  EXPECT_EQ(q->name, "blk.0.attn_q.weight");
  EXPECT_EQ(im.Find("blk.0.attn_q.weight"), q);
  EXPECT_EQ(im.Find("lm_head.weight"), im.FindExact("output.weight"));
  EXPECT_EQ(im.Find("model.layers.1.self_attn.q_proj.weight"), nullptr);
  EXPECT_EQ(im.Find("blk.0.attn_k.weight"), nullptr);
  EXPECT_EQ(im.FindExact("model.layers.0.self_attn.q_proj.weight"), nullptr);
  // Same importance either way: columns are the input dimension in both.
  ExpectSameBits(*im.Importance("model.layers.0.self_attn.q_proj.weight", 64, 1, 0),
                 *im.Importance("blk.0.attn_q.weight", 0));

  // A file keyed by Hugging Face's names, looked up by llama.cpp's.
  Imatrix hf;
  hf.chunk_size = 1;
  ASSERT_TRUE(hf.Add(Entry("model.layers.2.mlp.down_proj.weight", 1, 1, {2.0f}, {1})).ok());
  ASSERT_NE(hf.Find("blk.2.ffn_down.weight"), nullptr);
}

TEST_F(ImatrixTest, ImportanceErrors) {
  const Imatrix im = Sample();
  absl::StatusOr<std::vector<float>> missing = im.Importance("blk.9.attn_q.weight", 0);
  EXPECT_TRUE(absl::IsNotFound(missing.status())) << missing.status();
  EXPECT_THAT(missing.status().message(), HasSubstr("blk.9.attn_q.weight"));
  absl::StatusOr<std::vector<float>> size = im.Importance("blk.0.attn_q.weight", 32, 1, 0);
  EXPECT_TRUE(absl::IsInvalidArgument(size.status()));
  EXPECT_THAT(size.status().message(),
              AllOf(HasSubstr("imatrix size 64 is different from tensor size 32"),
                    HasSubstr("blk.0.attn_q.weight")));
  EXPECT_FALSE(im.Importance("blk.0.ffn_down_exps.weight", 4).ok());
  EXPECT_FALSE(im.Importance("blk.0.ffn_down_exps.weight", -1).ok());
  EXPECT_FALSE(im.Importance("blk.0.attn_q.weight", 0, 1, 0).ok());
  // The whole entry as one matrix is a valid view too (a dense 3-D weight).
  EXPECT_TRUE(im.Importance("blk.0.ffn_down_exps.weight", 32, 1, 0).ok());
}

TEST_F(ImatrixTest, SelectsWeightsAsLlamaQuantize) {
  Imatrix a = Sample();
  ASSERT_TRUE(a.Select({"attn", "output"}, {}).ok());
  EXPECT_EQ(a.entries().size(), 2u);
  EXPECT_EQ(a.FindExact("blk.0.ffn_down_exps.weight"), nullptr);
  Imatrix b = Sample();
  ASSERT_TRUE(b.Select({}, {"exps"}).ok());
  EXPECT_EQ(b.entries().size(), 2u);
  EXPECT_EQ(b.FindExact("blk.0.ffn_down_exps.weight"), nullptr);
  Imatrix c = Sample();
  EXPECT_TRUE(absl::IsInvalidArgument(c.Select({"a"}, {"b"})));
  EXPECT_EQ(c.entries().size(), 3u);
}

// ---------------------------------------------------------- validation

TEST_F(ImatrixTest, AddRefusesMalformedEntriesNamingThem) {
  Imatrix im;
  const auto refused = [&](ImatrixEntry e, const std::string& part) {
    SCOPED_TRACE(part);
    const absl::Status s = im.Add(e);
    EXPECT_TRUE(absl::IsInvalidArgument(s)) << s;
    EXPECT_THAT(s.message(), AllOf(HasSubstr(e.name), HasSubstr(part)));
  };
  refused(Entry("w", 2, 1, {1.0f}, {1}), "sum2 has 1 values");
  refused(Entry("w", 1, 2, {1.0f, 1.0f}, {1}), "counts has 1 values");
  refused(Entry("w", 1, 1, {1.0f}, {1}, {1.0f, 2.0f}), "sum has 2 values");
  refused(Entry("w", 0, 1, {}, {1}), "not a positive size");
  refused(Entry("w", 1, 1, {NAN}, {1}), "sum2[0] = nan is not finite");
  refused(Entry("w", 1, 1, {INFINITY}, {1}), "is not finite");
  refused(Entry("w", 1, 1, {-1.0f}, {1}), "sum2[0] = -1 is negative");
  refused(Entry("w", 1, 1, {1.0f}, {-2}), "counts[0] = -2 is negative");
  refused(Entry("w", 1, 1, {1.0f}, {1.5f}), "counts[0] = 1.5 is not a whole number");
  refused(Entry("w", 1, 1, {1.0f}, {NAN}), "counts[0] = nan");
  refused(Entry("w", 1, 1, {1.0f}, {1}, {NAN}), "sum[0] = nan");
  refused(Entry("", 1, 1, {1.0f}, {1}), "the name is empty");
  {
    const absl::Status s = im.Add(Entry(std::string("a\0b", 3), 1, 1, {1.0f}, {1}));
    EXPECT_THAT(s.message(), AllOf(HasSubstr("\"a\\x00"), HasSubstr("NUL")));
  }
  ASSERT_TRUE(im.Add(Entry("w", 1, 1, {1.0f}, {1})).ok());
  refused(Entry("w", 1, 1, {2.0f}, {1}), "there already");
}

TEST_F(ImatrixTest, RefusesMalformedLegacyFilesNamingTheEntry) {
  const auto file = [](int32_t n, const std::vector<uint8_t>& body) {
    std::vector<uint8_t> b;
    Put<int32_t>(b, n);
    b.insert(b.end(), body.begin(), body.end());
    return b;
  };
  const auto entry = [](const std::string& name, int32_t ncall, const std::vector<float>& v) {
    std::vector<uint8_t> b;
    LegacyEntry(b, name, ncall, v);
    return b;
  };
  const std::vector<uint8_t> good = entry("blk.0.attn_q.weight", 2, {1.0f, 2.0f});
  ExpectRefused("empty.dat", {}, {"empty"});
  ExpectRefused("short.dat", {1, 0}, {"ends", "entry count"});
  ExpectRefused("zero.dat", file(0, good), {"entry count 0"});
  ExpectRefused("negative_count.dat", file(-5, good), {"entry count -5"});
  ExpectRefused("huge_count.dat", file(0x7fffffff, good), {"entry count 2147483647", "cannot fit"});
  {
    std::vector<uint8_t> b;
    Put<int32_t>(b, -1);
    b.resize(20, 0);
    ExpectRefused("negative_name.dat", file(1, b), {"entry 0", "name length -1"});
  }
  {
    std::vector<uint8_t> b;
    Put<int32_t>(b, 0x7ffffff0);
    b.resize(40, 0);
    ExpectRefused("huge_name.dat", file(1, b), {"entry 0", "name length 2147483632"});
  }
  {
    std::vector<uint8_t> b;
    Put<int32_t>(b, 60);
    PutBytes(b, "abc");
    b.resize(20, 0);
    ExpectRefused("name_past_end.dat", file(1, b), {"entry 0", "runs past the end"});
  }
  ExpectRefused("negative_ncall.dat", file(1, entry("blk.0.attn_q.weight", -3, {1.0f})),
                {"\"blk.0.attn_q.weight\"", "ncall -3 is negative"});
  {
    std::vector<uint8_t> b;
    LegacyEntry(b, "blk.0.attn_q.weight", 1, {});
    b.resize(b.size() + 8, 0);
    ExpectRefused("nval_zero.dat", file(1, b), {"\"blk.0.attn_q.weight\"", "value count 0"});
  }
  {
    std::vector<uint8_t> b;
    LegacyEntry(b, "blk.0.attn_q.weight", 1, {});
    std::memcpy(b.data() + b.size() - 4, "\xff\xff\xff\x7f", 4);  // nval = INT32_MAX
    b.resize(b.size() + 8, 0);
    ExpectRefused("nval_huge.dat", file(1, b),
                  {"\"blk.0.attn_q.weight\"", "2147483647 values run past the end"});
  }
  {
    std::vector<uint8_t> b = entry("blk.0.attn_q.weight", 1, {1.0f, 2.0f, 3.0f});
    b.erase(b.end() - 6, b.end());
    ExpectRefused("truncated.dat", file(1, b), {"\"blk.0.attn_q.weight\"", "run past the end"});
  }
  ExpectRefused("nan.dat", file(1, entry("blk.0.attn_q.weight", 1, {1.0f, NAN})),
                {"\"blk.0.attn_q.weight\"", "value[1] = nan is not finite"});
  ExpectRefused("inf.dat", file(1, entry("blk.0.attn_q.weight", 1, {INFINITY})),
                {"\"blk.0.attn_q.weight\"", "not finite"});
  ExpectRefused("negative.dat", file(1, entry("blk.0.attn_q.weight", 1, {-0.5f})),
                {"\"blk.0.attn_q.weight\"", "value[0] = -0.5 is negative"});
  ExpectRefused("too_large.dat", file(1, entry("blk.0.attn_q.weight", 1, {1e38f})),
                {"\"blk.0.attn_q.weight\"", "too large"});
  {
    std::vector<uint8_t> b = good;
    const std::vector<uint8_t> again = entry("blk.0.attn_q.weight", 1, {5.0f, 6.0f});
    b.insert(b.end(), again.begin(), again.end());
    ExpectRefused("duplicate.dat", file(2, b), {"\"blk.0.attn_q.weight\"", "appears twice"});
  }
  ExpectRefused("nul.dat", file(1, entry(std::string("blk\0x", 5), 1, {1.0f})),
                {"\"blk\\x00x\"", "NUL"});
  {
    std::vector<uint8_t> b = good;
    LegacyTail(b, 3, "data.txt");
    b.push_back(0);
    ExpectRefused("trailing.dat", file(1, b), {"1 bytes after the dataset name"});
  }
  {
    std::vector<uint8_t> b = good;
    b.insert(b.end(), {1, 2});
    ExpectRefused("partial_tail.dat", file(1, b), {"after the entries", "chunk count"});
  }
  {
    std::vector<uint8_t> b = good;
    Put<int32_t>(b, 3);
    ExpectRefused("tail_without_dataset.dat", file(1, b), {"dataset name's length"});
  }
  {
    std::vector<uint8_t> b = good;
    LegacyTail(b, -1, "x");
    ExpectRefused("negative_chunks.dat", file(1, b), {"chunk count -1"});
  }
  {
    std::vector<uint8_t> b = good;
    Put<int32_t>(b, 3);
    Put<int32_t>(b, 100);
    PutBytes(b, "short");
    ExpectRefused("dataset_past_end.dat", file(1, b), {"dataset name length 100"});
  }
  {
    std::vector<uint8_t> b = good;
    LegacyTail(b, 1, std::string("a\0b", 3));
    ExpectRefused("dataset_nul.dat", file(1, b), {"dataset 0 holds a NUL"});
  }
  {
    // An entry count that takes the second entry past the end.
    ExpectRefused("missing_entry.dat", file(2, [&] {
                    std::vector<uint8_t> b = good;
                    b.resize(b.size() + 20, 0);  // room for a second by size, not by content
                    return b;
                  }()),
                  {"entry 1", "name length 0"});
  }
}

TEST_F(ImatrixTest, RefusesMalformedGgufFilesNamingTheEntry) {
  const auto md = Metadata({"d"}, 1, 512);
  const T sum2 = F32("blk.0.attn_q.weight.in_sum2", {2}, {1.0f, 2.0f});
  const T counts = F32("blk.0.attn_q.weight.counts", {1}, {4.0f});
  const std::string q = "\"blk.0.attn_q.weight\"";
  ASSERT_TRUE(ReadImatrix(Write("good.gguf", Gguf(md, {sum2, counts}))).ok());

  ExpectRefused("no_type.gguf", Gguf({md[1], md[2], md[3]}, {sum2, counts}), {"no general.type"});
  ExpectRefused("model.gguf", Gguf({Str("general.type", "model"), md[1], md[2], md[3]}, {sum2, counts}),
                {"general.type is \"model\", not \"imatrix\""});
  ExpectRefused("type_u32.gguf", Gguf({U32("general.type", 1), md[1], md[2], md[3]}, {sum2, counts}),
                {"general.type is 1"});
  ExpectRefused("no_chunk_size.gguf", Gguf({md[0], md[1], md[2]}, {sum2, counts}),
                {"missing imatrix metadata", "imatrix.chunk_size"});
  ExpectRefused("no_datasets.gguf", Gguf({md[0], md[2], md[3]}, {sum2, counts}),
                {"missing imatrix metadata", "imatrix.datasets"});
  ExpectRefused("chunk_size_u64.gguf",
                Gguf({md[0], md[1], md[2], U64("imatrix.chunk_size", 512)}, {sum2, counts}),
                {"imatrix.chunk_size is u64, not u32"});
  ExpectRefused("chunk_size_0.gguf", Gguf(Metadata({}, 1, 0), {sum2, counts}),
                {"imatrix.chunk_size is 0"});
  ExpectRefused("datasets_string.gguf",
                Gguf({md[0], Str("imatrix.datasets", "d"), md[2], md[3]}, {sum2, counts}),
                {"imatrix.datasets is string, not an array of string"});
  ExpectRefused("no_entries.gguf", Gguf(md, {F32("x", {1}, {1.0f})}), {"no entries"});
  ExpectRefused("no_tensors.gguf", Gguf(md, {}), {"no entries"});
  ExpectRefused("sum2_alone.gguf", Gguf(md, {sum2}), {q, "has in_sum2 but no counts"});
  ExpectRefused("counts_alone.gguf", Gguf(md, {counts}), {q, "has counts but no in_sum2"});
  ExpectRefused("sum_alone.gguf", Gguf(md, {F32("blk.0.attn_q.weight.in_sum", {2}, {1.0f, 2.0f})}),
                {q, "has in_sum but no in_sum2"});
  {
    T f16{"blk.0.attn_q.weight.in_sum2", {2}, {0, 0x3c, 0, 0x40}, 1};
    ExpectRefused("f16.gguf", Gguf(md, {f16, counts}), {q, "is f16, not f32"});
  }
  ExpectRefused("counts_length.gguf",
                Gguf(md, {sum2, F32("blk.0.attn_q.weight.counts", {1, 2}, {1.0f, 1.0f})}),
                {q, "counts has 2 elements for the 1 matrices"});
  ExpectRefused("sum_length.gguf",
                Gguf(md, {sum2, counts, F32("blk.0.attn_q.weight.in_sum", {3}, {1, 2, 3})}),
                {q, "in_sum has 3 elements, in_sum2 2"});
  ExpectRefused("3d.gguf",
                Gguf(md, {F32("blk.0.attn_q.weight.in_sum2", {1, 2, 2}, {1, 2, 3, 4}),
                          F32("blk.0.attn_q.weight.counts", {1, 4}, {1, 1, 1, 1})}),
                {q, "in_sum2 has 3 dimensions"});
  ExpectRefused("zero_columns.gguf",
                Gguf(md, {F32("blk.0.attn_q.weight.in_sum2", {0}, {}), counts}), {q, "no values"});
  ExpectRefused("nan.gguf", Gguf(md, {F32("blk.0.attn_q.weight.in_sum2", {2}, {1.0f, NAN}), counts}),
                {q, "sum2[1] = nan is not finite"});
  ExpectRefused("negative_sum2.gguf",
                Gguf(md, {F32("blk.0.attn_q.weight.in_sum2", {2}, {-1.0f, 2.0f}), counts}),
                {q, "sum2[0] = -1 is negative"});
  ExpectRefused("negative_count.gguf",
                Gguf(md, {sum2, F32("blk.0.attn_q.weight.counts", {1}, {-4.0f})}),
                {q, "counts[0] = -4 is negative"});
  ExpectRefused("fractional_count.gguf",
                Gguf(md, {sum2, F32("blk.0.attn_q.weight.counts", {1}, {2.5f})}),
                {q, "not a whole number"});
  ExpectRefused("inf_sum.gguf",
                Gguf(md, {sum2, counts, F32("blk.0.attn_q.weight.in_sum", {2}, {INFINITY, 1})}),
                {q, "sum[0] = inf is not finite"});
  ExpectRefused("empty_name.gguf",
                Gguf(md, {F32(".in_sum2", {1}, {1.0f}), F32(".counts", {1}, {1.0f})}),
                {"the name is empty"});
  ExpectRefused("dataset_nul.gguf",
                Gguf(Metadata({std::string("a\0b", 3)}, 1, 512), {sum2, counts}), {"NUL"});
  {
    std::vector<uint8_t> b = Gguf(md, {sum2, counts});
    b.erase(b.end() - 40, b.end());
    ExpectRefused("truncated.gguf", b, {"past the end of the file"});
  }
}

// ------------------------------------------------------------- files

TEST_F(ImatrixTest, RefusesAFifoAndADirectoryWithoutBlocking) {
  const std::string fifo = Path("pipe.gguf");
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  absl::StatusOr<Imatrix> read = ReadImatrix(fifo);
  ASSERT_FALSE(read.ok());
  EXPECT_THAT(read.status().message(), AllOf(HasSubstr(fifo), HasSubstr("FIFO")));
  absl::StatusOr<Imatrix> dir = ReadImatrix(dir_);
  ASSERT_FALSE(dir.ok());
  EXPECT_THAT(dir.status().message(), HasSubstr("directory"));
  absl::StatusOr<Imatrix> missing = ReadImatrix(Path("missing.dat"));
  ASSERT_FALSE(missing.ok());
  EXPECT_THAT(missing.status().message(), HasSubstr("missing.dat"));
}

TEST_F(ImatrixTest, WritersRefuseWhatCannotBeReadBackAndLeaveTheTargetAlone) {
  const std::string path = Write("existing", {'o', 'l', 'd'});
  const auto refused = [&](const Imatrix& im, bool gguf, const std::string& part) {
    SCOPED_TRACE(part);
    const absl::Status s = gguf ? WriteImatrixGguf(im, path) : WriteImatrixDat(im, path);
    EXPECT_TRUE(absl::IsInvalidArgument(s)) << s;
    EXPECT_THAT(s.message(), AllOf(HasSubstr(path), HasSubstr(part)));
    EXPECT_EQ(Bytes(path), (std::vector<uint8_t>{'o', 'l', 'd'}));
  };
  Imatrix empty;
  empty.chunk_size = 512;
  refused(empty, true, "no entries");
  refused(empty, false, "no entries");
  Imatrix no_chunk = Sample();
  no_chunk.chunk_size = 0;
  refused(no_chunk, true, "chunk size 0");
  refused(no_chunk, false, "chunk size 0");
  Imatrix nul = Sample();
  nul.datasets.push_back(std::string("x\0y", 3));
  refused(nul, true, "NUL");
  refused(nul, false, "NUL");
  Imatrix long_name;
  long_name.chunk_size = 512;
  const std::string name(56, 'n');
  ASSERT_TRUE(long_name.Add(Entry(name, 1, 1, {1.0f}, {1})).ok());
  refused(long_name, true, name);
  EXPECT_TRUE(WriteImatrixDat(long_name, Path("long.dat")).ok());  // the .dat holds 63 bytes
  Imatrix zeros;
  zeros.chunk_size = 512;
  ASSERT_TRUE(zeros.Add(Entry("w", 2, 1, {0.0f, 0.0f}, {0})).ok());
  refused(zeros, false, "only zero counts");
  EXPECT_TRUE(WriteImatrixGguf(zeros, Path("zeros.gguf")).ok());  // GGUF keeps them
  Imatrix huge;
  huge.chunk_size = 1;
  ASSERT_TRUE(huge.Add(Entry("w", 1, 1, {1.0f}, {3e9f})).ok());
  refused(huge, false, "does not fit the format's int32");
  // An entry changed after Add is checked again.
  Imatrix bad = Sample();
  const_cast<ImatrixEntry&>(*bad.FindExact("output.weight")).counts = {NAN};
  refused(bad, true, "\"output.weight\"");
  // A path that cannot be created: an error naming it, nothing left behind.
  const absl::Status s = WriteImatrixGguf(Sample(), Path("no/such/dir.gguf"));
  EXPECT_FALSE(s.ok());
  EXPECT_THAT(s.message(), HasSubstr("no/such/dir.gguf"));
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(dir_),
                          std::filesystem::directory_iterator()),
            3);  // existing, long.dat, zeros.gguf: no temporaries left
}

TEST_F(ImatrixTest, DetectsFormatsByMagicNotByName) {
  std::vector<uint8_t> b;
  Put<int32_t>(b, 1);
  LegacyEntry(b, "blk.0.attn_q.weight", 1, {1.0f});
  absl::StatusOr<Imatrix> dat = ReadImatrix(Write("legacy.gguf", b));
  ASSERT_TRUE(dat.ok()) << dat.status();
  EXPECT_EQ(dat->format, ImatrixFormat::kLegacyDat);
  absl::StatusOr<Imatrix> gguf = ReadImatrix(Write("new.dat", HandMadeGguf()));
  ASSERT_TRUE(gguf.ok()) << gguf.status();
  EXPECT_EQ(gguf->format, ImatrixFormat::kGguf);
  // A damaged GGUF is reported as GGUF, not retried as legacy.
  std::vector<uint8_t> damaged = HandMadeGguf();
  damaged[4] = 9;  // version 9
  ExpectRefused("damaged.gguf", damaged, {"GGUF version 9"});
}

}  // namespace
}  // namespace lowp
