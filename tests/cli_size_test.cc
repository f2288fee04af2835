// `lowp size` and `lowp devices` end to end: the published counts in the
// JSON report, the tables' labels, and every bad input giving one line on
// stderr that names the option, with exit code 1.
#include <sys/wait.h>

#include <algorithm>
#include <cstdio>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/cli_run.h"

namespace lowp {
namespace {

using ::testing::HasSubstr;

nlohmann::json RunJson(const std::string& args) {
  const Result r = RunLowp(args);
  EXPECT_EQ(r.exit_code, 0) << args << "\n" << r.output;
  return nlohmann::json::parse(r.output);
}

TEST(CliSize, HelpAndUsage) {
  Result r = RunLowp("--help");
  EXPECT_THAT(r.output, HasSubstr("  size "));
  EXPECT_THAT(r.output, HasSubstr("  devices "));
  for (const char* command : {"size", "devices"}) {
    r = RunLowp(std::string(command) + " --help");
    EXPECT_EQ(r.exit_code, 0);
    EXPECT_THAT(r.output, HasSubstr(std::string("usage: lowp ") + command));
  }
}

TEST(CliDevices, TableAndJson) {
  Result r = RunLowp("devices");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("h100-sxm"));
  EXPECT_THAT(r.output, HasSubstr("memory GB (10^9 B)"));
  EXPECT_THAT(r.output, HasSubstr("memory GiB (2^30 B)"));
  EXPECT_THAT(r.output, HasSubstr("74.51"));  // 80e9 / 2^30

