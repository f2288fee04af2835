// The lowp command end to end: output, conversions, and every bad input
// giving a message, a non-zero exit and no partial output file.
#include <sys/wait.h>

#include <algorithm>
#include <bit>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "formats/format.h"
#include "formats/packing.h"
#include "formats/reference.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "quant/scheme.h"
#include "io/tensor_set.h"
#include "tests/cli_run.h"

namespace lowp {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

using Cli = ScratchDir;

std::string Floats(const std::vector<float>& values) {
  std::string bytes(values.size() * 4, '\0');
  std::memcpy(bytes.data(), values.data(), bytes.size());
  return bytes;
}

TEST_F(Cli, HelpAndUnknownCommands) {
  Result r = RunLowp("--help");
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_THAT(r.output, HasSubstr("convert"));
  EXPECT_EQ(RunLowp("").exit_code, 2);
  r = RunLowp("frobnicate");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.output, HasSubstr("unknown command 'frobnicate'"));
  for (const char* command :
       {"formats", "convert", "schemes", "quant-error", "quantize", "range"}) {
    r = RunLowp(std::string(command) + " --help");
    EXPECT_EQ(r.exit_code, 0);
    EXPECT_THAT(r.output, HasSubstr(std::string("usage: lowp ") + command));
  }
  r = RunLowp("formats --bogus");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.output, HasSubstr("unknown option '--bogus'"));
}

TEST_F(Cli, FormatsTableAndJson) {
  Result r = RunLowp("formats");
  ASSERT_EQ(r.exit_code, 0);
  EXPECT_THAT(r.output, HasSubstr("fp8_e4m3fn"));
  EXPECT_THAT(r.output, HasSubstr("65504"));
  r = RunLowp("formats --json");
  ASSERT_EQ(r.exit_code, 0);
  const nlohmann::json j = nlohmann::json::parse(r.output);
  ASSERT_EQ(j.size(), Catalog().size());
  for (const nlohmann::json& entry : j) {
    const Format f = *FindFormat(entry["name"].get<std::string>());
    EXPECT_EQ(entry["bits"], f.bits);
    EXPECT_EQ(entry["max_finite"].get<double>(), f.max_finite());
    EXPECT_EQ(entry["encoding"], f.encoding_name());
    for (const char* field : {"aliases", "signed", "exponent_bits", "mantissa_bits", "bias",
                              "has_infinity", "has_nan", "has_negative_zero", "min_normal",
                              "min_subnormal", "epsilon", "lowest_finite", "storage_bits"}) {
      EXPECT_TRUE(entry.contains(field)) << field;
    }
  }
}

