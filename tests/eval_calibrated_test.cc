// GPTQ and AWQ inside the evaluator (eval/calibrator.h): ":gptq" and ":awq"
// candidates of the real stories3M-hf calibrated on the bundled calibration
// text, measured on held-out TinyStories text; sequential calibration (each
// layer and sub-layer from the inputs the quantized ones before it give);
// AWQ's folding; refusals.
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <string>

#include "api/eval.h"
#include "api/plan.h"
#include "api/quantize_model.h"
#include "formats/option_error.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "io/tensor_set.h"
#include "quant/scheme.h"
#include "tests/random_checkpoint.h"

namespace lowp {
namespace {

using ::testing::HasSubstr;

const std::string kData = LOWP_TEST_DATA_DIR;

// `chunks` of 128 held-out tokens, calibrated on `calibration` chunks of 256.
api::EvalOptions Options(const std::string& weights, int chunks = 2, int calibration = 2) {
  api::EvalOptions o;
  o.model = kData + "/stories3M-hf";
  o.text_file = kData + "/text/tinystories-valid-heldout.txt";
  o.ctx = 128;
  o.chunks = chunks;
  o.calibration.chunks = calibration;
  o.weights = weights;
  return o;
}

const QuantReport* Matrix(const CandidateResult& c, const std::string& name) {
  for (const QuantReport& r : c.weights.tensors) {
    if (r.tensor == name) return &r;
  }
  return nullptr;
}

TEST(EvalGptq, HalvesTheKlOfRoundingToNearest) {
  absl::StatusOr<api::EvalResult> r =
      api::Eval(Options("int4-g128,int4-g128:gptq,q4_K,q4_K:gptq", 6, 8));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_THAT(r->calibration, HasSubstr("tinystories-calib.txt"));
  EXPECT_EQ(r->calibration_tokens, 8u * 256u);
  const std::vector<CandidateResult>& c = r->report.candidates;
  ASSERT_EQ(c.size(), 4u);
  EXPECT_EQ(c[1].weights.total.scheme, "int4-g128:gptq");
  EXPECT_LT(c[1].kl.mean, 0.6 * c[0].kl.mean) << c[1].kl.mean << " vs " << c[0].kl.mean;
  EXPECT_LT(c[3].kl.mean, 0.7 * c[2].kl.mean) << c[3].kl.mean << " vs " << c[2].kl.mean;
  // GPTQ trades weight error for output error: its weights are further from
  // the float32 ones than rounding to nearest puts them.
  const std::string q = "model.layers.2.self_attn.q_proj.weight";
  ASSERT_NE(Matrix(c[0], q), nullptr);
  ASSERT_NE(Matrix(c[1], q), nullptr);
  EXPECT_GT(Matrix(c[1], q)->rmse(), Matrix(c[0], q)->rmse());
}

// Layer 0's q, k and v see the embedding whatever the rest is; layer 1's
// matrices see what the quantized layer 0 gives, and o_proj what the
// quantized q, k and v give: leaving those in float32 must change them.
TEST(EvalGptq, EachMatrixIsCalibratedOnTheQuantizedOnesBeforeIt) {
  // Three candidates of rules (a run of PATTERN=SCHEME items is one).
  api::EvalOptions o = Options("none");
  for (const char* spec :
       {"*.layers.*=int4-g64:gptq", "*.layers.0.mlp.*=none,*.layers.*=int4-g64:gptq",
        "*.layers.0.self_attn.q_proj.weight=none,*.layers.0.self_attn.k_proj.weight=none,"
        "*.layers.0.self_attn.v_proj.weight=none,*.layers.*=int4-g64:gptq"}) {
    absl::StatusOr<std::vector<EvalCandidate>> made = api::EvalCandidates(Options(spec));
    ASSERT_TRUE(made.ok()) << made.status();
    ASSERT_EQ(made->size(), 1u);
    o.candidates.push_back((*made)[0]);
  }
  absl::StatusOr<api::EvalResult> r = api::Eval(o);
  ASSERT_TRUE(r.ok()) << r.status();
  std::vector<CandidateResult> c = r->report.candidates;
  ASSERT_EQ(c.size(), 4u);  // float32 first
  c.erase(c.begin());
  auto rmse = [&](size_t k, const std::string& m) {
    const QuantReport* q = Matrix(c[k], "model.layers." + m + ".weight");
    return q == nullptr ? -1.0 : q->rmse();
  };
  EXPECT_EQ(rmse(0, "0.self_attn.q_proj"), rmse(1, "0.self_attn.q_proj"));
  EXPECT_EQ(rmse(0, "0.self_attn.o_proj"), rmse(1, "0.self_attn.o_proj"));
  EXPECT_NE(rmse(0, "1.self_attn.q_proj"), rmse(1, "1.self_attn.q_proj"));
  EXPECT_NE(rmse(0, "0.self_attn.o_proj"), rmse(2, "0.self_attn.o_proj"));
  EXPECT_GT(rmse(0, "1.mlp.down_proj"), 0);
}

TEST(EvalGptq, ResultsDoNotDependOnThreads) {
  api::EvalOptions one = Options("q4_K:gptq");
  one.threads = 1;
  api::EvalOptions two = Options("q4_K:gptq");
  two.threads = 2;
  absl::StatusOr<api::EvalResult> a = api::Eval(one), b = api::Eval(two);
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(a->report.candidates[0].kl.mean, b->report.candidates[0].kl.mean);
}

// stories260K's down_proj has 172 columns: llama.cpp's Q4_K_M keeps it in
// f16 (no block type divides 172), which has no codes to choose. Under
// ':gptq' it stays f16, as in the plain recipe, and the other matrices are
// calibrated around it (lowp eval with its defaults: KL 0.0111 against
// 0.0161).
TEST(EvalGptq, ARecipesFloatTensorsStayAsTheRecipeKeepsThem) {
  api::EvalOptions o = Options("Q4_K_M,Q4_K_M:gptq");
  o.model = kData + "/stories260K-hf";
  o.ctx = 64;
  absl::StatusOr<api::EvalResult> r = api::Eval(o);
  ASSERT_TRUE(r.ok()) << r.status();
  const std::vector<CandidateResult>& c = r->report.candidates;
  ASSERT_EQ(c.size(), 2u);
  const std::string down = "model.layers.0.mlp.down_proj.weight";
  const std::string up = "model.layers.0.mlp.up_proj.weight";
  for (const CandidateResult& candidate : c) {
    ASSERT_NE(Matrix(candidate, down), nullptr);
    EXPECT_EQ(Matrix(candidate, down)->applied, "f16");
  }
  EXPECT_EQ(Matrix(c[1], down)->rmse(), Matrix(c[0], down)->rmse());
  ASSERT_NE(Matrix(c[1], up), nullptr);
  EXPECT_GT(Matrix(c[1], up)->rmse(), Matrix(c[0], up)->rmse());  // calibrated
  EXPECT_LT(c[1].kl.mean, c[0].kl.mean);
}

TEST(EvalGptq, RefusesWhatItCannotCalibrate) {
  absl::StatusOr<api::EvalResult> cast = api::Eval(Options("fp8_e4m3fn:gptq"));
  ASSERT_FALSE(cast.ok());
  EXPECT_THAT(cast.status().message(), HasSubstr("does not choose its codes one element"));
  absl::StatusOr<api::EvalResult> order = api::Eval(Options("q4_K:gptq=actorder"));
  ASSERT_FALSE(order.ok());
  EXPECT_THAT(order.status().message(), HasSubstr("act_order"));
  absl::StatusOr<api::EvalResult> value = api::Eval(Options("q4_K:gptq=fast"));
  ASSERT_FALSE(value.ok());
  EXPECT_THAT(value.status().message(), HasSubstr("weights"));
  api::EvalOptions missing = Options("q4_K:gptq");
  missing.calibration.tokens_file = "/nonexistent/calib.npy";
  absl::StatusOr<api::EvalResult> none = api::Eval(missing);
  ASSERT_FALSE(none.ok());
  EXPECT_THAT(none.status().message(), HasSubstr("calib_tokens"));
  // Where no model runs, the option is refused by name.
  EXPECT_THAT(ParseScheme("int4-g128:gptq").status().message(), HasSubstr("where a model runs"));
}

// lowp plan --eval takes calibrated formats: sized as their scheme, the
// model's outputs as eval gives them, no error on the tensors alone; without
// eval they are refused by name.
TEST(PlanGptq, SizedAsItsSchemeMeasuredEndToEnd) {
  api::PlanJobOptions p;
  p.model = "llama-3.1-8b";
  p.sizing.mode = Mode::kInference;
  p.formats = {"int4-g128", "int4-g128:gptq"};
  absl::Status refused = api::PlanJob(p).status();
  EXPECT_EQ(OptionOf(refused).value_or(""), "formats");
  EXPECT_THAT(refused.message(), HasSubstr("int4-g128:gptq"));
  EXPECT_THAT(refused.message(), HasSubstr("add `eval`"));
  p.eval = true;
  p.eval_model = kData + "/stories3M-hf";
  p.eval_text = kData + "/text/tinystories-valid-heldout.txt";
  p.eval_ctx = 128;
  p.eval_chunks = 2;
  p.calibration.chunks = 2;
  absl::StatusOr<Plan> plan = api::PlanJob(p);
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_EQ(plan->candidates.size(), 2u);
  const PlanCandidate& rtn = plan->candidates[0];
  const PlanCandidate& gptq = plan->candidates[1];
  EXPECT_FALSE(rtn.calibrated);
  EXPECT_TRUE(gptq.calibrated);
  EXPECT_EQ(gptq.weight_bytes, rtn.weight_bytes);
  EXPECT_GT(rtn.error.stats.measured, 0u);
  EXPECT_EQ(gptq.error.stats.measured, 0u);
  EXPECT_TRUE(std::isnan(gptq.relative_rmse()));
  EXPECT_TRUE(std::isnan(gptq.clipped_fraction()));
  // The same numbers lowp eval gives for the same tokens and calibration.
  absl::StatusOr<api::EvalResult> e = api::Eval(Options("int4-g128,int4-g128:gptq"));
  ASSERT_TRUE(e.ok()) << e.status();
  ASSERT_TRUE(rtn.end_to_end && gptq.end_to_end);
  EXPECT_EQ(rtn.end_to_end->kl_mean, e->report.candidates[0].kl.mean);
  EXPECT_EQ(gptq.end_to_end->kl_mean, e->report.candidates[1].kl.mean);
  EXPECT_LT(gptq.end_to_end->kl_mean, rtn.end_to_end->kl_mean);
  EXPECT_TRUE(gptq.pareto);  // as small and closer to the model's outputs
  EXPECT_FALSE(rtn.pareto);
  p.calibration.chunks = 0;
  EXPECT_EQ(OptionOf(api::PlanJob(p).status()).value_or(""), "calib_chunks");
}

// lowp quantize --model writes the model eval measured: its file, read back
// as a candidate, gives the calibrated candidate's numbers bit for bit.
TEST(QuantizeModelGptq, WritesTheModelEvalMeasured) {
  const std::string dir = ::testing::TempDir() + "/quantize_model";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  api::QuantizeModelOptions q;
  q.model = kData + "/stories3M-hf";
  q.weights = "int4-g128:gptq";
  q.output = dir + "/gptq.safetensors";
  q.calibration.chunks = 2;
  absl::StatusOr<api::QuantErrorResult> written = api::QuantizeModel(q);
  ASSERT_TRUE(written.ok()) << written.status();
  ASSERT_EQ(written->aggregates.size(), 1u);
  EXPECT_EQ(written->aggregates[0].scheme, "int4-g128:gptq");
  EXPECT_EQ(written->results.size(), 28u);  // 4 layers x 7 matrices
  api::EvalOptions e = Options("int4-g128:gptq");
  e.weights_files = {q.output};
  absl::StatusOr<api::EvalResult> r = api::Eval(e);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->report.candidates.size(), 2u);
  EXPECT_EQ(r->report.candidates[1].kl.mean, r->report.candidates[0].kl.mean);
  EXPECT_EQ(r->report.candidates[1].top1_agreement, r->report.candidates[0].top1_agreement);
  EXPECT_GT(r->report.candidates[0].kl.mean, 0);
  // Every tensor of the model; the norms byte for byte as stored.
  absl::StatusOr<TensorSet> in = TensorSet::Open(kData + "/stories3M-hf/model.safetensors");
  absl::StatusOr<TensorSet> out = TensorSet::Open(q.output);
  ASSERT_TRUE(in.ok() && out.ok());
  ASSERT_EQ(out->tensors().size(), in->tensors().size());
  int norms = 0;
  for (const TensorView& t : in->tensors()) {
    auto same = [&](const TensorView& x) { return x.name == t.name; };
    auto it = std::find_if(out->tensors().begin(), out->tensors().end(), same);
    ASSERT_NE(it, out->tensors().end()) << t.name;
    const TensorView* o = &*it;
    EXPECT_EQ(o->shape, t.shape) << t.name;
    if (t.shape.size() == 1) {
      ++norms;
      EXPECT_TRUE(std::equal(t.bytes.begin(), t.bytes.end(), o->bytes.begin(), o->bytes.end()))
          << t.name;
    }
  }
  EXPECT_GT(norms, 0);

