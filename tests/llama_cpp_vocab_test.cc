// GGUF metadata lowp writes against what llama.cpp's own converters wrote
// for the same inputs (tests/data/llama-cpp-vocab/: their key/value
// sections, PROVENANCE.md says how they were made): convert_hf_to_gguf.py
// on a tiny Llama with Llama 2's tokenizer.model, and
// convert-llama2c-to-ggml on tok512.bin.
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "api/quantize_model.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "io/gguf.h"
#include "io/mapped_file.h"
#include "tests/random_checkpoint.h"
#include "tokenizer/tokenizer.h"

namespace lowp {
namespace {

const std::string kData = LOWP_TEST_DATA_DIR;

struct Parsed {
  std::string bytes;
  ParsedGguf gguf;
};

Parsed Open(const std::string& path) {
  Parsed p;
  absl::StatusOr<std::string> bytes = ReadRegularFile(path, uint64_t{1} << 30);
  EXPECT_TRUE(bytes.ok()) << bytes.status();
  p.bytes = *std::move(bytes);
  absl::StatusOr<ParsedGguf> g = ParseGguf(
      std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(p.bytes.data()), p.bytes.size()),
      path);
  EXPECT_TRUE(g.ok()) << g.status();
  p.gguf = *std::move(g);
  return p;
}

// The value as comparable bytes: scalars decoded, arrays as encoded.
std::string Encoded(const GgufValue& v) {
  if (v.type == GgufType::kArray) {
    return absl::StrCat(static_cast<int>(v.element_type), ":", v.count, ":",
                        std::string(v.elements.begin(), v.elements.end()));
  }
  return absl::StrCat(static_cast<int>(v.type), ":", v.u, ":", v.i, ":", v.f, ":", v.s);
}

// A tiny Llama (the converter's input: hidden 64, 2 layers, 4 heads,
// vocab 32000, no head_dim) with Llama 2's tokenizer.model and the same
// tokenizer_config.json: every key/value of the file, in order, equals the
// converter's, but general.size_label (a parameter count lowp does not
// write) and general.name (the directory's name).
TEST(LlamaCppVocab, SentencePieceModelEqualsConvertHfToGguf) {
  const std::string dir = ::testing::TempDir() + "/llama_cpp_vocab_spm";
  std::filesystem::remove_all(dir);
  ModelConfig c = lowp::LlamaShape("tiny", 64, 128, 2, 4, 4, 32000, 128);
  c.rms_norm_eps = 1e-5;
  c.bos_token_id = 1;
  ASSERT_TRUE(testing::WriteRandomCheckpoint(dir, c, DType::kF32, 7).ok());
  std::filesystem::copy_file(kData + "/llama2-tokenizer/tokenizer.model", dir + "/tokenizer.model");
  std::ofstream(dir + "/tokenizer_config.json")
      << R"({"add_bos_token": true, "add_eos_token": false, "bos_token": "<s>", )"
      << R"("eos_token": "</s>", "unk_token": "<unk>", )"
      << R"("chat_template": "{% for m in messages %}{{ m['content'] }}{% endfor %}"})";
  api::QuantizeModelOptions q;
  q.model = dir;
  q.weights = "*=none";
  q.output = dir + "/out.gguf";
  absl::StatusOr<api::QuantErrorResult> written = api::QuantizeModel(q);
  ASSERT_TRUE(written.ok()) << written.status();
  const Parsed mine = Open(q.output);
  const Parsed theirs = Open(kData + "/llama-cpp-vocab/llama2-spm.gguf");
  std::vector<std::string> a, b;
  for (const GgufKeyValue& kv : mine.gguf.metadata) {
    if (kv.key != "general.name") a.push_back(kv.key + " = " + Encoded(kv.value));
  }
  for (const GgufKeyValue& kv : theirs.gguf.metadata) {
    if (kv.key != "general.name" && kv.key != "general.size_label") {
      b.push_back(kv.key + " = " + Encoded(kv.value));
    }
  }
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].substr(0, 200), b[i].substr(0, 200)) << "key " << i;
    EXPECT_TRUE(a[i] == b[i]) << "key " << i << " differs";
  }
}

// tok512.bin: the tokens, scores (bit for bit, -0.0 included) and types
// convert-llama2c-to-ggml wrote, and its unk/bos/eos ids (lowp leaves out
// its separator and padding ids of 0xFFFFFFFF, which llama.cpp ignores as
// bad special tokens).
TEST(LlamaCppVocab, Llama2cTokenizerEqualsConvertLlama2cToGgml) {
  absl::StatusOr<std::unique_ptr<Tokenizer>> t =
      LoadTokenizer(kData + "/stories260K/tok512.bin");
  ASSERT_TRUE(t.ok()) << t.status();
  absl::StatusOr<LlamaCppVocab> v = (*t)->LlamaCppVocabulary();
  ASSERT_TRUE(v.ok()) << v.status();
  GgufWriter w;
  v->AddTo(w);
  const std::string path = ::testing::TempDir() + "/llama_cpp_vocab_llama2c.gguf";
  {
    absl::StatusOr<std::unique_ptr<OutputFile>> out = OutputFile::Create(path);
    ASSERT_TRUE(out.ok());
    ASSERT_TRUE(w.Write(**out).ok());
    ASSERT_TRUE((*out)->Commit().ok());
  }
  const Parsed mine = Open(path);
  const Parsed theirs = Open(kData + "/llama-cpp-vocab/llama2c.gguf");
  for (const char* key : {"tokenizer.ggml.model", "tokenizer.ggml.tokens", "tokenizer.ggml.scores",
                          "tokenizer.ggml.token_type", "tokenizer.ggml.unknown_token_id",
                          "tokenizer.ggml.bos_token_id", "tokenizer.ggml.eos_token_id"}) {
    const GgufValue* a = mine.gguf.Find(key);
    const GgufValue* b = theirs.gguf.Find(key);
    ASSERT_NE(a, nullptr) << key;
    ASSERT_NE(b, nullptr) << key;
    EXPECT_TRUE(Encoded(*a) == Encoded(*b)) << key;
  }
}

}  // namespace
}  // namespace lowp
