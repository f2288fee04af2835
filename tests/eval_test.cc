// The evaluator: the forward pass's known answers and invariants, the
// metrics on a model small enough to compute by hand, and the bad inputs.
// The forward pass itself is compared with an independent PyTorch
// implementation in python/tests/test_forward_torch.py.
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "api/eval.h"
#include "eval/evaluate.h"
#include "eval/metrics.h"
#include "eval/sample.h"
#include "formats/option_error.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "io/tensor_set.h"
#include "model/forward.h"
#include "model/checkpoint.h"
#include "model/weights.h"
#include "tests/bundled_model.h"

namespace lowp {
namespace {

using ::testing::HasSubstr;

Checkpoint Bundled() { return testing::BundledCheckpoint(); }

std::vector<int32_t> SampledTokens(const Checkpoint& w, int64_t count, int64_t length) {
  return testing::SampledTokens(w, count, length, 7);
}

EvalCandidate WeightsCandidate(const std::string& scheme, const std::string& pattern = "") {
  EvalCandidate c;
  c.label = scheme;
  c.weights = pattern.empty() ? scheme : pattern + "=" + scheme;
  absl::StatusOr<std::unique_ptr<Scheme>> s = ParseScheme(scheme);
  EXPECT_TRUE(s.ok()) << s.status();
  c.weight_rules.push_back({pattern, std::shared_ptr<const Scheme>(*std::move(s)), {}});
  return c;
}

EvalRun Threads(int threads) {
  EvalRun run;
  run.threads = threads;
  return run;
}

TEST(Eval, ModelAgainstItselfIsExactlyZeroAndFp32WeightsAreBitIdentical) {
  const Checkpoint w = Bundled();
  const std::vector<int32_t> tokens = SampledTokens(w, 4, 48);
  EvalCandidate self;
  self.label = "fp32";
  // fp32 on every matrix, lm_head and the embedding included: the cast keeps
  // every weight's bits, so the hidden states and logits are the same bits.
  absl::StatusOr<EvalReport> r =
      Evaluate(w, tokens, 48, {self, WeightsCandidate("fp32"), WeightsCandidate("fp32", "*")},
               Threads(2));
  ASSERT_TRUE(r.ok()) << r.status();
  for (const CandidateResult& c : r->candidates) {
    EXPECT_EQ(c.kl.mean, 0.0) << c.candidate.label;
    EXPECT_EQ(c.kl.max, 0.0) << c.candidate.label;
    EXPECT_EQ(c.top1_agreement, 1.0) << c.candidate.label;
    EXPECT_EQ(c.perplexity, r->reference_perplexity) << c.candidate.label;
    EXPECT_EQ(c.delta_p.max, 0.0) << c.candidate.label;
    EXPECT_EQ(c.delta_p.min, 0.0) << c.candidate.label;
    for (double e : c.layer_relative_rmse) EXPECT_EQ(e, 0.0);
  }
  EXPECT_EQ(r->candidates[2].weights.tensors.size(), 37u);  // embedding, 35, lm_head
}

TEST(Eval, MeanKlOrdersFormatsOnTheBundledModel) {
  const Checkpoint w = Bundled();
  const std::vector<int32_t> tokens = SampledTokens(w, 8, 64);
  absl::StatusOr<EvalReport> r = Evaluate(w, tokens, 64,
                                          {WeightsCandidate("fp16"), WeightsCandidate("bf16"),
                                           WeightsCandidate("fp8_e4m3fn-channel"),
                                           WeightsCandidate("int4-g128")},
                                          Threads(0));
  ASSERT_TRUE(r.ok()) << r.status();
  const auto& c = r->candidates;
  EXPECT_LT(c[0].kl.mean, c[1].kl.mean);
  EXPECT_LT(c[1].kl.mean, c[2].kl.mean);
  EXPECT_LT(c[2].kl.mean, c[3].kl.mean);
  EXPECT_GT(c[0].kl.mean, 0.0);
  // Error accumulates: the last layer's hidden state is further off than the first's.
  EXPECT_GT(c[3].layer_relative_rmse.back(), c[3].layer_relative_rmse.front());
  EXPECT_EQ(c[3].weights.tensors.size(), 35u);  // 5 layers x 7 linear layers
}

TEST(Eval, ResultsDoNotDependOnTheThreadCount) {
  const Checkpoint w = Bundled();
  const std::vector<int32_t> tokens = SampledTokens(w, 5, 40);
  EvalCandidate emulated = WeightsCandidate("int4-g128");
  absl::StatusOr<std::unique_ptr<Scheme>> kv = ParseScheme("fp8_e4m3fn");
  emulated.emulation.kv = std::shared_ptr<const Scheme>(*std::move(kv));
  emulated.emulation.compute = *FindFormat("bf16");
  std::vector<EvalReport> reports;
  for (int threads : {1, 2, 3}) {
    absl::StatusOr<EvalReport> r = Evaluate(w, tokens, 40, {emulated}, Threads(threads));
    ASSERT_TRUE(r.ok()) << r.status();
    reports.push_back(*r);
  }
  for (const EvalReport& r : reports) {
    const CandidateResult& a = reports[0].candidates[0];
    const CandidateResult& b = r.candidates[0];
    EXPECT_EQ(a.kl.mean, b.kl.mean);
    EXPECT_EQ(a.kl.p99, b.kl.p99);
    EXPECT_EQ(a.top1_agreement, b.top1_agreement);
    EXPECT_EQ(a.perplexity, b.perplexity);
    EXPECT_EQ(a.delta_p.rms, b.delta_p.rms);
    EXPECT_EQ(a.layer_relative_rmse, b.layer_relative_rmse);
    EXPECT_EQ(r.reference_perplexity, reports[0].reference_perplexity);
  }
  SampleOptions o;
  o.count = 3;
  o.length = 30;
  o.threads = 1;
  const std::vector<int32_t> one = *SampleTokens(w, o);
  o.threads = 3;
  EXPECT_EQ(one, *SampleTokens(w, o));
}

// A 1-layer model whose attention and MLP weights are all zero: the hidden
// state stays the token's embedding, so the logits are lm_head times the
// RMS-normalized embedding, by hand.
class HandModel {
 public:
  HandModel(std::vector<float> lm_head) : lm_head_(std::move(lm_head)) {
    config_.name = "hand";
    config_.model_type = "llama";
    config_.hidden_size = 2;
    config_.intermediate_size = 1;
    config_.num_layers = 1;
    config_.num_heads = 1;
    config_.num_kv_heads = 1;
    config_.head_dim = 2;
    config_.vocab_size = 2;
    config_.rms_norm_eps = 0;
    Add("model.embed_tokens.weight", {2, 2}, {1, 0, 0, 1});
    const std::string p = "model.layers.0.";
    Add(p + "input_layernorm.weight", {2}, {1, 1});
    Add(p + "post_attention_layernorm.weight", {2}, {1, 1});
    for (const char* m : {"q", "k", "v", "o"}) {
      Add(absl::StrCat(p, "self_attn.", m, "_proj.weight"), {2, 2}, {0, 0, 0, 0});
    }
    Add(p + "mlp.gate_proj.weight", {1, 2}, {0, 0});
    Add(p + "mlp.up_proj.weight", {1, 2}, {0, 0});
    Add(p + "mlp.down_proj.weight", {2, 1}, {0, 0});
    Add("model.norm.weight", {2}, {1, 1});
    Add("lm_head.weight", {2, 2}, lm_head_);
  }