  // A recipe, which quantizes the embedding and (untied here) lm_head too.
  api::QuantizeModelOptions recipe = q;
  recipe.model = kData + "/stories260K-hf";
  recipe.weights = "Q4_K_M:gptq";
  recipe.output = dir + "/recipe.safetensors";
  ASSERT_TRUE(api::QuantizeModel(recipe).ok());
  api::EvalOptions small = e;
  small.model = recipe.model;
  small.weights = recipe.weights;
  small.weights_files = {recipe.output};
  small.text_file.clear();
  small.sample = "4:64";
  absl::StatusOr<api::EvalResult> r260 = api::Eval(small);
  ASSERT_TRUE(r260.ok()) << r260.status();
  EXPECT_EQ(r260->report.candidates[1].kl.mean, r260->report.candidates[0].kl.mean);

  // Refusals, each naming its option; nothing is left behind.
  api::QuantizeModelOptions bad = q;
  bad.output = dir + "/bad.safetensors";
  bad.weights = "int4-g128:awq";
  EXPECT_THAT(api::QuantizeModel(bad).status().message(), HasSubstr("folds its scales"));
  bad.weights = "int4-g128,q4_K";
  EXPECT_EQ(OptionOf(api::QuantizeModel(bad).status()).value_or(""), "weights");
  bad.weights = "int4-g128";
  bad.dtype = "F8_E4M3";
  EXPECT_EQ(OptionOf(api::QuantizeModel(bad).status()).value_or(""), "dtype");
  bad.dtype = "F32";
  bad.output = kData + "/stories3M-hf/model.safetensors";  // its own input
  EXPECT_EQ(OptionOf(api::QuantizeModel(bad).status()).value_or(""), "output");
  bad.output = dir + "/bad.safetensors";
  bad.weights = "int4-g128:gptq";
  bad.calibration.chunks = 0;
  EXPECT_EQ(OptionOf(api::QuantizeModel(bad).status()).value_or(""), "calib_chunks");
  EXPECT_FALSE(std::filesystem::exists(dir + "/bad.safetensors"));
}

// lowp quant-error --model: rounding to nearest gives the file's own rows
// (quant-error on the linear layers' tensors); GPTQ's weights are further
// from the model's; a recipe counts the embedding it quantizes.
TEST(ModelQuantError, EachSchemeAsEvalMakesIt) {
  api::ModelQuantErrorOptions m;
  m.model = kData + "/stories3M-hf";
  m.schemes = {"int4-g128", "int4-g128:gptq", "Q4_K_M:gptq"};
  m.calibration.chunks = 2;
  m.summary = true;
  absl::StatusOr<api::QuantErrorResult> r = api::ModelQuantError(m);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->aggregates.size(), 3u);
  EXPECT_TRUE(r->results.empty());
  api::QuantErrorOptions f;
  f.inputs.files = {kData + "/stories3M-hf/model.safetensors"};
  f.schemes = {"int4-g128"};
  f.tensors = "*_proj.weight";
  f.summary = true;
  absl::StatusOr<api::QuantErrorResult> file = api::QuantError(f);
  ASSERT_TRUE(file.ok()) << file.status();
  const QuantReport& rtn = r->aggregates[0];
  EXPECT_EQ(rtn.elements, file->aggregates[0].elements);
  EXPECT_EQ(rtn.stats.sum_squared_error, file->aggregates[0].stats.sum_squared_error);
  EXPECT_EQ(rtn.storage_bits, file->aggregates[0].storage_bits);
  EXPECT_EQ(r->aggregates[1].scheme, "int4-g128:gptq");
  EXPECT_EQ(r->aggregates[1].elements, rtn.elements);
  EXPECT_GT(r->aggregates[1].rmse(), rtn.rmse());
  const int64_t embedding = 512 * 256;  // stories3M-hf's tied embedding, vocab x hidden
  EXPECT_EQ(r->aggregates[2].elements, rtn.elements + embedding);
  m.schemes = {"bogus"};
  EXPECT_EQ(OptionOf(api::ModelQuantError(m).status()).value_or(""), "schemes");
  m.schemes = {"*=q4_K"};
  EXPECT_EQ(OptionOf(api::ModelQuantError(m).status()).value_or(""), "schemes");
}