  const nlohmann::json j = RunJson("devices --json");
  ASSERT_TRUE(j.is_array());
  bool found = false;
  for (const nlohmann::json& d : j) {
    EXPECT_TRUE(d["memory_bytes"].is_number_integer()) << d;
    EXPECT_TRUE(d["bandwidth_bytes_per_s"].is_number_integer()) << d;
    EXPECT_FALSE(d["source"].get<std::string>().empty()) << d;
    if (d["name"] == "h100-sxm") {
      found = true;
      EXPECT_EQ(d["memory_bytes"].get<int64_t>(), 80'000'000'000);
      EXPECT_EQ(d["bandwidth_bytes_per_s"].get<int64_t>(), 3'350'000'000'000);
    }
  }
  EXPECT_TRUE(found);
  EXPECT_EQ(RunLowp("devices extra").exit_code, 1);
}

TEST(CliSize, Llama405bPretrainJson) {
  // The seeds' count: 16 bytes per parameter over 80e9-byte devices, no
  // buffers: 6,493,654,220,800 / 80e9 = 81.17, so 82 devices.
  nlohmann::json j = RunJson("size --model llama-3.1-405b --mode pretrain --buffers 0 --json");
  EXPECT_EQ(j["parameters"]["total"].get<int64_t>(), 405'853'388'800);
  EXPECT_EQ(j["trainable_parameters"].get<int64_t>(), 405'853'388'800);
  EXPECT_EQ(j["whole"]["model_states"].get<int64_t>(), 6'493'654'220'800);
  EXPECT_EQ(j["whole"]["model_states"].get<int64_t>(), 405'853'388'800 * 16);
  EXPECT_EQ(j["devices_for_states"].get<int64_t>(), 82);
  EXPECT_NEAR(j["devices_for_states_exact"].get<double>(), 81.17, 0.005);
  EXPECT_EQ(j["device"]["name"], "h100-sxm");
  EXPECT_EQ(j["device"]["memory_bytes"].get<int64_t>(), 80'000'000'000);
  EXPECT_EQ(j["usable_bytes"].get<int64_t>(), 80'000'000'000);
  EXPECT_FALSE(j["fits"].get<bool>());
  // The options come back with every default filled in.
  EXPECT_EQ(j["options"]["mode"], "pretrain");
  EXPECT_EQ(j["options"]["weights"], "bf16");
  EXPECT_EQ(j["options"]["grads"], "bf16");
  EXPECT_EQ(j["options"]["master"], "fp32");
  EXPECT_EQ(j["options"]["opt_state"], "fp32");
  EXPECT_EQ(j["options"]["optimizer"], "adamw");
  // Every byte count is an exact integer.
  for (const char* part : {"whole", "per_device"}) {
    for (const auto& [key, value] : j[part].items()) {
      EXPECT_TRUE(value.is_number_integer()) << part << "." << key;
    }
  }
  for (const auto& [key, value] : j["parameters"].items()) {
    EXPECT_TRUE(value.is_number_integer()) << "parameters." << key;
  }

  // With the default 2 GB of buffers per device, 78e9 bytes are usable.
  j = RunJson("size --model llama-3.1-405b --mode pretrain --json");
  EXPECT_EQ(j["options"]["buffers_bytes"].get<int64_t>(), 2'000'000'000);
  EXPECT_EQ(j["usable_bytes"].get<int64_t>(), 78'000'000'000);
  // The states' count is over the whole capacity (the seeds' count); the
  // job's over what the buffers leave.
  EXPECT_EQ(j["devices_for_states"].get<int64_t>(), 82);
  EXPECT_EQ(j["devices_needed"].get<int64_t>(),
            (j["whole"]["total"].get<int64_t>() + 78'000'000'000 - 1) / 78'000'000'000);
}

TEST(CliSize, Llama405bTableLabelsUnits) {
  const Result r = RunLowp("size --model llama-3.1-405b --mode pretrain --buffers 0");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("405,853,388,800 parameters"));
  EXPECT_THAT(r.output, HasSubstr("per device GB"));
  EXPECT_THAT(r.output, HasSubstr("per device GiB"));
  EXPECT_THAT(r.output, HasSubstr("whole job bytes"));
  EXPECT_THAT(r.output, HasSubstr("81.17 -> 82"));
  EXPECT_THAT(r.output, HasSubstr("no: "));
}

TEST(CliSize, Llama70bInt4InferenceFits) {
  const std::string args =
      "size --model llama-3.1-70b --mode inference --weights int4-g128 --seq 8192 "
      "--device h100-sxm";
  const Result r = RunLowp(args);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("yes: the most loaded device"));
  EXPECT_THAT(r.output, HasSubstr("tokens/s per sequence"));

  const nlohmann::json j = RunJson(args + " --json");
  EXPECT_TRUE(j["fits"].get<bool>());
  EXPECT_EQ(j["options"]["weights"], "int4-g128");
  EXPECT_EQ(j["options"]["grads"], nullptr);  // inference trains nothing
  // 2 x 80 layers x 8 kv heads x 128 x 2 bytes x 8192 tokens.
  EXPECT_EQ(j["per_device"]["kv_cache"].get<int64_t>(), 2'684'354'560);
  EXPECT_GT(j["decode_tokens_per_s_per_sequence"].get<double>(), 0);
  EXPECT_GT(j["bytes_read_per_step"].get<int64_t>(), j["per_device"]["weights"].get<int64_t>());
}

TEST(CliSize, UserDefinedDevice) {
  const nlohmann::json j =
      RunJson("size --model llama-3.1-8b --mode inference --device mygpu:96GB:4TB/s --json");
  EXPECT_EQ(j["device"]["name"], "mygpu");
  EXPECT_EQ(j["device"]["memory_bytes"].get<int64_t>(), 96'000'000'000);
  EXPECT_EQ(j["device"]["bandwidth_bytes_per_s"].get<int64_t>(), 4'000'000'000'000);
}

TEST(CliSize, CompareFormats) {
  nlohmann::json j =
      RunJson("size --model llama-3.1-70b --mode inference --compare-formats --json");
  ASSERT_EQ(j["rows"].size(), 8u);
  EXPECT_EQ(j["rows"][0]["format"], "fp32");
  EXPECT_EQ(j["rows"][1]["format"], "bf16");
  EXPECT_EQ(j["rows"][1]["saving_vs_bf16"].get<double>(), 0);
  for (const nlohmann::json& row : j["rows"]) {
    EXPECT_TRUE(row["weight_bytes"].is_number_integer()) << row;
    EXPECT_TRUE(row["per_device_bytes"].is_number_integer()) << row;
  }

  j = RunJson(
      "size --model llama-3.1-70b --mode inference --compare-formats --formats bf16,int4-g128 "
      "--json");
  ASSERT_EQ(j["rows"].size(), 2u);
  EXPECT_DOUBLE_EQ(j["rows"][1]["linear_bits_per_parameter"].get<double>(), 4.125);
  EXPECT_LT(j["rows"][1]["weight_bytes"].get<int64_t>(),
            j["rows"][0]["weight_bytes"].get<int64_t>());

  Result r = RunLowp("size --model llama-3.1-70b --mode inference --compare-formats");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("saving vs bf16"));
  EXPECT_THAT(r.output, HasSubstr("int4-g128"));

  r = RunLowp("size --model llama-3.1-70b --mode inference --compare-formats --csv --formats nf4");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("format,bits/param (linear),weight bytes"));
  EXPECT_THAT(r.output, HasSubstr("\nnf4,4.5,"));
}

TEST(CliSize, ComponentCsv) {
  const Result r = RunLowp("size --model llama-3.1-8b --mode inference --csv");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("component,per device bytes,per device GB,per device GiB"));
  EXPECT_THAT(r.output, HasSubstr("\nbuffers,2000000000,2.00,1.86,0,0.00\n"));
}

TEST(CliSize, ErrorsAreOneLineNamingTheOption) {
  struct Case {
    const char* args;
    const char* message;
  };
  const Case cases[] = {
      {"--model no-such-model --mode pretrain", "--model"},
      {"--model no-such-model --mode pretrain", "no-such-model"},
      {"--model llama-3.1-8b --mode pretrain --device h300", "--device"},
      {"--model llama-3.1-8b --mode pretrain --device h300", "unknown device 'h300'"},
      {"--model llama-3.1-8b --mode pretrain --device x:80XB", "--device"},
      {"--model llama-3.1-8b --mode inference --weights int3-bogus", "--weights"},
      {"--model llama-3.1-8b --mode pretrain --grads nosuchformat", "--grads"},
      {"--model llama-3.1-8b --mode pretrain --tp 0", "--tp"},
      {"--model llama-3.1-8b --mode pretrain --tp 3", "--tp"},
      {"--model llama-3.1-8b --mode pretrain --zero 4", "--zero"},
      {"--model llama-3.1-8b --mode pretrain --seq 8k", "--seq '8k'"},
      {"--model llama-3.1-8b --mode pretrain --batch ''", "--batch"},
      {"--model llama-3.1-8b --mode pretrain --dp 1.5", "--dp '1.5'"},
      {"--model llama-3.1-8b --mode pretrain --zero 99999999999", "--zero"},
      {"--model llama-3.1-8b --mode pretrain --buffers 2XB", "--buffers"},
      {"--model llama-3.1-8b --mode pretrain --headroom 1", "--headroom"},
      {"--model llama-3.1-8b --mode pretrain --headroom lots", "--headroom"},
      {"--model llama-3.1-8b --mode pretrain --optimizer lion", "--optimizer"},
      {"--model llama-3.1-8b --mode pretrain --recompute most", "--recompute"},
      {"--model llama-3.1-8b --mode pretrain --offload weights", "--offload"},
      {"--model llama-3.1-8b --mode pretrain --activation-bytes 3", "--activation-bytes"},
      {"--model llama-3.1-8b --mode lora --lora-targets q,,v", "--lora-targets"},
      {"--model llama-3.1-8b --mode lora --lora-targets q,xyz", "--lora-targets"},
      {"--model llama-3.1-8b --mode train", "--mode"},
      {"--model llama-3.1-8b", "--mode"},
      {"--mode pretrain", "--model"},
      {"--model llama-3.1-8b --mode pretrain --bogus", "unknown option '--bogus'"},
      {"--model llama-3.1-8b --mode pretrain --seq", "--seq needs a value"},
      {"--model llama-3.1-8b --mode pretrain extra", "positional"},
      {"--model llama-3.1-8b --mode pretrain --json --csv", "--json and --csv"},
      {"--model llama-3.1-8b --mode inference --formats bf16", "--formats"},
      {"--model llama-3.1-8b --mode inference --compare-formats --weights nf4", "--weights"},
      {"--model llama-3.1-8b --mode inference --compare-formats --formats bf16,bogus",
       "--formats bogus"},
      {"--model llama-3.1-8b --mode inference --compare-formats --formats bf16,,nf4", "--formats"},
      {"--model llama-3.1-8b --mode pretrain --compare-formats", "--compare-formats"},
  };
  for (const Case& c : cases) {
    const Result r = RunLowp(std::string("size ") + c.args);
    EXPECT_EQ(r.exit_code, 1) << c.args << "\n" << r.output;
    EXPECT_THAT(r.output, HasSubstr(c.message)) << c.args;
    EXPECT_EQ(std::count(r.output.begin(), r.output.end(), '\n'), 1) << c.args << "\n" << r.output;
    EXPECT_EQ(r.output.rfind("lowp: ", 0), 0u) << c.args << "\n" << r.output;
  }
}

}  // namespace
}  // namespace lowp
