// The plan (sizing/plan.h): Pareto flags on constructed cases, the error of
// each candidate as the sum of MeasureTensor over the linear weights, the
// memory as EstimateMemory's, proxy detection, devices that cannot hold the
// job on any number of them, and bad options.
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "quant/scheme.h"
#include "io/tensor_set.h"
#include "io/bundled.h"
#include "sizing/plan.h"

namespace lowp {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

const std::string kStories =
    std::string(LOWP_TEST_DATA_DIR) + "/stories260K/stories260K.f32.safetensors";

Device Dev(const std::string& spec) { return *FindDevice(spec); }

// stories260K's own shape (dim 64, hidden 172, 5 layers, 8 heads, 4 KV heads,
// vocab 512, context 512; lm_head stored).
ModelConfig Stories() {
  ModelConfig m = *FindModel("llama-3.1-8b");
  m.name = "stories260K";
  m.hidden_size = 64;
  m.intermediate_size = 172;
  m.num_layers = 5;
  m.num_heads = 8;
  m.num_kv_heads = 4;
  m.head_dim = 8;
  m.vocab_size = 512;
  m.max_position_embeddings = 512;
  m.tie_word_embeddings = false;
  return m;
}

// One layer of two big matrices and one head: nothing to split but the layer
// itself (3.2 GB of weights in bf16).
ModelConfig Wide() {
  ModelConfig m = Stories();
  m.name = "wide";
  m.hidden_size = 8192;
  m.intermediate_size = 65536;
  m.num_layers = 1;
  m.num_heads = 1;
  m.num_kv_heads = 1;
  m.head_dim = 8192;
  m.vocab_size = 32;
  return m;
}

PlanOptions Inference(std::vector<std::string> devices = {"h100-sxm"}) {
  PlanOptions o;
  o.sizing.mode = Mode::kInference;
  for (const std::string& d : devices) o.devices.push_back(Dev(d));
  o.tensor_files = {kStories};
  return o;
}

TEST(ParetoOptimal, ConstructedCases) {
  // Smaller or more accurate than every other: 0 (smallest), 1 (the most
  // accurate at 8), 3 (the most accurate); 2 loses to 1 at equal size, 4
  // to 0 at equal error.
  EXPECT_THAT(ParetoOptimal({4, 8, 8, 16, 4.5}, {0.1, 0.01, 0.02, 0.001, 0.1}),
              ElementsAre(true, true, false, true, false));
  // Equal candidates are both optimal; an exact one (error 0) is optimal.
  EXPECT_THAT(ParetoOptimal({8, 8, 32}, {0.5, 0.5, 0}), ElementsAre(true, true, true));
  // A larger, worse one is dominated; NaN is never optimal, dominates nothing.
  const double nan = std::numeric_limits<double>::quiet_NaN();
  EXPECT_THAT(ParetoOptimal({4, 16, 2}, {0.1, 0.2, nan}), ElementsAre(true, false, false));
  EXPECT_THAT(ParetoOptimal({}, {}), ElementsAre());
  // Infinite error (a format that overflowed) is never optimal, even when
  // smallest, and dominates nothing.
  const double inf = std::numeric_limits<double>::infinity();
  EXPECT_THAT(ParetoOptimal({2, 4}, {inf, 0.1}), ElementsAre(false, true));
  // Sizes within 0.1% are the same size: fp8's 8 bits against int8-channel's
  // 8.003, the more accurate wins; 0.2% apart both stay.
  EXPECT_THAT(ParetoOptimal({8, 8.003}, {0.026, 0.007}), ElementsAre(false, true));
  EXPECT_THAT(ParetoOptimal({8, 8.02}, {0.026, 0.007}), ElementsAre(true, true));
}

TEST(DefaultPlanFormats, QuantizedStorageOnlyWhereWeightsAreNotTrained) {
  EXPECT_THAT(
      DefaultPlanFormats(Mode::kInference),
      ElementsAre("bf16", "fp8_e4m3fn", "int8-channel", "int4-g128", "nf4", "mxfp4", "q4_0"));
  EXPECT_EQ(DefaultPlanFormats(Mode::kQlora), DefaultPlanFormats(Mode::kInference));
  EXPECT_THAT(DefaultPlanFormats(Mode::kPretrain),
              ElementsAre("fp32", "bf16", "fp16", "fp8_e4m3fn"));
  EXPECT_EQ(DefaultPlanFormats(Mode::kFinetune), DefaultPlanFormats(Mode::kPretrain));
}

TEST(IsLinearWeightName, HuggingFaceMetaAndGgufNames) {
  for (const char* name :
       {"model.layers.0.self_attn.q_proj.weight", "model.layers.3.mlp.down_proj.weight",
        "layers.0.attention.wo.weight", "layers.1.feed_forward.w1.weight",
        "model.layers.0.block_sparse_moe.experts.3.w2.weight",
        "transformer.h.0.attn.c_attn.weight"}) {
    EXPECT_TRUE(IsLinearWeightName(name)) << name;
  }
  for (const char* name :
       {"model.embed_tokens.weight", "lm_head.weight", "output.weight", "tok_embeddings.weight",
        "token_embd.weight", "transformer.wte.weight", "transformer.wpe.weight",
        "model.layers.0.block_sparse_moe.gate.weight", "model.layers.0.mlp.router.weight"}) {
    EXPECT_FALSE(IsLinearWeightName(name)) << name;
  }
}

TEST(MakePlan, ErrorIsTheSumOfMeasureTensorOverTheLinearWeights) {
  PlanOptions o = Inference();
  o.formats = {"int4-g128", "bf16"};
  std::vector<std::string> seen;
  o.progress = [&](size_t total, const std::string& name) {
    EXPECT_EQ(total, 35u);
    seen.push_back(name);
  };
  absl::StatusOr<Plan> plan = MakePlan(*FindModel("llama-3.1-8b"), o);
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_EQ(plan->candidates.size(), 2u);
  EXPECT_EQ(plan->source.tensors.size(), 35u);  // 5 layers x q k v o gate up down
  EXPECT_EQ(plan->source.tensors, seen);
  EXPECT_EQ(plan->source.elements, 226'560u);
  EXPECT_FALSE(plan->source.bundled);
  EXPECT_TRUE(plan->source.proxy);
  EXPECT_THAT(plan->source.proxy_reason,
              HasSubstr("[64, 64] has the shape of no linear layer of llama-3.1-8b"));
  EXPECT_EQ(plan->kv, "bf16");
  EXPECT_FALSE(plan->options.progress);  // not kept

  absl::StatusOr<TensorSet> set = TensorSet::Open(kStories);
  ASSERT_TRUE(set.ok());
  for (const PlanCandidate& c : plan->candidates) {
    std::unique_ptr<Scheme> scheme = *ParseScheme(c.format);
    QuantReport sum;
    size_t n = 0;
    for (const TensorView& t : set->tensors()) {
      if (!MatchesPattern("*_proj.weight", t.name)) continue;
      ++n;
      sum.Add(*MeasureTensor(t, *scheme));
    }
    EXPECT_EQ(n, 35u);
    EXPECT_EQ(c.error.elements, sum.elements) << c.format;
    EXPECT_EQ(c.error.storage_bits, sum.storage_bits) << c.format;
    EXPECT_EQ(c.error.stats.sum_squared_error, sum.stats.sum_squared_error) << c.format;
    EXPECT_EQ(c.error.stats.max_abs_error, sum.stats.max_abs_error) << c.format;
    EXPECT_EQ(c.error.counts.clipped, sum.counts.clipped) << c.format;
    EXPECT_DOUBLE_EQ(c.relative_rmse(), std::pow(10.0, -c.sqnr_db() / 20)) << c.format;
  }
  // int4 is smaller, bf16 more accurate: both optimal.
  EXPECT_TRUE(plan->candidates[0].pareto);
  EXPECT_TRUE(plan->candidates[1].pareto);
  EXPECT_LT(plan->candidates[1].relative_rmse(), plan->candidates[0].relative_rmse());
}

TEST(MakePlan, MemoryIsEstimateMemorysWithTheKvCacheInBf16) {
  PlanOptions o = Inference({"rtx-4090", "h100-sxm"});
  o.formats = {"fp32", "nf4"};
  o.sizing.seq = 8192;
  o.sizing.batch = 2;
  const ModelConfig model = *FindModel("llama-3.1-8b");
  absl::StatusOr<Plan> plan = MakePlan(model, o);
  ASSERT_TRUE(plan.ok()) << plan.status();
  for (const PlanCandidate& c : plan->candidates) {
    ASSERT_EQ(c.fits.size(), 2u);
    for (const PlanFit& f : c.fits) {
      SizingOptions s = o.sizing;
      s.weights = c.format;
      s.kv = "bf16";
      const SizingReport r = *EstimateMemory(model, s, f.device);
      EXPECT_EQ(f.report.per_device.total(), r.per_device.total()) << c.format;
      EXPECT_EQ(f.report.per_device.kv_cache, r.per_device.kv_cache) << c.format;
      EXPECT_EQ(f.report.whole.total(), r.whole.total()) << c.format;
      EXPECT_EQ(f.report.devices_needed, r.devices_needed) << c.format;
      EXPECT_EQ(f.report.max_seq, r.max_seq) << c.format;
      EXPECT_EQ(f.report.max_batch, r.max_batch) << c.format;
      EXPECT_EQ(f.report.decode_tokens_per_s, r.decode_tokens_per_s) << c.format;
      EXPECT_EQ(c.weight_bytes, r.whole.weights) << c.format;
      EXPECT_TRUE(f.possible);
    }
  }
  // fp32 on a float32 checkpoint is exact.
  EXPECT_EQ(plan->candidates[0].relative_rmse(), 0);
  EXPECT_TRUE(std::isinf(plan->candidates[0].sqnr_db()));
  EXPECT_NEAR(plan->candidates[0].saving_vs_bf16, -1.0, 0.01);  // twice bf16's bytes
}

// The KV study's pairs: the KV cache of Llama 3.1 8B worked out by hand,
// and each device's longest context and most sequences the largest that
// fit (one more does not).
TEST(MakePlan, KvStudyPairsAreTheMemoryModelsByHand) {
  PlanOptions o = Inference({"rtx-4090", "h100-sxm"});
  o.formats = {"bf16", "q4_0"};
  o.kv_formats = {"bf16", "q8_0", "q4_0:rotate=hadamard"};
  o.sizing.seq = 32768;
  o.sizing.batch = 2;
  const ModelConfig model = *FindModel("llama-3.1-8b");
  absl::StatusOr<Plan> plan = MakePlan(model, o);
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_TRUE(plan->kv_study.has_value());
  const PlanKvStudy& k = *plan->kv_study;
  // Keys and values of 32 layers x 8 heads x 128 per token: bf16 2 bytes, q8_0
  // 34 bytes per 32, q4_0 18 per 32 (the rotation stores nothing more).
  const int64_t values = int64_t{2} * 32 * 8 * 128 * 32768 * 2;
  const std::vector<int64_t> expected = {values * 2, values / 32 * 34, values / 32 * 18};
  ASSERT_EQ(k.formats.size(), 3u);
  for (size_t f = 0; f < 3; ++f) EXPECT_EQ(k.formats[f].kv_cache_bytes, expected[f]) << f;
  ASSERT_EQ(k.pairs.size(), 6u);
  for (size_t p = 0; p < k.pairs.size(); ++p) {
    const PlanCandidate& c = k.pairs[p];
    SCOPED_TRACE(c.format + " " + c.kv);
    EXPECT_EQ(c.format, o.formats[p / 3]);
    EXPECT_EQ(c.kv, o.kv_formats[p % 3]);
    EXPECT_EQ(c.kv_cache_bytes, expected[p % 3]);
    EXPECT_EQ(c.weight_bytes, plan->candidates[p / 3].weight_bytes);
    EXPECT_FALSE(c.pareto);  // nothing measured yet
    for (const PlanFit& f : c.fits) {
      SizingOptions s = o.sizing;
      s.weights = c.format;
      s.kv = c.kv;
      const SizingReport r = *EstimateMemory(model, s, f.device);
      EXPECT_EQ(f.report.per_device.total(), r.per_device.total());
      EXPECT_EQ(f.report.per_device.kv_cache, expected[p % 3]);
      ASSERT_GT(f.report.max_seq, 0);
      ASSERT_GT(f.report.max_batch, 0);
      // The longest context at batch 2 fits; one token more does not (or
      // the model's 131,072 positions stop it).
      SizingOptions at = s;
      at.seq = f.report.max_seq;
      EXPECT_TRUE(EstimateMemory(model, at, f.device)->fits);
      at.seq = f.report.max_seq + 1;
      EXPECT_TRUE(f.report.max_seq == 131072 || !EstimateMemory(model, at, f.device)->fits);
      // The most sequences of 32,768 tokens fit; one more does not.
      at = s;
      at.batch = f.report.max_batch;
      EXPECT_TRUE(EstimateMemory(model, at, f.device)->fits);
      at.batch = f.report.max_batch + 1;
      EXPECT_FALSE(EstimateMemory(model, at, f.device)->fits);
    }
  }
  // A smaller cache leaves room for more: q4_0's on a 4090 with bf16 weights.
  EXPECT_GT(k.pairs[2].fits[0].report.max_batch, k.pairs[0].fits[0].report.max_batch);
  // The formats' own rows keep the bf16 cache.
  for (const PlanCandidate& c : plan->candidates) EXPECT_EQ(c.kv, "bf16");
  o.sizing.mode = Mode::kPretrain;
  o.formats = {"bf16"};
  EXPECT_THAT(std::string(MakePlan(model, o).status().message()), HasSubstr("kv: a KV cache study"));
  o.sizing.mode = Mode::kInference;
  o.kv_formats = {"q8_0", "q8_0"};
  EXPECT_THAT(std::string(MakePlan(model, o).status().message()), HasSubstr("q8_0 given twice"));
  o.kv_formats = {"q8_0", "bogus"};
  EXPECT_THAT(std::string(MakePlan(model, o).status().message()), HasSubstr("kv"));
}

TEST(MakePlan, TheModelsOwnTensorsAreNoProxy) {
  absl::StatusOr<Plan> plan = MakePlan(Stories(), Inference());
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_FALSE(plan->source.proxy) << plan->source.proxy_reason;
  EXPECT_EQ(plan->candidates.size(), DefaultPlanFormats(Mode::kInference).size());
}

TEST(MakePlan, AFormatThatFitsOnNoNumberOfDevicesIsSaidSo) {
  // On a 4 GB device with 2 GB of buffers, bf16 (3.2 GB of weights) fits on
  // no number of devices; int4 (0.8 GB) fits on one.
  const ModelConfig m = Wide();
  PlanOptions o = Inference({"small:4GB", "tiny:1GB"});
  o.formats = {"bf16", "int4-g128"};
  o.sizing.seq = 256;
  absl::StatusOr<Plan> plan = MakePlan(m, o);
  ASSERT_TRUE(plan.ok()) << plan.status();
  const PlanFit& bf16 = plan->candidates[0].fits[0];
  EXPECT_FALSE(bf16.possible);
  EXPECT_FALSE(bf16.report.fits);
  EXPECT_THAT(bf16.reason, HasSubstr("cannot fit on any number of small"));
  EXPECT_EQ(bf16.smallest_share_tp, 1);
  EXPECT_EQ(bf16.smallest_share_pp, 1);
  EXPECT_GT(bf16.smallest_share_bytes, 4'000'000'000);
  const PlanFit& int4 = plan->candidates[1].fits[0];
  EXPECT_TRUE(int4.possible);
  EXPECT_TRUE(int4.report.fits);
  EXPECT_EQ(int4.report.devices_needed, 1);
  // The 1 GB device: its 2 GB of buffers leave nothing, for every format.
  for (const PlanCandidate& c : plan->candidates) {
    EXPECT_FALSE(c.fits[1].possible);
    EXPECT_THAT(c.fits[1].reason, HasSubstr("leave nothing"));
    EXPECT_EQ(c.fits[1].report.capacity_bytes, 0);
    EXPECT_GT(c.weight_bytes, 0);
  }
  // Even with that device alone the plan is made (bytes and error).
  o.devices = {Dev("tiny:1GB")};
  plan = MakePlan(m, o);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_GT(plan->candidates[0].weight_bytes, plan->candidates[1].weight_bytes);
}

// A .npy file of float32 values with the given shape, in the test's temp dir.
std::string WriteNpy(const std::string& name, const std::vector<int64_t>& shape,
                     const std::vector<float>& values) {
  std::string dims;
  for (int64_t d : shape) dims += std::to_string(d) + ",";
  std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': (" + dims + "), }";
  while ((10 + header.size() + 1) % 64 != 0) header += ' ';
  header += '\n';
  const std::string path = ::testing::TempDir() + "/" + name;
  std::ofstream out(path, std::ios::binary);
  out.write("\x93NUMPY\x01\x00", 8);
  const uint16_t length = static_cast<uint16_t>(header.size());
  out.write(reinterpret_cast<const char*>(&length), 2);
  out << header;
  out.write(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(float));
  return path;
}

TEST(MakePlan, AFormatThatOverflowsHasInfiniteErrorAndIsNeverOptimal) {
  // Weights of magnitude around 1e5: fp16 (max 65504) turns those above its
  // range into inf; bf16 holds them.
  std::vector<float> values;
  for (int i = 0; i < 64 * 64; ++i) values.push_back((i % 2 ? 1 : -1) * (5e4f + 20.0f * i));
  PlanOptions o = Inference();
  o.tensor_files = {WriteNpy("large.weight.npy", {64, 64}, values)};
  o.formats = {"fp16", "bf16", "int8-channel"};
  absl::StatusOr<Plan> plan = MakePlan(Stories(), o);
  ASSERT_TRUE(plan.ok()) << plan.status();
  const PlanCandidate& fp16 = plan->candidates[0];
  EXPECT_GT(fp16.error.stats.nonfinite_outputs, 0u);
  EXPECT_GT(fp16.overflow_fraction(), 0.5);
  EXPECT_TRUE(std::isinf(fp16.relative_rmse()) && fp16.relative_rmse() > 0);
  EXPECT_TRUE(std::isinf(fp16.sqnr_db()) && fp16.sqnr_db() < 0);
  EXPECT_EQ(fp16.error.sqnr_db(), fp16.sqnr_db());  // quant-error's: one rule
  EXPECT_FALSE(fp16.pareto);
  EXPECT_TRUE(std::isfinite(plan->candidates[1].relative_rmse()));
  EXPECT_TRUE(plan->candidates[2].pareto);  // the smallest finite one

  // Nothing measurable (every weight NaN): no error, nobody optimal.
  o.tensor_files = {WriteNpy("nan.weight.npy", {64, 64}, std::vector<float>(64 * 64, NAN))};
  plan = MakePlan(Stories(), o);
  ASSERT_TRUE(plan.ok()) << plan.status();
  for (const PlanCandidate& c : plan->candidates) {
    EXPECT_TRUE(std::isnan(c.relative_rmse())) << c.format;
    EXPECT_TRUE(std::isnan(c.sqnr_db())) << c.format;
    EXPECT_FALSE(c.pareto) << c.format;
    EXPECT_EQ(c.error.stats.nan_inputs, 64u * 64u);
  }
}

TEST(MakePlan, ProxyUnlessEveryTensorHasTheShapeOfALinearLayer) {
  PlanOptions o = Inference();
  // A vector is no linear layer, even with a linear layer's name.
  o.tensor_files = {WriteNpy("vec.weight.npy", {64}, std::vector<float>(64, 0.5f))};
  o.select = "*";
  absl::StatusOr<Plan> plan = MakePlan(Stories(), o);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_TRUE(plan->source.proxy);
  EXPECT_THAT(plan->source.proxy_reason, HasSubstr("vec.weight [64]"));
  // The embeddings of the model's own checkpoint are not its linear layers.
  o.tensor_files = {kStories};
  o.select = "*embed*,*q_proj*";
  plan = MakePlan(Stories(), o);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_TRUE(plan->source.proxy);
  EXPECT_THAT(plan->source.proxy_reason, HasSubstr("model.embed_tokens.weight [512, 64]"));
  // Stacked experts [experts, out, in] of a mixture of experts are selected
  // by default and are its linear layers; transposed [in, out] too.
  ModelConfig moe = Stories();
  moe.model_type = "mixtral";
  moe.num_experts = 4;
  moe.experts_per_token = 2;
  std::vector<float> values(4 * 172 * 64);
  for (size_t i = 0; i < values.size(); ++i) values[i] = 0.01f * static_cast<float>(i % 97) - 0.5f;
  o.tensor_files = {WriteNpy("experts.down_proj.weight.npy", {4, 64, 172}, values),
                    WriteNpy("up_proj_t.weight.npy", {64, 172}, std::vector<float>(64 * 172, 1))};
  o.select.clear();
  plan = MakePlan(moe, o);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->source.tensors.size(), 2u);
  EXPECT_FALSE(plan->source.proxy) << plan->source.proxy_reason;
  plan = MakePlan(Stories(), o);  // the dense model has no [4, 64, 172]
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_TRUE(plan->source.proxy);
}

TEST(MakePlan, FullTrainingTakesFloatingCastsOnly) {
  PlanOptions o = Inference();
  o.sizing.mode = Mode::kPretrain;
  absl::StatusOr<Plan> plan = MakePlan(*FindModel("llama-3.1-8b"), o);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->options.formats, DefaultPlanFormats(Mode::kPretrain));
  o.sizing.mode = Mode::kFinetune;
  o.formats = {"bf16", "int4-g128"};
  plan = MakePlan(*FindModel("llama-3.1-8b"), o);
  EXPECT_THAT(plan.status().message(), HasSubstr("formats int4-g128: "));
  EXPECT_THAT(plan.status().message(), HasSubstr("floating casts"));
}

TEST(MakePlan, ZeroShardsStatesSoMoreRanksCanHelp) {
  // One wide layer in pretraining on 16 GB devices: at dp 2 under ZeRO 3 it
  // does not fit, but more data-parallel ranks shard the states further.
  const ModelConfig m = Wide();
  PlanOptions o = Inference({"s:16GB"});
  o.sizing.mode = Mode::kPretrain;
  o.sizing.seq = 256;
  o.sizing.zero = 3;
  o.sizing.dp = 2;
  o.formats = {"bf16"};
  absl::StatusOr<Plan> plan = MakePlan(m, o);
  ASSERT_TRUE(plan.ok()) << plan.status();
  const PlanFit& f = plan->candidates[0].fits[0];
  EXPECT_FALSE(f.report.fits);
  EXPECT_TRUE(f.possible) << f.reason;
  EXPECT_GT(f.smallest_share_dp, 2);
  // Without ZeRO the states are whole on every rank: no number helps.
  o.sizing.zero = 0;
  plan = MakePlan(m, o);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_FALSE(plan->candidates[0].fits[0].possible);
}

TEST(MakePlan, BadOptionsNameTheOption) {
  const ModelConfig model = *FindModel("llama-3.1-8b");
  PlanOptions o = Inference();
  o.formats = {"bf16", "nosuch"};
  absl::StatusOr<Plan> plan = MakePlan(model, o);
  EXPECT_THAT(plan.status().message(), HasSubstr("formats nosuch: "));

  o = Inference();
  o.devices.clear();
  EXPECT_THAT(MakePlan(model, o).status().message(), HasSubstr("device: "));

  o = Inference();
  o.sizing.tp = 3;
  EXPECT_THAT(MakePlan(model, o).status().message(), HasSubstr("tp: "));

  o = Inference();
  o.sizing.pp = 33;
  EXPECT_THAT(MakePlan(model, o).status().message(), HasSubstr("pp: "));

  o = Inference();
  o.select = "nothing.matches*";
  EXPECT_THAT(MakePlan(model, o).status().message(), HasSubstr("nothing.matches*"));

  o = Inference();
  o.tensor_files = {"/nonexistent/x.safetensors"};
  EXPECT_THAT(MakePlan(model, o).status().message(), HasSubstr("/nonexistent/x.safetensors"));
}

TEST(BundledCheckpoint, FoundInTheSourceTreeOrWhereLowpDataDirSays) {
  ASSERT_EQ(unsetenv("LOWP_DATA_DIR"), 0);
  absl::StatusOr<std::string> path = BundledCheckpoint();
  ASSERT_TRUE(path.ok()) << path.status();
  EXPECT_THAT(*path, HasSubstr("stories260K.f32.safetensors"));

  ASSERT_EQ(setenv("LOWP_DATA_DIR", "/nonexistent-lowp-data", 1), 0);
  path = BundledCheckpoint();
  EXPECT_EQ(path.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(path.status().message(), HasSubstr("/nonexistent-lowp-data"));
  ASSERT_EQ(unsetenv("LOWP_DATA_DIR"), 0);
}

}  // namespace
}  // namespace lowp