// On stories3M-hf AWQ's scales lower each product's output error by 1-2%
// only (its inputs have no outlier channels to protect), so its KL is
// rounding to nearest's within the noise: neither much better nor worse.
TEST(EvalAwq, RunsAndStaysNearRoundingToNearest) {
  absl::StatusOr<api::EvalResult> r = api::Eval(Options("int4-g128,int4-g128:awq", 6, 8));
  ASSERT_TRUE(r.ok()) << r.status();
  const std::vector<CandidateResult>& c = r->report.candidates;
  ASSERT_EQ(c.size(), 2u);
  EXPECT_EQ(c[1].weights.total.scheme, "int4-g128:awq");
  EXPECT_NE(c[1].kl.mean, c[0].kl.mean);  // scales were chosen and folded
  EXPECT_LT(c[1].kl.mean, 1.1 * c[0].kl.mean) << c[1].kl.mean << " vs " << c[0].kl.mean;
  // Its weight report is of the effective weight (the scales undone).
  EXPECT_LT(c[1].weights.total.rmse(), 1.2 * c[0].weights.total.rmse());
}

// Without rounding (a float32 "scheme") every scale AWQ may try gives the
// same output, so it keeps s = 1 and the folded model is the model.
TEST(EvalAwq, WithoutRoundingTheFoldedModelIsTheModel) {
  absl::StatusOr<api::EvalResult> r = api::Eval(Options("fp32:awq"));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->report.candidates[0].kl.max, 0.0);
}

