// The use-case functions (api/): each result is what the layers below give
// for the same inputs, arrays are read in place as files are, the JSON is
// the result's, and every option error names its field with the payload the
// front ends map (formats/option_error.h).
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "api/api.h"
#include "formats/packing.h"
#include "formats/option_error.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "io/tensor_set.h"
#include "kernels/convert.h"
#include "quant/measure.h"
#include "quant/scheme.h"

namespace lowp {
namespace {

using ::testing::HasSubstr;

const std::string kStories =
    std::string(LOWP_TEST_DATA_DIR) + "/stories260K/stories260K.f32.safetensors";

// The field an option error names, "" for any other status.
std::string FieldOf(const absl::Status& s) {
  EXPECT_FALSE(s.ok());
  const std::optional<std::string> field = OptionOf(s);
  if (field) {
    EXPECT_TRUE(absl::StartsWith(s.message(), *field)) << s;
  }
  return field.value_or("");
}

TEST(ApiQuantError, AggregatesAreTheTensorsReportsAddedInOrder) {
  api::QuantErrorOptions o;
  o.inputs.files = {kStories};
  o.schemes = {"int4-g128", "nf4"};
  o.tensors = "*layers.0.*proj*";
  absl::StatusOr<api::QuantErrorResult> r = api::QuantError(o);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->aggregates.size(), 2u);
  ASSERT_EQ(r->results.size(), 14u);  // 7 projections x 2 schemes
  absl::StatusOr<TensorSet> set = TensorSet::Open(kStories);
  ASSERT_TRUE(set.ok());
  for (size_t s = 0; s < 2; ++s) {
    const std::unique_ptr<Scheme> scheme = *ParseScheme(o.schemes[s]);
    QuantReport all;
    for (const TensorView& t : set->tensors()) {
      if (!MatchesPattern(o.tensors, t.name)) continue;
      all.Add(*MeasureTensor(t, *scheme));
    }
    EXPECT_EQ(r->aggregates[s].stats.sum_squared_error, all.stats.sum_squared_error);
    EXPECT_EQ(r->aggregates[s].storage_bits, all.storage_bits);
    EXPECT_EQ(r->aggregates[s].tensor, "(all)");
  }
  // --summary keeps the aggregates only; the JSON is the result's.
  o.summary = true;
  absl::StatusOr<api::QuantErrorResult> summary = api::QuantError(o);
  ASSERT_TRUE(summary.ok());
  EXPECT_TRUE(summary->results.empty());
  const nlohmann::json j = api::ToJson(*summary);
  EXPECT_EQ(j["aggregates"].size(), 2u);
  EXPECT_EQ(j["aggregates"][1]["scheme"], "nf4");
  EXPECT_EQ(j["aggregates"][1]["sqnr_db"].get<double>(), summary->aggregates[1].sqnr_db());
}

TEST(ApiQuantError, ArraysAreMeasuredInPlaceAsFilesAre) {
  std::vector<float> w(4 * 256);
  for (size_t i = 0; i < w.size(); ++i) w[i] = std::sin(0.37f * static_cast<float>(i)) * 0.05f;
  TensorView view;
  view.name = "w";
  view.dtype = DType::kF32;
  view.shape = {4, 256};
  view.bytes = {reinterpret_cast<const uint8_t*>(w.data()), w.size() * sizeof(float)};
  api::QuantErrorOptions o;
  o.inputs.arrays = {view};
  o.schemes = {"q4_0"};
  absl::StatusOr<api::QuantErrorResult> r = api::QuantError(o);
  ASSERT_TRUE(r.ok()) << r.status();
  const QuantReport direct = *MeasureTensor(view, **ParseScheme("q4_0"));
  EXPECT_EQ(r->results.at(0).stats.sum_squared_error, direct.stats.sum_squared_error);
  // QuantizeArray writes what Quantize would store as F32.
  std::vector<float> q(w.size());
  ASSERT_TRUE(api::QuantizeArray(view, "q4_0", q).ok());
  double sse = 0;
  for (size_t i = 0; i < w.size(); ++i) sse += (double{q[i]} - w[i]) * (double{q[i]} - w[i]);
  // Within the bound of kernels/error_stats.h (float sums over runs of 16).
  EXPECT_NEAR(sse, direct.stats.sum_squared_error, (21 * 0x1p-24 + 1e-12) * sse);
  o.tensors = "nothing*";
  EXPECT_EQ(FieldOf(api::QuantError(o).status()), "tensors");
  EXPECT_THAT(api::QuantError(o).status().message(), HasSubstr("the arrays given"));
}

TEST(ApiErrors, NameTheOptionsField) {
  api::QuantErrorOptions q;
  q.inputs.files = {kStories};
  q.schemes = {"bogus"};
  EXPECT_EQ(FieldOf(api::QuantError(q).status()), "scheme");
  q.schemes = {"bf16"};
  q.relative_floor = -1;
  EXPECT_EQ(FieldOf(api::QuantError(q).status()), "relative_floor -1");
  q.relative_floor = 1e-3;
  q.threads = 5000;
  EXPECT_EQ(FieldOf(api::QuantError(q).status()), "threads 5000");

  api::RangeStudyOptions r;
  r.inputs.files = {kStories};
  r.fraction = 2;
  EXPECT_EQ(FieldOf(api::RangeStudy(r).status()), "fraction 2");
  r.fraction = 0.5;
  r.formats = {"fp7"};
  EXPECT_EQ(FieldOf(api::RangeStudy(r).status()), "formats");

  api::QuantizeOptions z;
  z.input = kStories;
  z.scheme = "nf4";
  EXPECT_EQ(FieldOf(api::Quantize(z).status()), "output");
  z.output = "/nonexistent-dir/q.safetensors";
  z.dtype = "F64";
  EXPECT_EQ(FieldOf(api::Quantize(z).status()), "dtype");

  api::SizeOptions s;
  s.model = "llama-3.1-8b";
  s.sizing.mode = Mode::kInference;
  s.sizing.seq = 0;
  EXPECT_EQ(FieldOf(api::Size(s).status()), "seq");
  s.sizing.seq = 4096;
  s.device = "nosuch";
  EXPECT_EQ(FieldOf(api::Size(s).status()), "device");
  s.device = "h100-sxm";
  s.model = "nosuch";
  EXPECT_EQ(FieldOf(api::Size(s).status()), "model");
  s.model = "llama-3.1-8b";
  s.sizing.weights = "nf4";
  EXPECT_EQ(FieldOf(api::CompareFormats({s, {}}).status()), "weights and compare_formats");
  s.sizing.weights.clear();
  EXPECT_EQ(FieldOf(api::CompareFormats({s, {"bf16", "nosuch"}}).status()), "formats nosuch");

  api::PlanJobOptions p;
  p.model = "llama-3.1-8b";
  p.sizing.mode = Mode::kInference;
  p.sizing.weights = "bf16";
  EXPECT_EQ(FieldOf(api::PlanJob(p).status()), "weights");
  p.sizing.weights.clear();
  p.html = "";
  EXPECT_EQ(FieldOf(api::PlanJob(p).status()), "html");
  p.html.reset();
  p.sizing.mode = Mode::kPretrain;
  p.formats = {"int4-g128"};
  const absl::Status full = api::PlanJob(p).status();
  EXPECT_EQ(FieldOf(full), "formats int4-g128");
  EXPECT_THAT(full.message(), HasSubstr("`mode` pretrain"));  // another option, in backquotes

  api::ConvertFileOptions c{"fp32", "nosuch", {}, kStories, "/nonexistent-dir/x"};
  EXPECT_EQ(FieldOf(api::ConvertFile(c).status()), "to");
  c.to = "int8";
  c.conversion.overflow = Overflow::kInfinity;
  EXPECT_EQ(FieldOf(api::ConvertFile(c).status()), "overflow inf");
}

// Every api function that writes runs as one operation (io/input_files.h):
// its output never replaces a file it read, in-process too; the next call
// may write a file an earlier one read.
TEST(ApiOutputs, NeverReplaceAFileTheSameCallReads) {
  const std::string dir = ::testing::TempDir() + "/api_outputs";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  const std::string copy = dir + "/m.safetensors";
  std::filesystem::copy_file(kStories, copy);
  const uintmax_t size = std::filesystem::file_size(copy);
  api::QuantizeOptions z;
  z.input = copy;
  z.scheme = "int8-channel";
  z.output = copy;
  const absl::Status same = api::Quantize(z).status();
  EXPECT_EQ(FieldOf(same), "output");
  EXPECT_THAT(same.message(), HasSubstr(": is an input of this run"));
  EXPECT_EQ(std::filesystem::file_size(copy), size);
  // Another call writes it: its own input is another file.
  z.output = dir + "/q.safetensors";
  ASSERT_TRUE(api::Quantize(z).ok());
  z.input = dir + "/q.safetensors";
  z.output = copy;
  EXPECT_TRUE(api::Quantize(z).ok());
  api::ConvertFileOptions c{"fp32", "bf16", {}, copy, copy};
  EXPECT_EQ(FieldOf(api::ConvertFile(c).status()), "output");
  std::filesystem::remove_all(dir);
}

TEST(ApiSize, IsTheMemoryModelsReport) {
  api::SizeOptions s;
  s.model = "llama-3.1-405b";
  s.sizing.mode = Mode::kPretrain;
  absl::StatusOr<SizingReport> r = api::Size(s);
  ASSERT_TRUE(r.ok()) << r.status();
  const SizingReport direct = *EstimateMemory(*FindModel("llama-3.1-405b"), s.sizing,
                                              *FindDevice("h100-sxm"));
  EXPECT_EQ(r->whole.model_states(), direct.whole.model_states());
  EXPECT_EQ(r->whole.model_states(), 16 * r->parameters.total);  // the seeds' 16 bytes
  EXPECT_EQ(api::ToJson(*r)["whole"]["model_states"].get<int64_t>(), r->whole.model_states());
}

TEST(ApiConvert, CodeArraysMatchTheKernels) {
  const Format fp4 = *FindFormat("fp4_e2m1fn");
  const std::vector<float> values = {0, 0.5f, -1.5f, 6, 7, -0.25f, 3};
  std::vector<uint8_t> packed(StorageBytes(fp4, values.size())), unpacked(values.size());
  ASSERT_TRUE(api::EncodeValues(fp4, values, {}, true, packed).ok());
  ASSERT_TRUE(api::EncodeValues(fp4, values, {}, false, unpacked).ok());
  std::vector<uint8_t> kernel(packed.size());
  ASSERT_TRUE(EncodeArray(fp4, values, kernel).ok());
  EXPECT_EQ(packed, kernel);
  for (size_t i = 0; i < values.size(); ++i) EXPECT_EQ(unpacked[i], CodeAt(fp4, packed, i));
  std::vector<float> back(values.size()), back_packed(values.size());
  ASSERT_TRUE(api::DecodeCodes(fp4, unpacked.data(), 1, values.size(), false, back).ok());
  ASSERT_TRUE(api::DecodeCodes(fp4, packed.data(), 1, values.size(), true, back_packed).ok());
  EXPECT_EQ(back, back_packed);
  EXPECT_EQ(back[3], 6.0f);
  EXPECT_EQ(back[4], 6.0f);  // 7 saturates (fp4 has no infinity)
  const uint16_t wide = 16;
  EXPECT_THAT(api::DecodeCodes(fp4, &wide, 2, 1, false, std::span<float>(back).first(1))
                  .message(),
              HasSubstr("wider"));
}

}  // namespace
}  // namespace lowp
