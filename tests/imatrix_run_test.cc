// The importance matrix lowp's forward pass makes (eval/imatrix.h), checked
// against sums computed here from the checkpoint, and its use by the
// commands (--imatrix).
#include "eval/imatrix.h"

#include <cmath>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "api/api.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/bundled_model.h"

namespace lowp {
namespace {

using ::testing::HasSubstr;
using testing::BundledCheckpoint;
using testing::SampledTokens;

const ImatrixEntry* Entry(const Imatrix& m, const std::string& name) {
  return m.FindExact(name);
}

// Layer 0's q, k and v read RMSNorm(embedding) of each token: the sums of
// squares of those rows, computed here from the checkpoint, are the entry.
TEST(ImatrixRun, FirstLayerSumsEqualTheNormedEmbeddings) {
  const Checkpoint model = BundledCheckpoint();
  const ModelConfig& c = model.config();
  const int64_t length = 32;
  const std::vector<int32_t> tokens = SampledTokens(model, 3, length, 7);
  ImatrixRunOptions o;
  o.threads = 2;
  absl::StatusOr<ImatrixRun> run = ComputeImatrix(model, tokens, length, {"test"}, o);
  ASSERT_TRUE(run.ok()) << run.status();
  const Imatrix& m = run->imatrix;
  // 7 products per layer (q, k, v, o, gate, up, down); lm_head only when asked.
  EXPECT_EQ(m.entries().size(), static_cast<size_t>(7 * c.num_layers));
  EXPECT_EQ(Entry(m, "output.weight"), nullptr);

  const int64_t D = c.hidden_size;
  LayerStorage storage;
  absl::StatusOr<LayerWeights> w = model.ReadLayer(0, storage, 1);
  ASSERT_TRUE(w.ok()) << w.status();
  std::vector<double> sum2(static_cast<size_t>(D), 0.0);
  std::vector<float> row(static_cast<size_t>(D));
  for (int32_t id : tokens) {
    ASSERT_TRUE(model.ReadRows(Table::kEmbedding, id, 1, row, 1).ok());
    double ms = 0;
    for (float v : row) ms += static_cast<double>(v) * v;
    const float inv = static_cast<float>(1.0 / std::sqrt(ms / D + c.rms_norm_eps));
    for (int64_t j = 0; j < D; ++j) {
      const double x = row[j] * inv * w->input_norm[j];
      sum2[j] += x * x;
    }
  }
  for (const char* name : {"blk.0.attn_q.weight", "blk.0.attn_k.weight", "blk.0.attn_v.weight"}) {
    const ImatrixEntry* e = Entry(m, name);
    ASSERT_NE(e, nullptr) << name;
    EXPECT_EQ(e->columns, D);
    EXPECT_EQ(e->matrices, 1);
    ASSERT_EQ(e->counts.size(), 1u);
    EXPECT_EQ(e->counts[0], static_cast<float>(tokens.size())) << name;
    for (int64_t j = 0; j < D; ++j) {
      EXPECT_NEAR(e->sum2[j], sum2[j], 1e-5 * sum2[j]) << name << " column " << j;
    }
  }
  // The MLP's down projection reads the intermediate width.
  const ImatrixEntry* down = Entry(m, "blk.4.ffn_down.weight");
  ASSERT_NE(down, nullptr);
  EXPECT_EQ(down->columns, c.intermediate_size);
}

TEST(ImatrixRun, ProcessOutputAddsTheHead) {
  const Checkpoint model = BundledCheckpoint();
  const std::vector<int32_t> tokens = SampledTokens(model, 2, 16, 3);
  ImatrixRunOptions o;
  o.process_output = true;
  absl::StatusOr<ImatrixRun> run = ComputeImatrix(model, tokens, 16, {"test"}, o);
  ASSERT_TRUE(run.ok()) << run.status();
  const ImatrixEntry* head = Entry(run->imatrix, "output.weight");
  ASSERT_NE(head, nullptr);
  EXPECT_EQ(head->counts[0], 32.0f);
  EXPECT_EQ(head->columns, model.config().hidden_size);
}

TEST(ImatrixRun, ThreadsDoNotChangeTheMatrix) {
  const Checkpoint model = BundledCheckpoint();
  const std::vector<int32_t> tokens = SampledTokens(model, 4, 24, 5);
  ImatrixRunOptions one, two;
  one.threads = 1;
  two.threads = 2;
  absl::StatusOr<ImatrixRun> a = ComputeImatrix(model, tokens, 24, {"t"}, one);
  absl::StatusOr<ImatrixRun> b = ComputeImatrix(model, tokens, 24, {"t"}, two);
  ASSERT_TRUE(a.ok() && b.ok());
  ASSERT_EQ(a->imatrix.entries().size(), b->imatrix.entries().size());
  for (const auto& [name, e] : a->imatrix.entries()) {
    ASSERT_NE(b->imatrix.FindExact(name), nullptr) << name;
    EXPECT_EQ(e.sum2, b->imatrix.FindExact(name)->sum2) << name;
  }
}

// lowp imatrix's file, read back, drives quant-error; the types and mixes
// that need one are refused without it.
TEST(ImatrixRun, FileDrivesQuantErrorAndIsNeededByTheLowestTypes) {
  const std::string dir = ::testing::TempDir() + "/lowp_imatrix_run";
  std::filesystem::create_directories(dir);
  api::ImatrixOptions io;
  io.input.sample = "4:64";
  io.input.threads = 2;
  io.out = dir + "/m.gguf";
  absl::StatusOr<api::ImatrixResult> made = api::MakeImatrix(io);
  ASSERT_TRUE(made.ok()) << made.status();
  EXPECT_EQ(made->format, "gguf");
  EXPECT_TRUE(std::filesystem::exists(io.out));

  api::QuantErrorOptions q;
  q.inputs.files = {testing::kBundledModel + "/model.safetensors"};
  q.tensors = "*q_proj*";
  q.schemes = {"q4_0", "iq4_nl"};
  q.summary = true;
  q.imatrix = io.out;
  absl::StatusOr<api::QuantErrorResult> with = api::QuantError(q);
  ASSERT_TRUE(with.ok()) << with.status();
  for (const QuantReport& r : with->aggregates) {
    EXPECT_TRUE(r.weighted) << r.scheme;
    EXPECT_GT(r.weighted_relative_rmse(), 0) << r.scheme;
    EXPECT_LT(r.weighted_relative_rmse(), 1) << r.scheme;
  }
  q.imatrix.clear();
  absl::StatusOr<api::QuantErrorResult> without = api::QuantError(q);
  ASSERT_TRUE(without.ok()) << without.status();
  EXPECT_FALSE(without->aggregates[0].weighted);
  // The importance changes what q4_0 stores (ggml's weighted search).
  EXPECT_NE(with->aggregates[0].stats.sum_squared_error,
            without->aggregates[0].stats.sum_squared_error);

  api::EvalOptions e;
  e.model = std::string(LOWP_TEST_DATA_DIR) + "/stories3M-hf";  // rows of 256: no fallback
  e.sample = "2:16";
  e.weights = "IQ2_XXS";
  absl::StatusOr<api::EvalResult> refused = api::Eval(e);
  ASSERT_FALSE(refused.ok());
  EXPECT_THAT(refused.status().message(), HasSubstr("importance matrix"));
  std::filesystem::remove_all(dir);
}

// lowp mix: a type that needs an importance matrix is refused without one,
// naming the option, before any sweep.
TEST(ImatrixRun, MixRefusesTypesThatNeedAnImatrixWithoutOne) {
  api::MixOptions m;
  m.model = std::string(LOWP_TEST_DATA_DIR) + "/stories3M-hf";
  m.bits_per_weight = 4;
  m.types = {"iq2_xxs", "q8_0"};
  m.baselines = {"none"};
  absl::StatusOr<api::MixResult> r = api::Mix(m);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("types"));
  EXPECT_THAT(r.status().message(), HasSubstr("importance matrix"));
}

}  // namespace
}  // namespace lowp