// With a given alpha the scales are far from 1 and every fold runs: into
// both norms, v's rows (a model whose every head has its own value head)
// and up's rows. Without rounding (fp32) the folded model must be the model
// but for float32's rounding of W s and x / s.
TEST(EvalAwq, EveryFoldLeavesTheFloatModel) {
  const std::string dir = ::testing::TempDir() + "/awq-mha";
  const ModelConfig c = testing::LlamaShape("mha", 64, 128, 2, 4, 4, 256, false);
  ASSERT_TRUE(testing::WriteRandomCheckpoint(dir, c, DType::kF32, 7).ok());
  api::EvalOptions o;
  o.model = dir;
  o.sample = "2:32";
  o.calibration.sample = "2:32";
  o.weights = "fp32:awq=0.8,int4-g32:awq=0.8,int4-g32";
  absl::StatusOr<api::EvalResult> r = api::Eval(o);
  ASSERT_TRUE(r.ok()) << r.status();
  const std::vector<CandidateResult>& k = r->report.candidates;
  ASSERT_EQ(k.size(), 3u);
  EXPECT_EQ(k[0].weights.total.scheme, "fp32:awq=0.8");
  EXPECT_LT(k[0].kl.max, 1e-9);
  EXPECT_LT(k[0].layer_relative_rmse.back(), 1e-5);
  // Rounded, the scales change the result (they were applied).
  EXPECT_NE(k[1].kl.mean, k[2].kl.mean);
  std::filesystem::remove_all(dir);
}