TEST_F(Cli, ConvertsLikeTheReference) {
  const std::vector<float> values = {1.0f, -2.5f, 448.0f, 1e6f, 3e-5f, -0.0f, 0.1f};
  Write("in.f32", Floats(values));
  Result r = RunLowp("convert --from fp32 --to fp16 " + Path("in.f32") + " " + Path("out.f16"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::string f16 = Read("out.f16");
  ASSERT_EQ(f16.size(), values.size() * 2);
  const Format fp16 = *FindFormat("fp16");
  for (size_t i = 0; i < values.size(); ++i) {
    const uint32_t code = static_cast<uint8_t>(f16[2 * i]) | static_cast<uint8_t>(f16[2 * i + 1])
                                                                 << 8;
    EXPECT_EQ(code, EncodeFloat32(fp16, values[i])) << i;
  }
  // Back to fp32, then to packed fp4 with saturation (odd count).
  ASSERT_EQ(RunLowp("convert --from=half --to=float32 " + Path("out.f16") + " " + Path("back.f32"))
                .exit_code,
            0);
  EXPECT_EQ(Read("back.f32").size(), values.size() * 4);
  r = RunLowp("convert --from fp32 --to fp4 --rounding toward-zero " + Path("in.f32") + " " +
              Path("out.fp4"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::string fp4 = Read("out.fp4");
  ASSERT_EQ(fp4.size(), 4u);
  const Format e2m1 = *FindFormat("fp4_e2m1fn");
  const ConvertOptions rtz{.rounding = Rounding::kTowardZero};
  EXPECT_EQ(static_cast<uint8_t>(fp4[0]),
            EncodeFloat32(e2m1, 1.0f, rtz) | EncodeFloat32(e2m1, -2.5f, rtz) << 4);
  EXPECT_EQ(static_cast<uint8_t>(fp4[3]), EncodeFloat32(e2m1, 0.1f, rtz));  // high nibble 0
}

// Each way convert reaches the kernels (float32, fp16/bf16, decoded codes,
// and the reference for daz on formats whose subnormals are not float32's)
// gives ConvertCode's bytes; the float32 case spans two 8 MiB chunks.
TEST_F(Cli, EveryRouteMatchesTheReference) {
  struct Route {
    const char* from;
    const char* to;
    const char* options;
    ConvertOptions o;
  };
  const Route routes[] = {
      {"fp32",
       "fp8_e4m3fn",
       "--rounding stochastic --seed 5",
       {.rounding = Rounding::kStochastic, .seed = 5}},
      {"fp16", "fp4_e2m1fn", "--subnormals daz", {.subnormals = Subnormals::kInputsAreZero}},
      {"bf16", "int8", "--rounding toward-negative", {.rounding = Rounding::kTowardNegative}},
      {"fp8_e5m2", "fp16", "--subnormals daz", {.subnormals = Subnormals::kInputsAreZero}},
      {"fp8_e5m2", "int4", "--rounding odd", {.rounding = Rounding::kOdd}},
      {"fp8_e4m3fn", "bf16", "", {}},
      {"e8m0fnu",
       "fp16",
       "--subnormals daz --overflow saturate",
       {.overflow = Overflow::kSaturate, .subnormals = Subnormals::kInputsAreZero}},
  };
  for (const Route& route : routes) {
    const Format from = *FindFormat(route.from);
    const Format to = *FindFormat(route.to);
    std::vector<uint32_t> codes;
    if (from.bits == 32) {
      for (uint32_t i = 0; i < 3'000'001; ++i) codes.push_back(i * 2654435761u);
    } else {
      for (uint32_t c = 0; c < from.code_mask(); ++c) codes.push_back(c);  // odd count
    }
    std::vector<uint8_t> in_bytes, expected;
    PackCodes(from, codes, &in_bytes);
    std::vector<uint32_t> converted;
    for (size_t i = 0; i < codes.size(); ++i) {
      converted.push_back(ConvertCode(from, codes[i], to, route.o, i));
    }
    PackCodes(to, converted, &expected);
    Write("in", std::string(in_bytes.begin(), in_bytes.end()));
    const Result r = RunLowp(absl::StrCat("convert --from ", route.from, " --to ", route.to, " ",
                                          route.options, " ", Path("in"), " ", Path("out")));
    ASSERT_EQ(r.exit_code, 0) << r.output;
    EXPECT_TRUE(Read("out") == std::string(expected.begin(), expected.end()))
        << route.from << " -> " << route.to << " " << route.options;
  }
}

TEST_F(Cli, StochasticRoundingIsRepeatable) {
  std::vector<float> values(1000, 1.0f + 0.5f * 0x1p-7f);
  Write("in.f32", Floats(values));
  const std::string base =
      "convert --from fp32 --to bf16 --rounding stochastic " + Path("in.f32") + " ";
  ASSERT_EQ(RunLowp(base + "--seed 7 " + Path("a")).exit_code, 0);
  ASSERT_EQ(RunLowp(base + "--seed 7 " + Path("b")).exit_code, 0);
  ASSERT_EQ(RunLowp(base + "--seed 8 " + Path("c")).exit_code, 0);
  EXPECT_EQ(Read("a"), Read("b"));
  EXPECT_NE(Read("a"), Read("c"));
}

TEST_F(Cli, BadInputsFailCleanly) {
  Write("in.f32", Floats({1.0f, 2.0f}));
  Write("odd.f32", "12345");
  Write("fp6.bin", std::string("\x01\x41", 2));
  Write("existing", "keep me");
  struct Case {
    std::string args, message;
  };
  const Case cases[] = {
      {"convert --from fp32 --to fp7 IN OUT", "unknown format 'fp7'"},
      {"convert --from fp32 --to fp8 IN OUT", "fp8_e4m3fn"},  // lists valid names
      {"convert --from fp32 --to fp16 --rounding up-ish IN OUT", "unknown rounding mode"},
      {"convert --from fp32 --to fp8_e4m3fn --overflow inf IN OUT", "has no infinity"},
      {"convert --from fp32 --to fp16 --seed -3 IN OUT", "--seed"},
      {"convert --to fp16 IN OUT", "--from is required"},
      {"convert --from fp32 --to fp16 IN", "needs IN and OUT"},
      {"convert --from fp32 --to fp16 " + Path("odd.f32") + " OUT", "not a whole number"},
      {"convert --from fp32 --to fp16 " + Path("missing") + " OUT", "cannot open"},
      {"convert --from fp6_e2m3fn --to fp32 " + Path("fp6.bin") + " OUT", "element 1"},
      {"convert --from fp32 --to fp16 " + Path("in.f32") + " " + Path("no/such/dir/out"), "output"},
      {"convert --from fp32 --to fp16 " + Path("odd.f32") + " " + Path("existing"), "not a whole"},
  };
  for (const Case& c : cases) {
    std::string args = c.args;
    if (const size_t at = args.find(" IN "); at != std::string::npos)
      args.replace(at, 4, " " + Path("in.f32") + " ");
    if (args.ends_with(" OUT")) args.replace(args.size() - 4, 4, " " + Path("out"));
    const Result r = RunLowp(args);
    EXPECT_EQ(r.exit_code, 1) << args << "\n" << r.output;
    EXPECT_THAT(r.output, HasSubstr(c.message)) << args;
    EXPECT_THAT(r.output, HasSubstr("lowp: ")) << args;
  }
  // Nothing written, nothing left behind, the existing file untouched.
  EXPECT_EQ(Files(), (std::vector<std::string>{"existing", "fp6.bin", "in.f32", "odd.f32"}));
  EXPECT_EQ(Read("existing"), "keep me");
}

const std::string kStories = LOWP_TEST_DATA_DIR "/stories260K/stories260K.f32.safetensors";

TEST_F(Cli, SchemesListsEveryFamilyWithBitsPerWeight) {
  Result r = RunLowp("schemes");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  for (const char* name : {"int4-g128 (4.125 b/w)", "q4_0 (4.5 b/w)", "mxfp4 (4.25 b/w)", "nf4",
                           "nvfp4", "fp8_e4m3fn", "uint4-g128-asym"}) {
    EXPECT_THAT(r.output, HasSubstr(name));
  }
  r = RunLowp("schemes --json");
  ASSERT_EQ(r.exit_code, 0);
  const nlohmann::json j = nlohmann::json::parse(r.output);
  ASSERT_EQ(j.size(), SchemeFamilies().size());
  for (const nlohmann::json& family : j) {
    EXPECT_FALSE(family["rule"].get<std::string>().empty());
    EXPECT_EQ(family["bits_per_weight_4096x4096"].size(), family["examples"].size());
  }
}

TEST_F(Cli, QuantErrorJsonHasARowPerTensorAndSchemeAndAggregates) {
  Result r = RunLowp("quant-error " + kStories + " --scheme int8-channel,q4_0,bf16 --json");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const nlohmann::json j = nlohmann::json::parse(r.output);
  ASSERT_EQ(j["results"].size(), 48u * 3);
  ASSERT_EQ(j["aggregates"].size(), 3u);
  uint64_t elements = 0;
  for (const nlohmann::json& row : j["results"]) {
    for (const char* field : {"tensor",
                              "scheme",
                              "dtype",
                              "shape",
                              "elements",
                              "bits_per_weight",
                              "bytes",
                              "mse",
                              "rmse",
                              "sqnr_db",
                              "max_abs_error",
                              "mean_abs_error",
                              "max_relative_error",
                              "mean_relative_error",
                              "rms_relative_error",
                              "cosine",
                              "nan_inputs",
                              "inf_inputs",
                              "overflow",
                              "clipped",
                              "zeroed",
                              "subnormal",
                              "measured"}) {
      EXPECT_TRUE(row.contains(field)) << field;
    }
    if (row["scheme"] == "q4_0") elements += row["elements"].get<uint64_t>();
  }
  EXPECT_EQ(elements, 292800u);
  const nlohmann::json& all = j["aggregates"][0];
  EXPECT_EQ(all["tensor"], "(all)");
  EXPECT_EQ(all["scheme"], "int8-channel");
  EXPECT_EQ(all["elements"], 292800u);
  EXPECT_GT(all["sqnr_db"].get<double>(), 30.0);
  EXPECT_EQ(all["bytes"].get<double>() * 8, all["bits_per_weight"].get<double>() * 292800);

  // --tensors selects by glob; --csv has the header and one line per row.
  r = RunLowp("quant-error " + kStories + " --scheme fp16 --tensors 'model.norm.*,lm_head*' --csv");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("tensor,scheme,elements"));
  EXPECT_THAT(r.output, HasSubstr("model.norm.weight,fp16,64"));
  EXPECT_THAT(r.output, HasSubstr("lm_head.weight,fp16,32768"));
  EXPECT_EQ(std::count(r.output.begin(), r.output.end(), '\n'), 4);  // header, 2 tensors, (all)
}

TEST_F(Cli, QuantizeWritesTheDequantizedCheckpoint) {
  Result r = RunLowp("quantize " + kStories + " --scheme int4-g32 --out " + Path("q.safetensors") +
                     " --tensors 'model.layers.*' --json");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  absl::StatusOr<TensorSet> in = TensorSet::Open(kStories);
  absl::StatusOr<TensorSet> out = TensorSet::Open(Path("q.safetensors"));
  ASSERT_TRUE(in.ok() && out.ok()) << out.status();
  ASSERT_EQ(in->tensors().size(), out->tensors().size());
  EXPECT_EQ(out->metadata().at("lowp.scheme"), "int4-g32");
  const auto scheme = *ParseScheme("int4-g32");
  for (size_t i = 0; i < in->tensors().size(); ++i) {
    const TensorView& a = in->tensors()[i];
    const TensorView& b = out->tensors()[i];
    SCOPED_TRACE(a.name);
    ASSERT_EQ(a.name, b.name);
    ASSERT_EQ(a.shape, b.shape);
    if (a.name.rfind("model.layers.", 0) != 0) {  // not selected: copied unchanged
      EXPECT_TRUE(std::equal(a.bytes.begin(), a.bytes.end(), b.bytes.begin(), b.bytes.end()));
      continue;
    }
    std::vector<float> x(a.elements()), q(a.elements()), want(a.elements());
    ASSERT_TRUE(ReadAsFloat32(a, 0, x).ok());
    ASSERT_TRUE(ReadAsFloat32(b, 0, q).ok());
    SchemeCounts counts;
    scheme->Apply(x, a.cols(), TensorContext{}, want, counts);
    EXPECT_EQ(q, want);
  }
  EXPECT_EQ(Files(), std::vector<std::string>{"q.safetensors"});

  // A bad scheme or a missing input: a message, exit 1, no output file.
  r = RunLowp("quantize " + kStories + " --scheme int4-g0 --out " + Path("bad.safetensors"));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.output, HasSubstr("group size"));
  r = RunLowp("quantize " + Path("nope.safetensors") + " --scheme q8_0 --out " +
              Path("bad.safetensors"));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.output, HasSubstr("nope.safetensors"));
  EXPECT_EQ(Files(), std::vector<std::string>{"q.safetensors"});
}

TEST_F(Cli, RangeReportsFractionsAndScales) {
  Result r = RunLowp("range " + kStories + " --tensors model.norm.weight --json");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const nlohmann::json j = nlohmann::json::parse(r.output);
  ASSERT_EQ(j["results"].size(), 4u);  // fp16, bf16, fp8_e4m3fn, fp8_e5m2
  for (const nlohmann::json& row : j["results"]) {
    EXPECT_EQ(row["tensor"], "model.norm.weight");
    EXPECT_EQ(row["elements"], 64u);
    for (const char* field :
         {"overflow_fraction", "subnormal_fraction", "flushed_fraction", "max_relative_error",
          "rms_relative_error", "max_scale_log2", "min_scale_log2", "absmax"}) {
      EXPECT_TRUE(row.contains(field)) << field;
    }
  }
  // absmax 4.425 (PROVENANCE.md): fp16 takes scales up to 2^13 (4.425 * 2^13
  // = 36250 <= 65504 < 72500).
  EXPECT_EQ(j["results"][0]["format"], "fp16");
  EXPECT_EQ(j["results"][0]["max_scale_log2"], 13);
  r = RunLowp("range " + kStories + " --formats fp16,int8");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.output, HasSubstr("'int8' is not a floating format"));
}