  absl::StatusOr<Checkpoint> Load() {
    std::vector<TensorView> views;
    for (size_t i = 0; i < names_.size(); ++i) {
      TensorView v;
      v.name = names_[i];
      v.dtype = DType::kF32;
      v.shape = shapes_[i];
      v.bytes = {reinterpret_cast<const uint8_t*>(data_[i].data()), data_[i].size() * 4};
      v.file = "hand";
      views.push_back(v);
    }
    absl::StatusOr<TensorSet> set = TensorSet::FromViews(views);
    if (!set.ok()) return set.status();
    return Checkpoint::Open(config_, *std::move(set));
  }

  ModelConfig config_;

 private:
  void Add(const std::string& name, std::vector<int64_t> shape, std::vector<float> data) {
    names_.push_back(name);
    shapes_.push_back(std::move(shape));
    data_.push_back(std::move(data));
  }
  std::vector<float> lm_head_;
  std::vector<std::string> names_;
  std::vector<std::vector<int64_t>> shapes_;
  std::vector<std::vector<float>> data_;
};

// log softmax of two logits, by hand.
double LogP(double chosen, double other) { return -std::log1p(std::exp(other - chosen)); }

TEST(Eval, OneLayerModelGivesTheHandComputedAnswers) {
  // Token 0's normalized embedding is [sqrt 2, 0], token 1's [0, sqrt 2]; the
  // logits are lm_head's columns times sqrt 2.
  HandModel hand({1.0f, 0.0f, 0.0f, 0.3f});
  absl::StatusOr<Checkpoint> w = hand.Load();
  ASSERT_TRUE(w.ok()) << w.status();
  const std::vector<int32_t> tokens = {0, 1, 1, 0};
  const double r2 = std::sqrt(2.0);
  // Reference logits: after token 0: [r2, 0]; after token 1: [0, 0.3 r2].
  // fp8_e4m3fn rounds 0.3 to 0.3125 (1.25 x 2^-2), and leaves 1 and 0.
  const double a = 0.3 * r2, b = 0.3125 * r2;
  absl::StatusOr<EvalReport> r =
      Evaluate(*w, tokens, 4, {WeightsCandidate("fp8_e4m3fn", "lm_head.weight")}, Threads(1));
  ASSERT_TRUE(r.ok()) << r.status();
  // Cross-entropy of the predictions 0->1, 1->1, 1->0.
  const double ref_ce = -(LogP(0, r2) + LogP(a, 0) + LogP(0, a)) / 3;
  const double q_ce = -(LogP(0, r2) + LogP(b, 0) + LogP(0, b)) / 3;
  EXPECT_NEAR(r->reference_perplexity, std::exp(ref_ce), 1e-6);
  const CandidateResult& c = r->candidates[0];
  EXPECT_NEAR(c.perplexity, std::exp(q_ce), 1e-6);
  // KL at token 1's positions (two of four): p = softmax([0, a]), q = softmax([0, b]).
  const double p1 = std::exp(LogP(a, 0)), p0 = 1 - p1;
  const double kl = p1 * (LogP(a, 0) - LogP(b, 0)) + p0 * (LogP(0, a) - LogP(0, b));
  EXPECT_NEAR(c.kl.mean, kl / 2, 1e-9);
  EXPECT_NEAR(c.kl.max, kl, 1e-9);
  EXPECT_NEAR(c.kl.median, kl / 2, 1e-9);  // halfway between 0 and kl (NumPy's rule)
  EXPECT_EQ(c.top1_agreement, 1.0);
}

TEST(Eval, TopOneDisagreementIsCounted) {
  // lm_head row 1 = [0, 0.0005]: after token 1 the reference prefers token 1
  // (logits [0, 0.0005 sqrt 2]); with that weight rounded to zero the logits
  // tie at [0, 0] and the argmax is the lowest id, 0.
  HandModel hand({1.0f, 0.0f, 0.0f, 0.0005f});
  absl::StatusOr<Checkpoint> w = hand.Load();
  ASSERT_TRUE(w.ok()) << w.status();
  const std::vector<int32_t> tokens = {0, 1, 1, 0};
  // fp8_e4m3fn: 0.0005 is below 2^-10, half its smallest subnormal 2^-9: zero.
  absl::StatusOr<EvalReport> r =
      Evaluate(*w, tokens, 4, {WeightsCandidate("fp8_e4m3fn", "lm_head.weight")}, Threads(1));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->candidates[0].top1_agreement, 0.5);  // tokens 1's two positions disagree
}

TEST(Eval, NonFiniteLogitsMakeKlInfiniteAndAreCounted) {
  // fp16 compute overflows lm_head's 1e5 x sqrt 2 logit to inf.
  HandModel hand({1e5f, 0.0f, 0.0f, 1.0f});
  absl::StatusOr<Checkpoint> w = hand.Load();
  ASSERT_TRUE(w.ok()) << w.status();
  EvalCandidate c;
  c.label = "compute=fp16";
  c.compute = "fp16";
  c.emulation.compute = *FindFormat("fp16");
  absl::StatusOr<EvalReport> r =
      Evaluate(*w, std::vector<int32_t>{0, 1, 1, 0}, 4, {c}, Threads(1));
  ASSERT_TRUE(r.ok()) << r.status();
  const CandidateResult& x = r->candidates[0];
  EXPECT_TRUE(std::isinf(x.kl.max));
  EXPECT_TRUE(std::isinf(x.kl.mean));
  EXPECT_EQ(x.nonfinite_positions, 2u);  // the positions of token 0
  EXPECT_EQ(x.census.sites[static_cast<int>(Site::kLogits)].overflow, 2u);
  EXPECT_EQ(x.census.sites[static_cast<int>(Site::kLogits)].nonfinite, 2u);
}

TEST(Eval, BadInputsNameWhatIsWrong) {
  HandModel hand({1, 0, 0, 1});
  // A k_proj shape contradicting num_key_value_heads.
  hand.config_.num_heads = 2;
  hand.config_.head_dim = 1;
  hand.config_.num_kv_heads = 1;
  absl::StatusOr<Checkpoint> w = hand.Load();
  ASSERT_FALSE(w.ok());
  EXPECT_THAT(w.status().message(), HasSubstr("model.layers.0.self_attn.k_proj.weight"));
  EXPECT_THAT(w.status().message(), HasSubstr("num_key_value_heads * head_dim = 1 * 1"));

  HandModel untied({1, 0, 0, 1});
  untied.config_.qk_norm = true;
  w = untied.Load();
  ASSERT_FALSE(w.ok());
  EXPECT_THAT(w.status().message(), HasSubstr("q_norm.weight"));

  HandModel gpt({1, 0, 0, 1});
  gpt.config_.model_type = "gpt";
  w = gpt.Load();
  ASSERT_FALSE(w.ok());
  EXPECT_THAT(w.status().message(),
              HasSubstr("supported: llama, mistral, qwen2, qwen3, gemma, gemma2, gemma3_text, "
                         "mixtral, qwen2_moe, qwen3_moe, gpt_oss, phi3, deepseek_v3"));

  HandModel dynamic({1, 0, 0, 1});
  dynamic.config_.rope_scaling.type = "dynamic";
  w = dynamic.Load();
  ASSERT_FALSE(w.ok());
  EXPECT_THAT(w.status().message(), HasSubstr("rope_scaling type \"dynamic\""));

  HandModel good({1, 0, 0, 1});
  w = good.Load();
  ASSERT_TRUE(w.ok());
  absl::StatusOr<EvalReport> r =
      Evaluate(*w, std::vector<int32_t>{0, 1, 0, 2}, 2, {}, Threads(1));
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("token 2 at sequence 1, position 1"));
}

