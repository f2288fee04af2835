// `lowp plan` end to end: its error columns are `lowp quant-error`'s on the
// same tensors, its memory columns `lowp size`'s for the same settings; the
// proxy note; devices that cannot hold the job; CSV; bad options.
#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/cli_run.h"

namespace lowp {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

const std::string kStories =
    std::string(LOWP_TEST_DATA_DIR) + "/stories260K/stories260K.f32.safetensors";
const std::vector<std::string> kDefaultFormats = {"bf16", "fp8_e4m3fn", "int8-channel", "int4-g128",
                                                  "nf4",  "mxfp4",      "q4_0"};

nlohmann::json RunJson(const std::string& args) {
  const Result r = RunLowp(args);
  EXPECT_EQ(r.exit_code, 0) << args << "\n" << r.output;
  return nlohmann::json::parse(r.output);
}

TEST(CliPlan, Help) {
  EXPECT_THAT(RunLowp("--help").output, HasSubstr("  plan "));
  const Result r = RunLowp("plan --help");
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_THAT(r.output, HasSubstr("usage: lowp plan"));
}

TEST(CliPlan, ErrorColumnsAreQuantErrorsOnTheSameTensors) {
  const nlohmann::json plan = RunJson("plan --model llama-3.1-8b --mode inference --json");
  const nlohmann::json& accuracy = plan["accuracy"];
  EXPECT_TRUE(accuracy["bundled"].get<bool>());
  EXPECT_TRUE(accuracy["proxy"].get<bool>());
  EXPECT_EQ(accuracy["tensors"].size(), 35u);
  EXPECT_EQ(accuracy["elements"].get<int64_t>(), 226'560);

  std::string schemes;
  for (const std::string& f : kDefaultFormats)
    absl::StrAppend(&schemes, schemes.empty() ? "" : ",", f);
  const nlohmann::json quant = RunJson(absl::StrCat(
      "quant-error ", kStories, " --tensors '*_proj.weight' --summary --json --scheme ", schemes));
  ASSERT_EQ(plan["candidates"].size(), kDefaultFormats.size());
  ASSERT_EQ(quant["aggregates"].size(), kDefaultFormats.size());
  for (size_t i = 0; i < kDefaultFormats.size(); ++i) {
    const nlohmann::json& c = plan["candidates"][i];
    const nlohmann::json& q = quant["aggregates"][i];
    EXPECT_EQ(c["format"], kDefaultFormats[i]);
    EXPECT_EQ(q["scheme"], kDefaultFormats[i]);
    // Every field quant-error reports, bit for bit.
    for (const auto& [key, value] : q.items()) {
      EXPECT_EQ(c["error"][key], value) << kDefaultFormats[i] << " " << key;
    }
    const double sqnr = q["sqnr_db"].get<double>();
    EXPECT_EQ(c["sqnr_db"], q["sqnr_db"]);  // nothing overflowed
    EXPECT_NEAR(c["relative_rmse"].get<double>(), std::pow(10.0, -sqnr / 20), 1e-12);
    EXPECT_DOUBLE_EQ(c["clipped_fraction"].get<double>(),
                     q["clipped"].get<double>() / q["elements"].get<double>());
  }
}

TEST(CliPlan, MemoryColumnsAreSizesForTheSameSettings) {
  const std::string job = "--model llama-3-70b --mode inference --seq 8192 --batch 2 --tp 2";
  const nlohmann::json plan = RunJson(absl::StrCat(
      "plan ", job, " --device h100-sxm,rtx-4090 --formats bf16,int4-g128,fp8_e4m3fn,q4_0 --json"));
  ASSERT_EQ(plan["candidates"].size(), 4u);
  for (const nlohmann::json& c : plan["candidates"]) {
    const std::string format = c["format"];
    ASSERT_EQ(c["devices"].size(), 2u);
    for (const nlohmann::json& d : c["devices"]) {
      const std::string device = d["device"];
      const nlohmann::json size = RunJson(absl::StrCat("size ", job, " --weights ", format,
                                                       " --kv bf16 --device ", device, " --json"));
      EXPECT_EQ(d["per_device"], size["per_device"]) << format << " " << device;
      EXPECT_EQ(d["whole"], size["whole"]) << format << " " << device;
      for (const char* key : {"fits", "capacity_bytes", "usable_bytes", "devices_needed",
                              "devices_needed_exact", "max_seq", "max_batch",
                              "bytes_read_per_step"}) {
        EXPECT_EQ(d[key], size[key]) << format << " " << device << " " << key;
      }
      // The decode bound only for a job that fits.
      for (const char* key : {"decode_tokens_per_s_per_sequence", "decode_tokens_per_s"}) {
        EXPECT_EQ(d[key], d["fits"].get<bool>() ? size[key] : nlohmann::json(nullptr))
            << format << " " << device << " " << key;
      }
      EXPECT_EQ(c["weight_bytes"], size["whole"]["weights"]) << format;
      EXPECT_EQ(c["linear_bits_per_parameter"], size["linear_bits_per_parameter"]) << format;
    }
  }
}

TEST(CliPlan, TableSaysWhereTheAccuracyWasMeasured) {
  Result r = RunLowp("plan --model llama-3.1-8b --mode inference --device rtx-4090,h100-sxm");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("the bundled stories260K checkpoint"));
  EXPECT_THAT(r.output,
              HasSubstr("a PROXY: measured on tensors that are not llama-3.1-8b's linear layers"));
  EXPECT_THAT(r.output, HasSubstr("kv cache bf16 for every format"));
  EXPECT_THAT(r.output, HasSubstr("rtx-4090 (NVIDIA GeForce RTX 4090"));
  EXPECT_THAT(r.output, HasSubstr("h100-sxm (NVIDIA H100"));
  EXPECT_THAT(r.output, HasSubstr("GB/device"));
  EXPECT_THAT(r.output, HasSubstr("SQNR dB"));
  EXPECT_THAT(r.output, Not(HasSubstr("\r")));  // no progress when stderr is not a terminal

  // stories260K's own shape, as a config.json: no proxy.
  const std::string config = ::testing::TempDir() + "/stories260K-config.json";
  std::ofstream(config) << R"({"model_type": "llama", "hidden_size": 64, "intermediate_size": 172,
    "num_hidden_layers": 5, "num_attention_heads": 8, "num_key_value_heads": 4,
    "vocab_size": 512, "max_position_embeddings": 512, "tie_word_embeddings": false})";
  r = RunLowp(absl::StrCat("plan --model ", config, " --mode inference --tensors ", kStories));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, Not(HasSubstr("PROXY")));
  EXPECT_THAT(r.output, Not(HasSubstr("bundled")));
  EXPECT_THAT(r.output, HasSubstr("measured on 35 tensors (226,560 weights)"));
}

