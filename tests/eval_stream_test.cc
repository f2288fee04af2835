// The layer-major evaluator's invariants: its results do not depend on how a
// run is cut into batches, on the thread count, or (beyond the order of the
// KL's sums) on the chunks of lm_head; a llama.cpp file as a candidate gives
// what its recipe gives; the chunked metrics equal the whole-row ones.
#include <cmath>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "eval/evaluate.h"
#include "eval/logit_stats.h"
#include "eval/metrics.h"
#include "eval/sample.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "io/gguf_writer.h"
#include "io/output_file.h"
#include "io/tensor_set.h"
#include "model/checkpoint.h"
#include "model/forward.h"
#include "tests/bundled_model.h"
#include "tests/random_checkpoint.h"

namespace lowp {
namespace {

using ::testing::HasSubstr;

const std::string kData = LOWP_TEST_DATA_DIR;

Checkpoint Bundled() { return testing::BundledCheckpoint(); }

std::vector<int32_t> Sampled(const Checkpoint& w, int64_t count, int64_t length) {
  return testing::SampledTokens(w, count, length, 11);
}

EvalCandidate Candidate(const std::string& weights, const std::string& kv = "",
                        const std::string& compute = "") {
  EvalCandidate c;
  c.label = weights;
  c.weights = weights;
  // PATTERN=SCHEME items, or one scheme for the linear layers.
  for (const std::string& item : {weights}) {
    if (item.empty()) break;
    const size_t eq = item.find('=');
    const std::string pattern = eq == std::string::npos ? "" : item.substr(0, eq);
    const std::string scheme = eq == std::string::npos ? item : item.substr(eq + 1);
    c.weight_rules.push_back({pattern, std::shared_ptr<const Scheme>(*ParseScheme(scheme)), {}});
  }
  if (!kv.empty()) {
    c.kv = kv;
    c.emulation.kv = std::shared_ptr<const Scheme>(*ParseScheme(kv));
  }
  if (!compute.empty()) {
    c.compute = compute;
    c.emulation.compute = *FindFormat(compute);
  }
  return c;
}

EvalRun Runs(int threads, int64_t batch_tokens = 0, int64_t head_rows = 0) {
  EvalRun run;
  run.threads = threads;
  run.batch_tokens = batch_tokens;
  run.head_rows = head_rows;
  return run;
}

void ExpectSameDistribution(const Distribution& a, const Distribution& b, const std::string& what) {
  EXPECT_EQ(a.count, b.count) << what;
  for (auto [x, y] :
       {std::pair{a.mean, b.mean}, std::pair{a.rms, b.rms}, std::pair{a.min, b.min},
        std::pair{a.median, b.median}, std::pair{a.p99, b.p99}, std::pair{a.max, b.max}}) {
    EXPECT_TRUE(x == y || (std::isnan(x) && std::isnan(y))) << what << ": " << x << " != " << y;
  }
}

// Every number of two reports, exactly (the census too unless told not).
void ExpectSameReport(const EvalReport& a, const EvalReport& b, bool census = true) {
  ASSERT_EQ(a.candidates.size(), b.candidates.size());
  EXPECT_EQ(a.reference_perplexity, b.reference_perplexity);
  for (size_t k = 0; k < a.candidates.size(); ++k) {
    const CandidateResult& x = a.candidates[k];
    const CandidateResult& y = b.candidates[k];
    const std::string label = x.candidate.label;
    ExpectSameDistribution(x.kl, y.kl, label + " kl");
    ExpectSameDistribution(x.delta_p, y.delta_p, label + " delta p");
    EXPECT_EQ(x.top1_agreement, y.top1_agreement) << label;
    EXPECT_EQ(x.perplexity, y.perplexity) << label;
    EXPECT_EQ(x.layer_relative_rmse, y.layer_relative_rmse) << label;
    EXPECT_EQ(x.weights.total.stats.sum_squared_error, y.weights.total.stats.sum_squared_error)
        << label;
    EXPECT_EQ(x.weights.total.storage_bits, y.weights.total.storage_bits) << label;
    for (int s = 0; s < kSiteCount && census; ++s) {
      EXPECT_EQ(x.census.sites[s].values, y.census.sites[s].values) << label;
      EXPECT_EQ(x.census.sites[s].flushed, y.census.sites[s].flushed) << label;
    }
  }
}

TEST(LogitStats, ChunksGiveComparePositionsNumbers) {
  std::mt19937 rng(5);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  const int64_t V = 1000;
  for (int trial = 0; trial < 20; ++trial) {
    std::vector<float> x(V), y(V);
    for (int64_t i = 0; i < V; ++i) {
      x[i] = normal(rng);
      y[i] = x[i] + 0.05f * normal(rng);
    }
    if (trial == 1) y = x;             // twins: KL exactly 0
    if (trial == 2) y[17] = INFINITY;  // a non-finite candidate
    const int64_t next = (trial * 37) % V;
    std::vector<double> reference, scratch;
    ASSERT_TRUE(LogSoftmax(x, reference));
    const PositionMetrics whole = ComparePosition(reference, ArgMax(x), y, next, scratch);
    for (int64_t chunk : {int64_t{1}, int64_t{7}, int64_t{64}, V}) {
      LogitStats p;
      CandidateStats q;
      for (int64_t first = 0; first < V; first += chunk) {
        const int64_t n = std::min(chunk, V - first);
        const std::span<const float> xs(x.data() + first, n), ys(y.data() + first, n);
        const double old_max = p.Add(xs, first, next);
        q.Add(xs, ys, first, next, old_max, p);
      }
      const PositionMetrics m = FinishPosition(p, q, next);
      const std::string at = absl::StrCat("trial ", trial, ", chunks of ", chunk);
      EXPECT_EQ(m.finite, whole.finite) << at;
      EXPECT_EQ(m.top1, whole.top1) << at;
      if (!whole.finite) {
        EXPECT_TRUE(std::isinf(m.kl)) << at;
        EXPECT_TRUE(std::isnan(m.delta_p)) << at;
        continue;
      }
      if (trial == 1) {
        EXPECT_EQ(m.kl, 0.0) << at;
      }
      EXPECT_NEAR(m.kl, whole.kl, 1e-13 + 1e-11 * whole.kl) << at;
      EXPECT_NEAR(m.ce_reference, whole.ce_reference, 1e-12) << at;
      EXPECT_NEAR(m.ce_candidate, whole.ce_candidate, 1e-12) << at;
      EXPECT_NEAR(m.delta_p, whole.delta_p, 1e-14) << at;
    }
  }
}

TEST(EvalStream, SmallModelResultsDoNotDependOnBatchesOrThreads) {
  const Checkpoint w = Bundled();
  ASSERT_TRUE(SmallLayer(w.config()));
  const std::vector<int32_t> tokens = Sampled(w, 6, 32);
  // Per-tensor scale, NF4's double quantization (groups of rows), stochastic
  // rounding (by element index) on every matrix; a KV cache; compute.
  const std::vector<EvalCandidate> candidates = {
      Candidate("*=fp8_e4m3fn-tensor"), Candidate("*=nf4:double-quant"),
      Candidate("*=bf16:rounding=stochastic:seed=3", "fp8_e4m3fn", "bf16")};
  absl::StatusOr<EvalReport> a = Evaluate(w, tokens, 32, candidates, Runs(1));
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->batches, 1);
  for (EvalRun run : {Runs(2), Runs(3), Runs(2, 32), Runs(1, 96)}) {
    absl::StatusOr<EvalReport> b = Evaluate(w, tokens, 32, candidates, run);
    ASSERT_TRUE(b.ok()) << b.status();
    EXPECT_EQ(b->batches, run.batch_tokens == 0 ? 1 : 6 * 32 / run.batch_tokens);
    ExpectSameReport(*a, *b);
  }
}

TEST(EvalStream, HeadChunksChangeOnlyTheOrderOfTheKlSums) {
  const Checkpoint w = Bundled();
  const std::vector<int32_t> tokens = Sampled(w, 4, 24);
  const std::vector<EvalCandidate> candidates = {Candidate("*=nf4:double-quant"),
                                                 Candidate("*=bf16:rounding=stochastic:seed=3"),
                                                 Candidate("*=fp8_e4m3fn-tensor")};
  absl::StatusOr<EvalReport> whole = Evaluate(w, tokens, 24, candidates, Runs(2));
  absl::StatusOr<EvalReport> chunked = Evaluate(w, tokens, 24, candidates, Runs(2, 0, 64));
  ASSERT_TRUE(whole.ok() && chunked.ok());
  EXPECT_NEAR(whole->reference_perplexity, chunked->reference_perplexity,
              1e-12 * whole->reference_perplexity);
  for (size_t k = 0; k < candidates.size(); ++k) {
    const CandidateResult& a = whole->candidates[k];
    const CandidateResult& b = chunked->candidates[k];
    EXPECT_NEAR(a.kl.mean, b.kl.mean, 1e-14 + 1e-12 * a.kl.mean) << a.candidate.label;
    EXPECT_NEAR(a.kl.max, b.kl.max, 1e-14 + 1e-12 * a.kl.max) << a.candidate.label;
    EXPECT_NEAR(a.perplexity, b.perplexity, 1e-12 * a.perplexity) << a.candidate.label;
    EXPECT_EQ(a.top1_agreement, b.top1_agreement) << a.candidate.label;
    EXPECT_EQ(a.layer_relative_rmse, b.layer_relative_rmse) << a.candidate.label;
    // lm_head quantized a chunk at a time: the same values and statistics
    // as the whole tensor's, to the last bit.
    ASSERT_EQ(a.weights.tensors.size(), b.weights.tensors.size());
    for (size_t t = 0; t < a.weights.tensors.size(); ++t) {
      const QuantReport& x = a.weights.tensors[t];
      const QuantReport& y = b.weights.tensors[t];
      EXPECT_EQ(x.tensor, y.tensor);
      EXPECT_EQ(x.stats.sum_squared_error, y.stats.sum_squared_error) << x.tensor;
      EXPECT_EQ(x.stats.sum_product, y.stats.sum_product) << x.tensor;
      EXPECT_EQ(x.stats.max_abs_error, y.stats.max_abs_error) << x.tensor;
      EXPECT_EQ(x.storage_bits, y.storage_bits) << x.tensor;
    }
  }
}

// A model whose layers are large enough for the products to be split into
// column tiles across threads (SmallLayer false) and lm_head into chunks.
struct LargeModel {
  ModelConfig config = testing::LlamaShape("large", 512, 4096, 2, 8, 2, 3000, false);
  testing::MemoryCheckpoint tensors = testing::RandomTensors(config, 9);
  Checkpoint Open() const {
    absl::StatusOr<TensorSet> set = TensorSet::FromViews(tensors.views);
    EXPECT_TRUE(set.ok()) << set.status();
    absl::StatusOr<Checkpoint> c = Checkpoint::Open(config, *std::move(set));
    EXPECT_TRUE(c.ok()) << c.status();
    return *std::move(c);
  }
};

TEST(EvalStream, LargeModelResultsDoNotDependOnBatchesOrThreads) {
  const LargeModel large;
  const Checkpoint w = large.Open();
  ASSERT_FALSE(SmallLayer(w.config()));
  std::vector<int32_t> tokens(3 * 100);
  for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = static_cast<int32_t>((i * 7919) % 3000);
  const std::vector<EvalCandidate> candidates = {Candidate("int8-channel"),
                                                 Candidate("q4_0", "fp8_e4m3fn")};
  absl::StatusOr<EvalReport> a = Evaluate(w, tokens, 100, candidates, Runs(1));
  ASSERT_TRUE(a.ok()) << a.status();
  // 100-token sequences: products group 3 of them (>= 256 rows).
  for (EvalRun run : {Runs(2), Runs(3), Runs(2, 0, 512)}) {
    absl::StatusOr<EvalReport> b = Evaluate(w, tokens, 100, candidates, run);
    ASSERT_TRUE(b.ok()) << b.status();
    if (run.head_rows == 0) {
      ExpectSameReport(*a, *b);
    } else {
      // The chunk's width is the BLAS's n, and some kernels (OpenBLAS's Haswell
      // sgemm) round a few logits differently at another n: KL agrees to the
      // float32 logits' rounding, not bit for bit (measured: 1.4e-9 relative).
      EXPECT_EQ(a->candidates[1].top1_agreement, b->candidates[1].top1_agreement);
      EXPECT_NEAR(a->candidates[1].kl.mean, b->candidates[1].kl.mean,
                  1e-14 + 1e-7 * a->candidates[1].kl.mean);
    }
  }
  // The logits too, by the same pass on one thread and on three.
  absl::StatusOr<std::vector<float>> one = ReferenceLogits(w, tokens, 100, Runs(1));
  absl::StatusOr<std::vector<float>> three = ReferenceLogits(w, tokens, 100, Runs(3));
  ASSERT_TRUE(one.ok() && three.ok());
  EXPECT_EQ(*one, *three);
}

// The two schedules (eval/schedule.h) on the same streams: every stream and
// group side by side, or one stream at a time with every thread on each
// product, give the same numbers, on a small model and on a large one.
TEST(EvalStream, BothSchedulesGiveTheSameResults) {
  const Checkpoint small = Bundled();
  const std::vector<int32_t> few = Sampled(small, 4, 24);
  const std::vector<EvalCandidate> small_candidates = {
      Candidate("*=nf4:double-quant"), Candidate("q4_0", "fp8_e4m3fn"),
      Candidate("*=bf16:rounding=stochastic:seed=3", "", "bf16")};
  const LargeModel large;
  const Checkpoint big = large.Open();
  std::vector<int32_t> many(3 * 100);
  for (size_t i = 0; i < many.size(); ++i) many[i] = static_cast<int32_t>((i * 7919) % 3000);
  const std::vector<EvalCandidate> large_candidates = {Candidate("int8-channel"),
                                                       Candidate("q4_0", "fp8_e4m3fn")};
  struct Case {
    const Checkpoint& model;
    std::span<const int32_t> tokens;
    int64_t length;
    const std::vector<EvalCandidate>& candidates;
  };
  for (const Case& c : {Case{small, few, 24, small_candidates},
                        Case{big, many, 100, large_candidates}}) {
    EvalRun side = Runs(2), one = Runs(2);
    side.schedule = EvalRun::Schedule::kSideBySide;
    one.schedule = EvalRun::Schedule::kOneAtATime;
    absl::StatusOr<EvalReport> a = Evaluate(c.model, c.tokens, c.length, c.candidates, side);
    absl::StatusOr<EvalReport> b = Evaluate(c.model, c.tokens, c.length, c.candidates, one);
    ASSERT_TRUE(a.ok() && b.ok());
    ExpectSameReport(*a, *b);
  }
}

// Candidates that change one matrix (or lm_head alone) start from the
// reference's hidden state at that layer: the same numbers as running every
// layer, beside candidates that cannot share (a KV cache emulated).
TEST(EvalStream, SharedPrefixGivesTheSameResults) {
  const LargeModel large;
  for (bool small : {true, false}) {
    const Checkpoint w = small ? Bundled() : large.Open();
    ASSERT_EQ(SmallLayer(w.config()), small);
    const int64_t length = small ? 32 : 100;
    std::vector<int32_t> tokens;
    if (small) {
      tokens = Sampled(w, 6, length);
    } else {
      for (int i = 0; i < 3 * length; ++i) tokens.push_back((i * 7919) % 3000);
    }
    const std::string last = absl::StrCat("model.layers.", w.config().num_layers - 1, ".");
    const std::vector<EvalCandidate> candidates = {
        Candidate(last + "mlp.down_proj.weight=q4_0"),
        Candidate("model.layers.1.self_attn.v_proj.weight=int4-g128"),
        Candidate(w.config().tie_word_embeddings ? "model.embed_tokens.weight=q8_0"
                                                 : "lm_head.weight=q8_0"),
        Candidate("*.layers.1.*=int8-channel", "fp8_e4m3fn"),
        Candidate("")};
    EvalRun shared = Runs(2, small ? 64 : 0);
    shared.share_prefix = true;
    absl::StatusOr<EvalReport> a = Evaluate(w, tokens, length, candidates, Runs(2, small ? 64 : 0));
    absl::StatusOr<EvalReport> b = Evaluate(w, tokens, length, candidates, shared);
    ASSERT_TRUE(a.ok() && b.ok()) << a.status() << b.status();
    ExpectSameReport(*a, *b, /*census=*/false);
    EXPECT_GT(a->candidates[0].kl.mean, 0);
    EXPECT_EQ(a->candidates[4].kl.max, 0);
  }
}

TEST(EvalStream, GgufFileEqualsItsRecipe) {
  const Checkpoint w = Bundled();
  const std::vector<int32_t> tokens = Sampled(w, 4, 40);
  EvalCandidate file;
  file.label = "file";
  file.weights = file.weights_file = kData + "/ggml/stories260K-Q4_K_M.gguf";
  absl::StatusOr<EvalReport> r = Evaluate(w, tokens, 40, {Candidate("Q4_K_M"), file}, Runs(2));
  ASSERT_TRUE(r.ok()) << r.status();
  const CandidateResult& recipe = r->candidates[0];
  const CandidateResult& stored = r->candidates[1];
  // The same values: llama.cpp's Q4_K_M bytes decode to lowp's Q4_K_M.
  ExpectSameDistribution(recipe.kl, stored.kl, "kl");
  EXPECT_EQ(recipe.perplexity, stored.perplexity);
  EXPECT_EQ(recipe.layer_relative_rmse, stored.layer_relative_rmse);
  EXPECT_GT(recipe.kl.mean, 1e-3);
  ASSERT_EQ(stored.weights.tensors.size(), 37u);  // embedding, 35 linear layers, lm_head
  EXPECT_EQ(recipe.weights.tensors.size(), 37u);
  EXPECT_EQ(recipe.weights.total.storage_bits, stored.weights.total.storage_bits);
  EXPECT_NEAR(recipe.weights.total.sqnr_db(), stored.weights.total.sqnr_db(), 1e-9);
}

TEST(EvalStream, FilesThatDoNotMatchTheModelAreNamed) {
  const Checkpoint w = Bundled();
  const std::vector<int32_t> tokens = Sampled(w, 1, 8);
  // A GGUF of other tensors and no architecture: refused before its layout
  // is trusted, the file named.
  EvalCandidate other;
  other.label = "other";
  other.weights = other.weights_file = kData + "/ggml/known-answers.gguf";
  absl::StatusOr<EvalReport> r = Evaluate(w, tokens, 8, {other}, Runs(1));
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("known-answers.gguf"));
  EXPECT_THAT(r.status().message(), HasSubstr("general.architecture is missing"));
  // The model's architecture but not its tensors: the file, the tensor
  // missing and its llama.cpp name are named.
  const std::string path = ::testing::TempDir() + "/eval_stream_other.gguf";
  GgufWriter writer;
  writer.AddString("general.architecture", "llama");
  const std::vector<float> values(8, 0.5f);
  writer.AddF32Tensor("output.weight", {8}, values);
  absl::StatusOr<std::unique_ptr<OutputFile>> out = OutputFile::Create(path);
  ASSERT_TRUE(out.ok());
  ASSERT_TRUE(writer.Write(**out).ok());
  ASSERT_TRUE((*out)->Commit().ok());
  other.weights = other.weights_file = path;
  r = Evaluate(w, tokens, 8, {other}, Runs(1));
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr(path));
  EXPECT_THAT(r.status().message(), HasSubstr("no tensor model.embed_tokens.weight"));
  EXPECT_THAT(r.status().message(), HasSubstr("llama.cpp's token_embd.weight"));
}

}  // namespace
}  // namespace lowp