TEST(EvalApi, OptionsAreCheckedByName) {
  api::EvalOptions o;
  o.weights = "int4-g128,bogus";
  absl::StatusOr<api::EvalResult> r = api::Eval(o);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(OptionOf(r.status()), "weights");
  o = {};
  o.sample = "8";
  r = api::Eval(o);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(OptionOf(r.status()), "sample");
  o = {};
  o.compute = "int8";
  r = api::Eval(o);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(OptionOf(r.status()), "compute");
  o = {};
  o.model = "llama-3.1-8b";
  r = api::Eval(o);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(OptionOf(r.status()), "tensors");
}

TEST(EvalApi, CandidatesAreEveryCombinationAndGlobRunsAreOne) {
  api::EvalOptions o;
  o.weights = "*.mlp.down_proj.weight=q8_0,*=int4-g128,fp16";
  o.kv = "none,fp8_e4m3fn";
  absl::StatusOr<std::vector<EvalCandidate>> c = api::EvalCandidates(o);
  ASSERT_TRUE(c.ok()) << c.status();
  ASSERT_EQ(c->size(), 4u);
  EXPECT_EQ((*c)[0].label, "*.mlp.down_proj.weight=q8_0,*=int4-g128");
  EXPECT_EQ((*c)[0].weight_rules.size(), 2u);
  EXPECT_EQ((*c)[1].label, "w=*.mlp.down_proj.weight=q8_0,*=int4-g128 kv=fp8_e4m3fn");
  EXPECT_EQ((*c)[2].label, "fp16");
  EXPECT_EQ((*c)[3].label, "w=fp16 kv=fp8_e4m3fn");
  // The rules apply in order: down_proj takes q8_0, the rest int4-g128
  // (the embedding and lm_head included, since '*' names them).
  const Checkpoint w = Bundled();
  absl::StatusOr<EvalReport> r = Evaluate(w, SampledTokens(w, 1, 8), 8, {(*c)[0]}, Threads(1));
  ASSERT_TRUE(r.ok()) << r.status();
  const WeightReport& report = r->candidates[0].weights;
  ASSERT_EQ(report.tensors.size(), 37u);
  int q8 = 0;
  for (const QuantReport& t : report.tensors) {
    q8 += t.scheme == "q8_0";
    EXPECT_EQ(t.scheme == "q8_0", t.tensor.find("down_proj") != std::string::npos) << t.tensor;
  }
  EXPECT_EQ(q8, 5);
}