TEST(CliPlan, ADeviceThatCannotHoldTheJobIsSaidSo) {
  Result r =
      RunLowp("plan --model llama-3.1-8b --mode inference --device tiny:1GB --formats bf16,nf4");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("never"));
  EXPECT_THAT(r.output, HasSubstr("bf16, nf4: cannot fit on any number of tiny"));
  const nlohmann::json j = RunJson(
      "plan --model llama-3.1-8b --mode inference --device tiny:1GB --formats bf16,nf4 --json");
  for (const nlohmann::json& c : j["candidates"]) {
    EXPECT_FALSE(c["devices"][0]["possible"].get<bool>());
    EXPECT_FALSE(c["devices"][0]["fits"].get<bool>());
    EXPECT_TRUE(c["devices"][0]["devices_needed"].is_null());
    EXPECT_GT(c["weight_bytes"].get<int64_t>(), 0);
  }
}

TEST(CliPlan, FullTrainingPlansFloatingFormats) {
  const nlohmann::json j = RunJson("plan --model llama-3.1-8b --mode pretrain --json");
  std::vector<std::string> formats;
  for (const nlohmann::json& c : j["candidates"]) formats.push_back(c["format"]);
  EXPECT_EQ(formats, (std::vector<std::string>{"fp32", "bf16", "fp16", "fp8_e4m3fn"}));
  // Training reads no decode speed.
  for (const nlohmann::json& c : j["candidates"]) {
    EXPECT_TRUE(c["devices"][0]["decode_tokens_per_s_per_sequence"].is_null()) << c["format"];
  }
}

TEST(CliPlan, TensorFilesAfterTensorsAsAListOrAsWords) {
  const std::string bf16 =
      std::string(LOWP_TEST_DATA_DIR) + "/stories260K/stories260K.bf16.safetensors";
  const std::string dir = ::testing::TempDir() + "/cli-plan-two";
  std::filesystem::create_directories(dir);
  // The bf16 checkpoint and a small .npy beside it.
  const std::string npy = dir + "/extra.weight.npy";
  {
    std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': (64, 64), }";
    while ((10 + header.size() + 1) % 64 != 0) header += ' ';
    header += '\n';
    std::ofstream out(npy, std::ios::binary);
    out.write("\x93NUMPY\x01\x00", 8);
    const uint16_t length = static_cast<uint16_t>(header.size());
    out.write(reinterpret_cast<const char*>(&length), 2);
    out << header;
    for (int i = 0; i < 64 * 64; ++i) {
      const float v = 0.001f * static_cast<float>(i % 101) - 0.05f;
      out.write(reinterpret_cast<const char*>(&v), sizeof v);
    }
  }
  const std::string job = "plan --model llama-3.1-8b --mode inference --formats int4-g128 --json";
  const nlohmann::json words = RunJson(absl::StrCat(job, " --tensors ", bf16, " ", npy));
  const nlohmann::json list = RunJson(absl::StrCat(job, " --tensors ", bf16, ",", npy));
  EXPECT_EQ(words["accuracy"]["tensors"].size(), 36u);
  EXPECT_EQ(words["accuracy"]["tensors"].back(), "extra.weight");
  EXPECT_FALSE(words["accuracy"]["bundled"].get<bool>());
  EXPECT_EQ(words["candidates"], list["candidates"]);
}