// SmoothQuant's scales (max|x|^alpha / max|w|^(1-alpha), far from 1 on
// this random model) fold into both norms: without rounding (fp32) the model
// is the model but for float32's rounding of W s and x / s; with int8
// weights and activations they change what is rounded.
TEST(EvalSmooth, FoldsLeaveTheFloatModelAndChangeW8A8) {
  const std::string dir = ::testing::TempDir() + "/smooth-mha";
  const ModelConfig c = testing::LlamaShape("mha", 64, 128, 2, 4, 4, 256, false);
  ASSERT_TRUE(testing::WriteRandomCheckpoint(dir, c, DType::kF32, 8).ok());
  api::EvalOptions o;
  o.model = dir;
  o.sample = "2:32";
  o.calibration.sample = "2:32";
  o.weights = "fp32:smooth=0.8";
  absl::StatusOr<api::EvalResult> floats = api::Eval(o);
  ASSERT_TRUE(floats.ok()) << floats.status();
  EXPECT_EQ(floats->report.candidates[0].weights.total.scheme, "fp32:smooth=0.8");
  EXPECT_LT(floats->report.candidates[0].kl.max, 1e-9);
  o.weights = "int8-channel,int8-channel:smooth,int8-channel:smooth=0.8";
  o.activations = "int8-channel";
  absl::StatusOr<api::EvalResult> w8a8 = api::Eval(o);
  ASSERT_TRUE(w8a8.ok()) << w8a8.status();
  const std::vector<CandidateResult>& k = w8a8->report.candidates;
  ASSERT_EQ(k.size(), 3u);
  EXPECT_NE(k[1].kl.mean, k[0].kl.mean);
  EXPECT_NE(k[2].kl.mean, k[1].kl.mean);  // alpha is taken
  std::filesystem::remove_all(dir);
}