TEST(Eval, KvRotationKeepsScoresAndFollowsLlamaCppsCondition) {
  // The bundled model's heads have 8 values: llama.cpp rotates only heads of
  // a multiple of 64, so its rule leaves this model's cache alone (KL
  // exactly 0); blocks of 8 forced rotate q, k and v and back, which changes
  // the products only by float32 rounding without a cache scheme, and
  // changes what a quantized cache stores with one.
  const Checkpoint w = Bundled();
  const std::vector<int32_t> tokens = SampledTokens(w, 2, 32);
  auto kv = [](const std::string& label, const std::string& scheme, KvRotation rotation) {
    EvalCandidate c;
    c.label = label;
    if (!scheme.empty()) c.emulation.kv = std::shared_ptr<const Scheme>(*ParseScheme(scheme));
    c.emulation.kv_rotation = rotation;
    return c;
  };
  const KvRotation llama{KvRotation::kLlamaCpp, 0}, blocks{KvRotation::kBlocks, 8};
  absl::StatusOr<EvalReport> r =
      Evaluate(w, tokens, 32,
               {kv("llama", "", llama), kv("blocks", "", blocks), kv("int4", "int4-g8", {}),
                kv("int4 rotated", "int4-g8", blocks), kv("int4 llama", "int4-g8", llama)},
               Threads(2));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->candidates[0].kl.max, 0.0);
  EXPECT_GT(r->candidates[1].kl.max, 0.0);  // float32 rounding of the rotation
  EXPECT_LT(r->candidates[1].kl.max, 1e-9);
  EXPECT_EQ(r->candidates[1].top1_agreement, 1.0);
  EXPECT_GT(r->candidates[2].kl.mean, 1e-6);
  EXPECT_NE(r->candidates[3].kl.mean, r->candidates[2].kl.mean);
  EXPECT_EQ(r->candidates[4].kl.mean, r->candidates[2].kl.mean);
  // Blocks that do not divide the head are refused, naming the head size.
  absl::StatusOr<EvalReport> bad =
      Evaluate(w, tokens, 32, {kv("16", "", {KvRotation::kBlocks, 16})}, Threads(1));
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr("head size 8"));
}