TEST(CliPlan, CsvHasARowPerFormatAndDevice) {
  const Result r =
      RunLowp("plan --model llama-3.1-8b --mode inference --device rtx-4090,h100-sxm --csv");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::vector<std::string> lines = absl::StrSplit(r.output, '\n', absl::SkipEmpty());
  ASSERT_EQ(lines.size(), 1 + 2 * kDefaultFormats.size());
  EXPECT_THAT(lines[0], HasSubstr("format,device,"));
  EXPECT_THAT(lines[1], HasSubstr("bf16,rtx-4090,16,"));
  EXPECT_THAT(lines.back(), HasSubstr("q4_0,h100-sxm,4.5,"));
  // The numbers are the JSON's.
  const nlohmann::json j =
      RunJson("plan --model llama-3.1-8b --mode inference --device rtx-4090,h100-sxm --json");
  const std::vector<std::string> header = absl::StrSplit(lines[0], ',');
  auto column = [&](const std::string& name) {
    return std::find(header.begin(), header.end(), name) - header.begin();
  };
  for (size_t i = 0; i < kDefaultFormats.size(); ++i) {
    for (size_t d = 0; d < 2; ++d) {
      const std::vector<std::string> row = absl::StrSplit(lines[1 + 2 * i + d], ',');
      ASSERT_EQ(row.size(), header.size());
      const nlohmann::json& c = j["candidates"][i];
      const nlohmann::json& dev = c["devices"][d];
      EXPECT_EQ(row[column("device")], dev["device"]);
      EXPECT_EQ(row[column("weight_bytes")], c["weight_bytes"].dump());
      EXPECT_EQ(row[column("per_device_bytes")], dev["per_device"]["total"].dump());
      EXPECT_EQ(row[column("per_device_kv_cache")], dev["per_device"]["kv_cache"].dump());
      EXPECT_EQ(row[column("max_seq")], dev["max_seq"].dump());
      EXPECT_EQ(row[column("devices_needed")], dev["devices_needed"].dump());
      EXPECT_EQ(std::stod(row[column("relative_rmse")]), c["relative_rmse"].get<double>());
      EXPECT_EQ(std::stod(row[column("sqnr_db")]), c["sqnr_db"].get<double>());
      EXPECT_EQ(row[column("pareto")], c["pareto"].dump());
    }
  }
}

TEST(CliPlan, BadOptionsGiveOneClearLine) {
  const std::string job = "plan --model llama-3.1-8b --mode inference";
  const std::string html = ::testing::TempDir() + "/cli-plan-bad.html";
  struct Case {
    std::string args, message;
  } const cases[] = {
      {"plan --mode inference", "--model is required"},
      {"plan --model llama-3.1-8b", "--mode is required"},
      {"plan --model nosuch-model --mode inference", "--model"},
      {"plan --model llama-3.1-8b --mode serve", "serve"},
      {job + " --formats bf16,nosuch", "--formats nosuch"},
      {job + " --formats bf16,,nf4", "empty name"},
      {job + " --device nosuch", "--device"},
      {job + " --tp 3", "--tp"},
      {job + " --pp 64", "--pp"},
      {job + " --dp 0", "--dp"},
      {job + " --sequence-parallel --tp 2", "--sequence-parallel"},
      {job + " --weights nf4", "--weights"},
      {job + " --json --csv", "exclude each other"},
      {job + " --tensors /nonexistent/w.safetensors", "/nonexistent/w.safetensors"},
      {job + " --select 'nothing*'", "nothing*"},
      {job + " --threads -1", "--threads"},
      {job + " extra", "only after --tensors"},
      {job + " --formats bf16,nf4,bf16", "bf16 is given twice"},
      {job + " --device h100,rtx-4090,h100", "h100 is given twice"},
      {"plan --model llama-3.1-8b --mode pretrain --formats bf16,nf4", "--formats nf4"},
      {job + " --html ''", "--html: empty"},
      {job + " --html /nonexistent-dir/report.html", "/nonexistent-dir/report.html"},
      {job + " --formats nosuch --html " + html, "--formats nosuch"},
  };
  for (const Case& c : cases) {
    const Result r = RunLowp(c.args);
    EXPECT_EQ(r.exit_code, 1) << c.args << "\n" << r.output;
    EXPECT_THAT(r.output, HasSubstr(c.message)) << c.args;
    EXPECT_THAT(r.output, HasSubstr("lowp: ")) << c.args;
  }
  EXPECT_FALSE(std::filesystem::exists(html));
  EXPECT_FALSE(std::filesystem::exists(html + ".lowp-partial"));
}

}  // namespace
}  // namespace lowp
