// lowp quantize --model DIR --out FILE.gguf (eval/gguf_export.h): the file
// llama.cpp runs, each matrix the candidate's own bytes. Checked against a
// file llama-quantize made (the bundled stories260K-Q4_K_M.gguf, tensor for
// tensor), read back as a candidate (the rules' KL exactly), its metadata
// (llama.cpp's keys, types and order), and refusals that leave nothing.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "api/eval.h"
#include "api/quantize_model.h"
#include "formats/option_error.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "io/gguf.h"
#include "io/tensor_set.h"

namespace lowp {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

const std::string kData = LOWP_TEST_DATA_DIR;

std::string Dir(const std::string& name) {
  const std::string dir = ::testing::TempDir() + "/gguf_export_" + name;
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

api::QuantizeModelOptions Quantize(const std::string& model, const std::string& weights,
                                   const std::string& out) {
  api::QuantizeModelOptions q;
  q.model = model;
  q.weights = weights;
  q.output = out;
  q.calibration.chunks = 2;
  q.summary = true;
  return q;
}

const GgufValue* Key(const TensorSet& set, const std::string& key) {
  return set.gguf()->Find(key);
}

const TensorView* Named(const TensorSet& set, const std::string& name) {
  for (const TensorView& t : set.tensors()) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

// The stories260K file llama-quantize made (Q4_K_M from the float32 model;
// tests/data/ggml/PROVENANCE.md): the same tensors, bytes and types.
TEST(GgufExport, EqualsLlamaQuantizesFileTensorForTensor) {
  const std::string dir = Dir("q4km");
  api::QuantizeModelOptions q =
      Quantize(kData + "/stories260K-hf", "Q4_K_M", dir + "/stories260K-Q4_K_M.gguf");
  absl::StatusOr<api::QuantErrorResult> written = api::QuantizeModel(q);
  ASSERT_TRUE(written.ok()) << written.status();
  absl::StatusOr<TensorSet> mine = TensorSet::Open(q.output);
  absl::StatusOr<TensorSet> theirs = TensorSet::Open(kData + "/ggml/stories260K-Q4_K_M.gguf");
  ASSERT_TRUE(mine.ok()) << mine.status();
  ASSERT_TRUE(theirs.ok()) << theirs.status();
  ASSERT_EQ(mine->tensors().size(), theirs->tensors().size());
  for (const TensorView& t : theirs->tensors()) {
    const TensorView* m = Named(*mine, t.name);
    ASSERT_NE(m, nullptr) << t.name;
    EXPECT_EQ(m->type_name(), t.type_name()) << t.name;
    EXPECT_EQ(m->shape, t.shape) << t.name;
    EXPECT_TRUE(std::equal(m->bytes.begin(), m->bytes.end(), t.bytes.begin(), t.bytes.end()))
        << t.name;
  }
  // llama.cpp's keys, in the converter's order, then the vocabulary of
  // tok512.bin as convert-llama2c-to-ggml writes it.
  const ParsedGguf& g = *mine->gguf();
  std::vector<std::string> keys;
  for (const GgufKeyValue& kv : g.metadata) keys.push_back(kv.key);
  EXPECT_THAT(std::vector<std::string>(keys.begin(), keys.begin() + 5),
              ElementsAre("general.architecture", "general.type", "general.name",
                          "llama.block_count", "llama.context_length"));
  EXPECT_EQ(Key(*mine, "general.architecture")->s, "llama");
  EXPECT_EQ(Key(*mine, "general.file_type")->u, 15u);  // MOSTLY_Q4_K_M
  EXPECT_EQ(Key(*mine, "general.quantization_version")->u, 2u);
  EXPECT_EQ(Key(*mine, "llama.rope.dimension_count")->u, 8u);
  EXPECT_EQ(Key(*mine, "llama.attention.layer_norm_rms_epsilon")->type, GgufType::kF32);
  EXPECT_EQ(Key(*mine, "tokenizer.ggml.model")->s, "llama");
  const GgufValue* tokens = Key(*mine, "tokenizer.ggml.tokens");
  ASSERT_NE(tokens, nullptr);
  const std::vector<GgufValue> t = tokens->Elements();
  ASSERT_EQ(t.size(), 512u);
  EXPECT_EQ(t[0].s, "<unk>");
  EXPECT_EQ(t[1].s, "<s>");
  EXPECT_EQ(t[13].s, "<0x0A>");
  EXPECT_EQ(t[259].s, "\xe2\x96\x81t");  // " t", its space as U+2581
  const std::vector<GgufValue> types = Key(*mine, "tokenizer.ggml.token_type")->Elements();
  ASSERT_EQ(types.size(), 512u);
  EXPECT_EQ(types[0].i, 2);    // UNKNOWN
  EXPECT_EQ(types[2].i, 3);    // CONTROL
  EXPECT_EQ(types[3].i, 6);    // BYTE
  EXPECT_EQ(types[259].i, 1);  // NORMAL
  EXPECT_EQ(Key(*mine, "tokenizer.ggml.bos_token_id")->u, 1u);
  EXPECT_EQ(g.alignment, 32u);
}

// Every file read back as a candidate gives the rules' own numbers: the
// bytes are the candidate's, not rounded again (GPTQ's codes included).
TEST(GgufExport, ReadBackGivesTheCandidatesKl) {
  const std::string dir = Dir("roundtrip");
  const std::string model = kData + "/stories3M-hf";
  for (const std::string weights :
       {"Q4_K_M:gptq", "q4_0", "*.mlp.down_proj.weight=q6_K,*.self_attn.*=iq4_xs,*=q5_1",
        "bf16"}) {
    SCOPED_TRACE(weights);
    api::QuantizeModelOptions q = Quantize(model, weights, dir + "/model.gguf");
    ASSERT_TRUE(api::QuantizeModel(q).ok());
    api::EvalOptions e;
    e.model = model;
    e.sample = "4:64";
    e.weights = weights;
    e.weights_files = {q.output};
    e.calibration.chunks = 2;
    absl::StatusOr<api::EvalResult> r = api::Eval(e);
    ASSERT_TRUE(r.ok()) << r.status();
    ASSERT_EQ(r->report.candidates.size(), 2u);
    EXPECT_GT(r->report.candidates[0].kl.mean, 0);
    EXPECT_EQ(r->report.candidates[1].kl.mean, r->report.candidates[0].kl.mean);
    EXPECT_EQ(r->report.candidates[1].top1_agreement, r->report.candidates[0].top1_agreement);
  }
}

// A tied model writes no output.weight (llama.cpp takes token_embd); the
// embedding's rule decides its type.
TEST(GgufExport, TiedModelHasNoOutputTensor) {
  const std::string dir = Dir("tied");
  api::QuantizeModelOptions q = Quantize(kData + "/stories3M-hf", "Q4_K_M", dir + "/m.gguf");
  ASSERT_TRUE(api::QuantizeModel(q).ok());
  absl::StatusOr<TensorSet> set = TensorSet::Open(q.output);
  ASSERT_TRUE(set.ok()) << set.status();
  EXPECT_EQ(Named(*set, "output.weight"), nullptr);
  ASSERT_NE(Named(*set, "token_embd.weight"), nullptr);
  EXPECT_EQ(Named(*set, "token_embd.weight")->type_name(), "q6_K");  // llama-quantize's output type
  EXPECT_EQ(set->tensors().size(), 2u + 4u * 9u);
}

TEST(GgufExport, RefusesWhatLlamaCppCannotHoldAndLeavesNothing) {
  const std::string dir = Dir("refusals");
  const std::string out = dir + "/bad.gguf";
  api::QuantizeModelOptions q = Quantize(kData + "/stories3M-hf", "int4-g128", out);
  absl::Status s = api::QuantizeModel(q).status();
  EXPECT_THAT(s.message(), HasSubstr("int4-g128"));
  EXPECT_THAT(s.message(), HasSubstr("no llama.cpp type"));
  q.weights = "mxfp4";  // OCP's, not ggml's
  EXPECT_THAT(api::QuantizeModel(q).status().message(), HasSubstr("no llama.cpp type"));
  q.weights = "q4_0:rotate=hadamard";
  EXPECT_THAT(api::QuantizeModel(q).status().message(), HasSubstr("no llama.cpp type"));
  q.weights = "*.mlp.gate.weight=q4_0";  // a typo: no matrix is called that
  s = api::QuantizeModel(q).status();
  EXPECT_EQ(OptionOf(s).value_or(""), "weights");
  EXPECT_THAT(s.message(), HasSubstr("names no matrix"));
  q.weights = "q4_0";
  q.dtype = "BF16";
  EXPECT_EQ(OptionOf(api::QuantizeModel(q).status()).value_or(""), "dtype");
  q.dtype = "F32";
  q.tokenizer = dir + "/missing.model";
  EXPECT_EQ(OptionOf(api::QuantizeModel(q).status()).value_or(""), "tokenizer");
  // A model directory without a tokenizer: llama.cpp loads no such file.
  const std::string bare = dir + "/bare";
  std::filesystem::create_directories(bare);
  for (const char* f : {"config.json", "model.safetensors"}) {
    std::filesystem::copy_file(kData + "/stories3M-hf/" + f, bare + "/" + f);
  }
  q.model = bare;
  q.tokenizer.clear();
  s = api::QuantizeModel(q).status();
  EXPECT_EQ(OptionOf(s).value_or(""), "model");
  EXPECT_THAT(s.message(), HasSubstr("vocabulary"));
  // A sliding window llama.cpp's llama architecture would not apply.
  const std::string windowed = dir + "/windowed";
  std::filesystem::create_directories(windowed);
  for (const char* f : {"model.safetensors", "tok512.bin"}) {
    std::filesystem::copy_file(kData + "/stories3M-hf/" + f, windowed + "/" + f);
  }
  {
    std::ifstream in(kData + "/stories3M-hf/config.json");
    std::string config((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const size_t at = config.find("\"model_type\": \"llama\"");
    ASSERT_NE(at, std::string::npos);
    config.replace(at, 21, "\"model_type\": \"mistral\", \"sliding_window\": 64");
    std::ofstream(windowed + "/config.json") << config;
  }
  q.model = windowed;
  s = api::QuantizeModel(q).status();
  EXPECT_THAT(s.message(), HasSubstr("sliding_window 64"));
  EXPECT_FALSE(std::filesystem::exists(out));
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(dir),
                          std::filesystem::directory_iterator()),
            2);  // bare/ and windowed/ alone: no temporary left
}

}  // namespace
}  // namespace lowp