TEST(EvalApi, KvRotationIsAnOptionOfTheKvScheme) {
  api::EvalOptions o;
  o.weights = "fp16";
  // rotate may stand anywhere among the options; the others go to the scheme.
  o.kv = "q8_0:rotate,int8-channel:rotate=4,fp8_e4m3fn-channel:rotate=64:scale=bf16";
  absl::StatusOr<std::vector<EvalCandidate>> c = api::EvalCandidates(o);
  ASSERT_TRUE(c.ok()) << c.status();
  ASSERT_EQ(c->size(), 3u);
  EXPECT_EQ((*c)[0].label, "w=fp16 kv=q8_0:rotate");
  EXPECT_EQ((*c)[0].emulation.kv->name(), "q8_0");
  EXPECT_EQ((*c)[0].emulation.kv_rotation.mode, KvRotation::kLlamaCpp);
  EXPECT_EQ((*c)[1].emulation.kv_rotation.mode, KvRotation::kBlocks);
  EXPECT_EQ((*c)[1].emulation.kv_rotation.block, 4);
  EXPECT_EQ((*c)[2].emulation.kv->name(), "fp8_e4m3fn-channel:scale=bf16");
  for (const char* bad : {"q8_0:rotate=3", "q8_0:rotate=x", "q8_0:rotate:rotate", "q8_0:rotate="}) {
    o.kv = bad;
    absl::StatusOr<std::vector<EvalCandidate>> r = api::EvalCandidates(o);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_THAT(std::string(r.status().message()), HasSubstr("kv")) << bad;
  }
}