TEST(EvalAwq, RefusesWhatItCannotFold) {
  absl::StatusOr<api::EvalResult> part =
      api::Eval(Options("*.q_proj.weight=int4-g128:awq,*=int4-g128"));
  ASSERT_FALSE(part.ok());
  EXPECT_THAT(part.status().message(), HasSubstr("scaled together"));
  absl::StatusOr<api::EvalResult> both = api::Eval(Options("int4-g128:awq:gptq"));
  ASSERT_FALSE(both.ok());
  EXPECT_THAT(both.status().message(), HasSubstr("one calibration per scheme"));
  absl::StatusOr<api::EvalResult> mixed =
      api::Eval(Options("*.mlp.*=int4-g128:gptq,*=int4-g128:awq"));
  ASSERT_FALSE(mixed.ok());
  EXPECT_THAT(mixed.status().message(), HasSubstr("one method"));
  absl::StatusOr<api::EvalResult> folds =
      api::Eval(Options("*.mlp.*=int8-channel:smooth,*=int8-channel:awq"));
  ASSERT_FALSE(folds.ok());
  EXPECT_THAT(folds.status().message(), HasSubstr("one method"));
  absl::StatusOr<api::EvalResult> alpha = api::Eval(Options("int8-channel:smooth=2"));
  ASSERT_FALSE(alpha.ok());
  EXPECT_THAT(alpha.status().message(), HasSubstr("':smooth' takes no value or an alpha"));
}

}  // namespace
}  // namespace lowp
