// lowp quantize --model DIR --format compressed-tensors|gptq --out OUTDIR
// (eval/checkpoint_export.h): the quantized Hugging Face checkpoint vLLM
// and transformers load, each matrix the candidate's own codes and scales.
// Read back as a candidate it gives the rules' KL exactly (NVFP4: within
// the rounding its note counts); its tensors and quantization_config are
// what llm-compressor and AutoGPTQ write; refusals leave nothing.
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "api/eval.h"
#include "api/quantize_model.h"
#include "formats/option_error.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "io/safetensors.h"
#include "nlohmann/json.hpp"

namespace lowp {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

const std::string kData = LOWP_TEST_DATA_DIR;
const std::string kModel = kData + "/stories3M-hf";

std::string Dir(const std::string& name) {
  const std::string dir = ::testing::TempDir() + "/checkpoint_export_" + name;
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

api::QuantizeModelOptions Quantize(const std::string& format, const std::string& weights,
                                   const std::string& out) {
  api::QuantizeModelOptions q;
  q.model = kModel;
  q.weights = weights;
  q.output = out;
  q.format = format;
  q.calibration.chunks = 2;
  q.summary = true;
  return q;
}

// The candidate `weights` and the directory written from it, evaluated
// side by side.
api::EvalResult Both(const std::string& weights, const std::string& dir) {
  api::EvalOptions e;
  e.model = kModel;
  e.sample = "4:64";
  e.weights = weights;
  e.weights_files = {dir + "/model.safetensors"};
  e.calibration.chunks = 2;
  absl::StatusOr<api::EvalResult> r = api::Eval(e);
  EXPECT_TRUE(r.ok()) << r.status();
  return r.ok() ? *r : api::EvalResult{};
}

nlohmann::json Config(const std::string& dir) {
  std::ifstream in(dir + "/config.json");
  return nlohmann::json::parse(in)["quantization_config"];
}

// The tensors a safetensors file stores, parts and all (a TensorSet would
// compose them by the config.json beside it).
struct Stored {
  std::vector<uint8_t> bytes;
  std::vector<TensorView> tensors;

  explicit Stored(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    absl::StatusOr<ParsedSafetensors> parsed = ParseSafetensors(bytes, path);
    EXPECT_TRUE(parsed.ok()) << parsed.status();
    if (parsed.ok()) tensors = std::move(parsed->tensors);
  }
  const TensorView* Named(const std::string& name) const {
    for (const TensorView& t : tensors) {
      if (t.name == name) return &t;
    }
    return nullptr;
  }
};

TEST(CheckpointExport, ReadBackGivesTheCandidatesKl) {
  const std::string dir = Dir("roundtrip");
  const struct {
    const char* format;
    const char* weights;
  } cases[] = {
      {"compressed-tensors", "int4-g128:gptq=actorder"},
      {"compressed-tensors", "uint4-g64-asym"},
      {"compressed-tensors", "int8"},  // one scale per tensor
      {"compressed-tensors", "int3-g128:scale=bf16"},
      {"compressed-tensors", "fp8_e4m3fn-b128x128:gptq"},
      {"compressed-tensors", "fp8_e4m3fn-channel:scale=ue8m0"},
      {"compressed-tensors", "fp8_e4m3fn-g64:scale=bf16"},
      {"compressed-tensors", "*.mlp.*=int8-channel,*.self_attn.*=fp8_e4m3fn-tensor"},
      {"gptq", "int4-g128:gptq=actorder"},
      {"gptq", "uint4-g128-asym"},
      {"gptq", "int3-g128"},
      {"gptq", "int8-channel"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(std::string(c.format) + " " + c.weights);
    const std::string out = dir + "/model";
    std::filesystem::remove_all(out);
    absl::StatusOr<api::QuantErrorResult> written =
        api::QuantizeModel(Quantize(c.format, c.weights, out));
    ASSERT_TRUE(written.ok()) << written.status();
    EXPECT_TRUE(written->notes.empty());
    const api::EvalResult r = Both(c.weights, out);
    ASSERT_EQ(r.report.candidates.size(), 2u);
    EXPECT_GT(r.report.candidates[0].kl.mean, 0);
    EXPECT_EQ(r.report.candidates[1].kl.mean, r.report.candidates[0].kl.mean);
    EXPECT_EQ(r.report.candidates[1].kl.max, r.report.candidates[0].kl.max);
    EXPECT_EQ(r.report.candidates[1].top1_agreement, r.report.candidates[0].top1_agreement);
  }
}

// compressed-tensors divides NVFP4's block scales by the global scale where
// lowp multiplies by its inverse: the blocks no float32 global scale
// reconciles are counted, and the KL moves by less than 1e-6 of itself.
TEST(CheckpointExport, Nvfp4ReadsBackWithinTheRoundingItsNoteCounts) {
  const std::string dir = Dir("nvfp4") + "/model";
  absl::StatusOr<api::QuantErrorResult> written =
      api::QuantizeModel(Quantize("compressed-tensors", "nvfp4", dir));
  ASSERT_TRUE(written.ok()) << written.status();
  ASSERT_EQ(written->notes.size(), 1u);
  EXPECT_THAT(written->notes[0], HasSubstr("of 196608 blocks"));
  const api::EvalResult r = Both("nvfp4", dir);
  ASSERT_EQ(r.report.candidates.size(), 2u);
  const double kl = r.report.candidates[0].kl.mean;
  EXPECT_NEAR(r.report.candidates[1].kl.mean, kl, 1e-6 * kl);
  const nlohmann::json q = Config(dir);
  EXPECT_EQ(q["format"], "nvfp4-pack-quantized");
  EXPECT_EQ(q["config_groups"]["group_0"]["weights"]["strategy"], "tensor_group");
  EXPECT_EQ(q["config_groups"]["group_0"]["weights"]["group_size"], 16);
}

// The tensors and config llm-compressor writes for W4A16 (int4, groups of
// 128, symmetric) and a mix of two groups; the tokenizer copied.
TEST(CheckpointExport, CompressedTensorsLayoutAndConfig) {
  const std::string dir = Dir("layout") + "/model";
  ASSERT_TRUE(api::QuantizeModel(Quantize("compressed-tensors", "int4-g128", dir)).ok());
  const nlohmann::json q = Config(dir);
  EXPECT_EQ(q["quant_method"], "compressed-tensors");
  EXPECT_EQ(q["format"], "pack-quantized");
  EXPECT_EQ(q["quantization_status"], "compressed");
  const nlohmann::json& g = q["config_groups"]["group_0"];
  EXPECT_EQ(g["targets"], nlohmann::json::array({"Linear"}));
  EXPECT_EQ(g["weights"]["num_bits"], 4);
  EXPECT_EQ(g["weights"]["type"], "int");
  EXPECT_EQ(g["weights"]["symmetric"], true);
  EXPECT_EQ(g["weights"]["strategy"], "group");
  EXPECT_EQ(g["weights"]["group_size"], 128);
  EXPECT_EQ(q["ignore"], nlohmann::json::array({"lm_head"}));
  EXPECT_TRUE(std::filesystem::exists(dir + "/tok512.bin"));

  const Stored set(dir + "/model.safetensors");
  const std::string p = "model.layers.0.mlp.down_proj.";  // [256, 768]
  ASSERT_NE(set.Named(p + "weight_packed"), nullptr);
  EXPECT_EQ(set.Named(p + "weight_packed")->type_name(), "I32");
  EXPECT_THAT(set.Named(p + "weight_packed")->shape, ElementsAre(256, 96));
  EXPECT_EQ(set.Named(p + "weight_scale")->type_name(), "F16");
  EXPECT_THAT(set.Named(p + "weight_scale")->shape, ElementsAre(256, 6));
  EXPECT_THAT(set.Named(p + "weight_shape")->shape, ElementsAre(2));
  EXPECT_EQ(set.Named(p + "weight"), nullptr);
  EXPECT_EQ(set.Named(p + "weight_zero_point"), nullptr);
  EXPECT_NE(set.Named("model.embed_tokens.weight"), nullptr);

  const std::string mix = Dir("mix") + "/model";
  ASSERT_TRUE(api::QuantizeModel(Quantize("compressed-tensors",
                                          "*.mlp.*=uint4-g128-asym,*.self_attn.q_proj.*=int8", mix))
                  .ok());
  const nlohmann::json m = Config(mix);
  ASSERT_EQ(m["config_groups"].size(), 2u);
  EXPECT_EQ(m["config_groups"]["group_0"]["targets"][0], "model.layers.0.self_attn.q_proj");
  EXPECT_EQ(m["config_groups"]["group_0"]["weights"]["strategy"], "tensor");
  EXPECT_EQ(m["config_groups"]["group_1"]["targets"][0], "model.layers.0.mlp.gate_proj");
  EXPECT_EQ(m["config_groups"]["group_1"]["weights"]["symmetric"], false);
  // Every linear layer no group takes, lm_head last.
  EXPECT_EQ(m["ignore"][0], "model.layers.0.self_attn.k_proj");
  EXPECT_EQ(m["ignore"].back(), "lm_head");
}

TEST(CheckpointExport, GptqLayoutAndConfig) {
  const std::string dir = Dir("gptq") + "/model";
  ASSERT_TRUE(api::QuantizeModel(Quantize("gptq", "int4-g128:gptq=actorder", dir)).ok());
  const nlohmann::json q = Config(dir);
  EXPECT_EQ(q["quant_method"], "gptq");
  EXPECT_EQ(q["bits"], 4);
  EXPECT_EQ(q["group_size"], 128);
  EXPECT_EQ(q["desc_act"], true);
  EXPECT_EQ(q["sym"], true);
  EXPECT_EQ(q["checkpoint_format"], "gptq");
  const Stored set(dir + "/model.safetensors");
  const std::string p = "model.layers.0.mlp.down_proj.";  // [256, 768]
  EXPECT_THAT(set.Named(p + "qweight")->shape, ElementsAre(96, 256));
  EXPECT_THAT(set.Named(p + "qzeros")->shape, ElementsAre(6, 32));
  EXPECT_THAT(set.Named(p + "scales")->shape, ElementsAre(6, 256));
  EXPECT_EQ(set.Named(p + "scales")->type_name(), "F16");
  EXPECT_THAT(set.Named(p + "g_idx")->shape, ElementsAre(768));
}

TEST(CheckpointExport, RefusesWhatTheFormatCannotHoldAndLeavesNothing) {
  const std::string dir = Dir("refusals");
  const std::string out = dir + "/model";
  auto refused = [&](const std::string& format, const std::string& weights) {
    return api::QuantizeModel(Quantize(format, weights, out)).status();
  };
  EXPECT_THAT(refused("compressed-tensors", "q4_K").message(),
              HasSubstr("no compressed-tensors layout"));
  EXPECT_THAT(refused("compressed-tensors", "int4-g128:rotate=hadamard").message(),
              HasSubstr("no compressed-tensors layout"));
  EXPECT_THAT(refused("compressed-tensors", "fp8_e5m2-channel").message(), HasSubstr("fp8_e4m3fn"));
  EXPECT_THAT(refused("compressed-tensors", "model.embed_tokens.weight=int8-channel").message(),
              HasSubstr("keep the embedding and lm_head unquantized"));
  EXPECT_THAT(refused("gptq", "fp8_e4m3fn-channel").message(), HasSubstr("no GPTQ layout"));
  EXPECT_THAT(refused("gptq", "int4-g128:scale=bf16").message(), HasSubstr("fp16"));
  EXPECT_THAT(refused("gptq", "int8").message(), HasSubstr("one scale per tensor"));
  absl::Status s = refused("gptq", "*.mlp.*=int8-channel,*.self_attn.*=int4-g128");
  EXPECT_THAT(s.message(), HasSubstr("every decoder matrix alike"));
  s = refused("gptq", "*.mlp.*=int4-g128");
  EXPECT_THAT(s.message(), HasSubstr("is left as it is"));
  EXPECT_EQ(OptionOf(refused("awq", "int4-g128")).value_or(""), "format");
  api::QuantizeModelOptions q = Quantize("gptq", "int4-g128", out);
  q.dtype = "BF16";
  EXPECT_EQ(OptionOf(api::QuantizeModel(q).status()).value_or(""), "dtype");
  q.dtype = "F32";
  q.tokenizer = kModel + "/tok512.bin";
  EXPECT_EQ(OptionOf(api::QuantizeModel(q).status()).value_or(""), "tokenizer");
  EXPECT_FALSE(std::filesystem::exists(out));
  // An existing directory that is not empty is never replaced.
  std::filesystem::create_directories(out);
  std::ofstream(out + "/keep") << "mine";
  EXPECT_THAT(refused("gptq", "int4-g128").message(), HasSubstr("not empty"));
  EXPECT_TRUE(std::filesystem::exists(out + "/keep"));
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(dir),
                          std::filesystem::directory_iterator()),
            1);  // model/ alone: no temporary left
  // An empty one is.
  std::filesystem::remove(out + "/keep");
  EXPECT_TRUE(api::QuantizeModel(Quantize("gptq", "int4-g128", out)).ok());
  EXPECT_TRUE(std::filesystem::exists(out + "/model.safetensors"));
}

}  // namespace
}  // namespace lowp