TEST(EvalApi, SchemeRotationOnWeightsActivationsAndKv) {
  // rotate=hadamard[N] is the schemes' own option, on every site; on the
  // cache it is left to the scheme (no KvRotation), and rotating each stored
  // head vector and back gives the products of KvRotation's blocks: the same
  // rotated values are quantized, only the float32 rounding of the way back
  // differs.
  api::EvalOptions o;
  o.weights = "fp32:rotate=hadamard,int4-g32,int4-g32:rotate=hadamard";
  o.activations = "fp32:rotate=hadamard";
  o.kv = "int4-g8:rotate=hadamard8";
  absl::StatusOr<std::vector<EvalCandidate>> c = api::EvalCandidates(o);
  ASSERT_TRUE(c.ok()) << c.status();
  ASSERT_EQ(c->size(), 3u);
  EXPECT_EQ((*c)[0].emulation.kv->name(), "int4-g8:rotate=hadamard8");
  EXPECT_EQ((*c)[0].emulation.kv_rotation.mode, KvRotation::kNone);
  EXPECT_EQ((*c)[0].emulation.activations->name(), "fp32:rotate=hadamard");

  const Checkpoint w = Bundled();
  const std::vector<int32_t> tokens = SampledTokens(w, 2, 32);
  auto candidate = [](const std::string& label, const std::string& weights,
                      const std::string& activations, const std::string& kv, KvRotation rotation) {
    api::EvalOptions options;
    options.weights = weights;
    options.activations = activations;
    options.kv = kv;
    absl::StatusOr<std::vector<EvalCandidate>> one = api::EvalCandidates(options);
    EXPECT_TRUE(one.ok()) << one.status();
    EvalCandidate e = (*one)[0];
    e.label = label;
    e.emulation.kv_rotation = rotation;
    return e;
  };
  const KvRotation blocks{KvRotation::kBlocks, 8};
  absl::StatusOr<EvalReport> r = Evaluate(
      w, tokens, 32,
      {candidate("fp32 rotated", "fp32:rotate=hadamard", "fp32:rotate=hadamard", "", {}),
       candidate("kv scheme rotated", "fp32", "", "int4-g8:rotate=hadamard8", {}),
       candidate("kv blocks", "fp32", "", "int4-g8", blocks),
       candidate("kv plain", "fp32", "", "int4-g8", {}),
       candidate("w4a8", "int4-g32", "int8-channel", "", {}),
       candidate("w4a8 rotated", "int4-g32:rotate=hadamard", "int8-channel:rotate=hadamard", "",
                 {})},
      Threads(2));
  ASSERT_TRUE(r.ok()) << r.status();
  // Rotating weights and activations without quantizing changes the
  // products by float32 rounding only.
  EXPECT_LT(r->candidates[0].kl.max, 1e-9);
  EXPECT_EQ(r->candidates[0].top1_agreement, 1.0);
  const double scheme = r->candidates[1].kl.mean, forward = r->candidates[2].kl.mean,
               plain = r->candidates[3].kl.mean;
  EXPECT_NE(forward, plain);
  EXPECT_NEAR(scheme, forward, 1e-3 * forward) << scheme << " " << forward;
  EXPECT_GT(r->candidates[4].kl.mean, 0.0);
  EXPECT_NE(r->candidates[5].kl.mean, r->candidates[4].kl.mean);
}

}  // namespace
}  // namespace lowp