TEST_F(Cli, QuantCommandsRejectBadArguments) {
  struct Case {
    std::string args, message;
  } cases[] = {
      {"quant-error " + kStories, "--scheme is required"},
      {"quant-error " + kStories + " --scheme nosuch", "unknown scheme 'nosuch'"},
      {"quant-error " + kStories + " --scheme fp16 --tensors 'zzz*'", "matches no tensor"},
      {"quant-error " + kStories + " --scheme fp16 --json --csv", "exclude each other"},
      {"quant-error " + kStories + " --scheme fp16 --threads -1", "--threads '-1'"},
      {"quant-error " + kStories + " --scheme fp16 --relative-floor x", "--relative-floor 'x'"},
      {"quant-error missing.safetensors --scheme fp16", "missing.safetensors"},
      {"quant-error --scheme fp16", "needs input files"},
      {"quantize " + kStories + " --scheme fp16", "--out is required"},
      {"quantize " + kStories + " --scheme fp16,bf16 --out x", "one --scheme"},
      {"quantize " + kStories + " --scheme fp16 --out x --dtype I8", "--dtype 'I8'"},
      {"range " + kStories + " --fraction 2", "--fraction '2'"},
      {"range " + kStories + " --formats nosuch", "--formats"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.args);
    Result r = RunLowp(c.args);
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_THAT(r.output, HasSubstr(c.message));
  }
}

}  // namespace
}  // namespace lowp
