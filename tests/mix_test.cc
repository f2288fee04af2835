// lowp mix: the allocation against brute force, the budget to the byte, the
// groups' bytes and llama-quantize's arguments, the errors of every option,
// and a small end-to-end run whose rules give eval's numbers back.
#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "api/eval.h"
#include "api/mix.h"
#include "api/plan.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "mix/allocate.h"
#include "mix/budget.h"
#include "mix/groups.h"
#include "mix/weight_errors.h"
#include "quant/measure.h"
#include "model/checkpoint.h"
#include "sizing/devices.h"
#include "sizing/memory.h"

namespace lowp {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

const std::string kData = LOWP_TEST_DATA_DIR;
const std::string kModel = kData + "/stories3M-hf";

// The least cost of any assignment within `budget` (infinity if none).
double BruteForce(const std::vector<std::vector<MixOption>>& groups, uint64_t budget) {
  double best = std::numeric_limits<double>::infinity();
  std::vector<size_t> at(groups.size(), 0);
  while (true) {
    uint64_t bytes = 0;
    double cost = 0;
    for (size_t g = 0; g < groups.size(); ++g) {
      bytes += groups[g][at[g]].bytes;
      cost += groups[g][at[g]].cost;
    }
    if (bytes <= budget) best = std::min(best, cost);
    size_t g = 0;
    while (g < groups.size() && ++at[g] == groups[g].size()) at[g++] = 0;
    if (g == groups.size()) return best;
  }
}

TEST(Allocate, EqualsBruteForceOnSmallCases) {
  std::mt19937_64 random(7);
  int checked = 0;
  for (int trial = 0; trial < 400; ++trial) {
    const size_t groups = 1 + random() % 6, types = 1 + random() % 4;
    std::vector<std::vector<MixOption>> table(groups);
    uint64_t least = 0, most = 0;
    for (auto& options : table) {
      uint64_t lo = std::numeric_limits<uint64_t>::max(), hi = 0;
      for (size_t t = 0; t < types; ++t) {
        // Costs that often tie, and options that are dominated.
        MixOption o{100 + random() % 900, static_cast<double>(random() % 50) / 7};
        options.push_back(o);
        lo = std::min(lo, o.bytes);
        hi = std::max(hi, o.bytes);
      }
      least += lo;
      most += hi;
    }
    for (uint64_t budget = least; budget <= most; budget += 1 + (most - least) / 9) {
      absl::StatusOr<Allocation> a = Allocate(table, budget);
      ASSERT_TRUE(a.ok()) << a.status();
      EXPECT_TRUE(a->exact);
      EXPECT_LE(a->bytes, budget);
      EXPECT_NEAR(a->cost, BruteForce(table, budget), 1e-9) << "trial " << trial;
      double cost = 0;
      uint64_t bytes = 0;
      for (size_t g = 0; g < groups; ++g) {
        cost += table[g][a->choice[g]].cost;
        bytes += table[g][a->choice[g]].bytes;
      }
      EXPECT_EQ(bytes, a->bytes);
      EXPECT_DOUBLE_EQ(cost, a->cost);
      ++checked;
    }
  }
  EXPECT_GT(checked, 1000);
}

// The budget is a hard limit to the byte: an assignment of exactly the
// budget's size is taken, one byte less and it is not.
TEST(Allocate, RespectsTheBudgetToTheByte) {
  const std::vector<std::vector<MixOption>> table = {
      {{1000, 5.0}, {1501, 1.0}}, {{1000, 4.0}, {1499, 2.0}}};
  absl::StatusOr<Allocation> at = Allocate(table, 3000);
  ASSERT_TRUE(at.ok());
  EXPECT_EQ(at->bytes, 3000u);
  EXPECT_EQ(at->choice, (std::vector<int>{1, 1}));
  absl::StatusOr<Allocation> below = Allocate(table, 2999);
  ASSERT_TRUE(below.ok());
  EXPECT_EQ(below->choice, (std::vector<int>{1, 0}));
  EXPECT_EQ(below->bytes, 2501u);
  EXPECT_DOUBLE_EQ(below->cost, 5.0);
}

TEST(Allocate, StatesItsBoundWhenTheSearchIsCut) {
  std::mt19937_64 random(3);
  std::vector<std::vector<MixOption>> table(40);
  for (auto& options : table) {
    for (int t = 0; t < 6; ++t) {
      options.push_back({1000 + random() % 5000, std::ldexp(static_cast<double>(random() % 1000), -t)});
    }
  }
  absl::StatusOr<Allocation> full = Allocate(table, 40 * 3000);
  absl::StatusOr<Allocation> cut = Allocate(table, 40 * 3000, /*node_limit=*/50);
  ASSERT_TRUE(full.ok() && cut.ok());
  EXPECT_LE(cut->bytes, 40u * 3000);
  EXPECT_FALSE(cut->exact);
  EXPECT_EQ(cut->nodes, 50);
  EXPECT_LE(cut->lower_bound, full->cost + 1e-9);
  EXPECT_GE(cut->cost, full->cost - 1e-9);
}

TEST(Allocate, RefusesWhatHasNoAnswer) {
  using Table = std::vector<std::vector<MixOption>>;
  EXPECT_THAT(Allocate(Table{{{10, 1.0}}, {}}, 100).status().message(), HasSubstr("no option"));
  EXPECT_THAT(Allocate(Table{{{10, NAN}}}, 100).status().message(), HasSubstr("cost"));
  EXPECT_THAT(Allocate(Table{{{10, 1.0}, {20, 0.5}}, {{30, 1.0}}}, 39).status().message(),
              HasSubstr("smallest assignment, 40 bytes"));
}

TEST(MixGroups, EveryMatrixOnceWithItsBytes) {
  absl::StatusOr<Checkpoint> model = Checkpoint::OpenModel(kModel, {});
  ASSERT_TRUE(model.ok()) << model.status();
  const std::vector<MixGroup> groups = MixGroups(*model);
  ASSERT_EQ(groups.size(), 1 + 4 * 7u);  // tied: the embedding serves as lm_head
  EXPECT_EQ(groups[0].name, "model.embed_tokens.weight");
  EXPECT_EQ(groups[0].llama_cpp, "token_embd.weight");
  EXPECT_TRUE(groups[0].tied);
  EXPECT_EQ(groups[7].llama_cpp, "blk.0.ffn_down.weight");
  EXPECT_EQ(groups[7].layer, 0);
  EXPECT_EQ(groups[7].rows, 256);
  EXPECT_EQ(groups[7].cols, 768);
  // q4_K: 144 bytes per 256 elements; q8_0: 34 per 32; fp16 2 per element.
  EXPECT_EQ(*GroupBytes(**ParseScheme("q4_K"), groups[7]), 256u * 3 * 144);
  EXPECT_EQ(*GroupBytes(**ParseScheme("q8_0"), groups[7]), 256u * 24 * 34);
  EXPECT_EQ(*GroupBytes(**ParseScheme("fp16"), groups[7]), 256u * 768 * 2);
  MixGroup narrow = groups[7];
  narrow.cols = 172;
  EXPECT_THAT(GroupBytes(**ParseScheme("q4_K"), narrow).status().message(),
              HasSubstr("would store it as"));
}

TEST(MixGroups, LlamaQuantizeArguments) {
  std::vector<MixGroup> groups = {{"model.embed_tokens.weight", "token_embd.weight", 8, 256, -1, true}};
  for (int layer = 0; layer < 3; ++layer) {
    for (const char* kind : {"attn_v", "ffn_down"}) {
      groups.push_back({"x", absl::StrCat("blk.", layer, ".", kind, ".weight"), 8, 256, layer});
    }
  }
  const MixAssignment schemes = {"q6_K", "q5_K", "q4_K", "q4_K", "q4_K", "q5_K", "q4_K"};
  absl::StatusOr<LlamaQuantizeCommand> c = LlamaQuantizeArguments(groups, schemes);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->options,
            (std::vector<std::string>{"--token-embedding-type", "q6_K", "--tensor-type",
                                      "blk\\.(0|2)\\.attn_v\\.weight=q5_K", "--tensor-type",
                                      "blk\\.(0|1|2)\\.ffn_down\\.weight=q4_K", "--tensor-type",
                                      "blk\\.1\\.attn_v\\.weight=q4_K"}));
  EXPECT_EQ(c->type, "q4_K");
  EXPECT_THAT(c->Line("in.gguf", "out.gguf"),
              HasSubstr("--tensor-type 'blk\\.(0|2)\\.attn_v\\.weight=q5_K'"));
  MixAssignment lowp_only = schemes;
  lowp_only[3] = "int4-g128";
  EXPECT_THAT(LlamaQuantizeArguments(groups, lowp_only).status().message(),
              HasSubstr("int4-g128 (x) is not a type llama-quantize writes"));
}

TEST(Spearman, RanksWithTies) {
  EXPECT_DOUBLE_EQ(SpearmanCorrelation({1, 2, 3, 4}, {10, 20, 30, 40}), 1);
  EXPECT_DOUBLE_EQ(SpearmanCorrelation({1, 2, 3, 4}, {4, 3, 2, 1}), -1);
  // scipy.stats.spearmanr([1,2,3,4,5],[2,1,4,3,3]) (Debian python3-scipy 1.10): 0.5642880936468347
  EXPECT_NEAR(SpearmanCorrelation({1, 2, 3, 4, 5}, {2, 1, 4, 3, 3}), 0.5642880936468347,
              1e-15);
  EXPECT_TRUE(std::isnan(SpearmanCorrelation({1, 2}, {1, 2})));
}

api::MixOptions Small() {
  api::MixOptions o;
  o.model = kModel;
  o.bits_per_weight = 5;
  o.types = {"q4_K", "q6_K", "q8_0"};
  o.tune.sample = "2:32";
  o.verify.sample = "2:48";
  o.baselines = {"Q4_K_M"};
  o.random_mixes = 3;
  o.threads = 2;
  return o;
}

TEST(Mix, ChoosesWithinTheBudgetAndItsRulesGiveEvalsNumbers) {
  const api::MixOptions o = Small();
  absl::StatusOr<api::MixResult> r = api::Mix(o);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->budget_bytes, static_cast<uint64_t>(std::floor(5.0 * r->weights / 8)));
  ASSERT_EQ(r->rows.size(), 1 + 2 + 3u);  // the mix, Q4_K_M and lowp at its size, 3 random
  const MixRow& mix = r->rows[0];
  EXPECT_LE(mix.bytes, r->budget_bytes);
  // One probe per matrix (the predicted sensitivity).
  EXPECT_EQ(r->candidates_measured, static_cast<int64_t>(r->groups.size()));
  double predicted = 0;
  for (size_t g = 0; g < r->groups.size(); ++g) {
    predicted += r->sensitivity[g][static_cast<size_t>(r->allocation.choice[g])];
  }
  EXPECT_DOUBLE_EQ(mix.predicted_kl, predicted);
  EXPECT_GT(mix.kl_mean, 0);
  EXPECT_EQ(r->rows[1].label, "Q4_K_M");
  EXPECT_EQ(r->rows[2].label, "lowp @ Q4_K_M");
  EXPECT_LE(r->rows[2].bytes, r->rows[1].bytes);
  EXPECT_FALSE(std::isnan(r->spearman));
  // The rules, as eval takes them, on the verification tokens: the same KL.
  api::EvalOptions e;
  e.model = kModel;
  e.sample = o.verify.sample;
  e.seed = o.verify.seed;
  e.weights = absl::StrJoin(r->rules, ",");
  e.threads = 2;
  absl::StatusOr<api::EvalResult> eval = api::Eval(e);
  ASSERT_TRUE(eval.ok()) << eval.status();
  ASSERT_EQ(eval->report.candidates.size(), 1u);
  EXPECT_EQ(eval->report.candidates[0].kl.mean, mix.kl_mean);
  EXPECT_EQ(eval->report.candidates[0].weights.total.storage_bits, 8 * mix.bytes);
  // Its llama-quantize command names every type it chose.
  EXPECT_FALSE(r->llama_quantize.type.empty());
  EXPECT_EQ(r->llama_quantize_error, "");
}

// Calibrated types: each matrix alone calibrated (GPTQ on the float32
// model's inputs) costs less than rounded to nearest; the mix's rules carry
// ":gptq" and eval gives the mix's numbers from them; no llama-quantize line.
TEST(Mix, CalibratedTypesAreMeasuredAndChosen) {
  api::MixOptions o = Small();
  o.types = {"q4_K", "q4_K:gptq", "q6_K"};
  o.random_mixes = 0;
  o.baselines = {"none"};
  o.calibration.chunks = 4;  // 512 tokens: H of the 256 inputs is full rank
  o.calibration.ctx = 128;
  absl::StatusOr<api::MixResult> r = api::Mix(o);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->types, (std::vector<std::string>{"q4_K", "q4_K:gptq", "q6_K"}));
  int lower = 0, decoder = 0;
  double rtn = 0, gptq = 0;
  for (size_t g = 0; g < r->groups.size(); ++g) {
    EXPECT_EQ(r->bytes[g][1], r->bytes[g][0]);  // the scheme's bytes
    if (r->groups[g].layer < 0) {
      // The embedding is no product the calibrator reaches: rounded as q4_K.
      EXPECT_EQ(r->sensitivity[g][1], r->sensitivity[g][0]) << r->groups[g].name;
      continue;
    }
    ++decoder;
    lower += r->sensitivity[g][1] < r->sensitivity[g][0];
    rtn += r->sensitivity[g][0];
    gptq += r->sensitivity[g][1];
  }
  // On 64 tuning positions single matrices' costs are noisy: most lower
  // (22 of 28 when written), and their sum (0.86x).
  EXPECT_GE(lower, decoder * 2 / 3) << lower << " of " << decoder;
  EXPECT_LT(gptq, 0.95 * rtn) << gptq << " vs " << rtn;
  const std::string rules = absl::StrJoin(r->rules, ",");
  EXPECT_THAT(rules, HasSubstr("=q4_K:gptq"));
  EXPECT_THAT(r->llama_quantize_error, HasSubstr("is calibrated"));
  api::EvalOptions e;
  e.model = kModel;
  e.sample = o.verify.sample;
  e.seed = o.verify.seed;
  e.weights = rules;
  e.calibration = o.calibration;
  e.threads = 2;
  absl::StatusOr<api::EvalResult> eval = api::Eval(e);
  ASSERT_TRUE(eval.ok()) << eval.status();
  EXPECT_EQ(eval->report.candidates[0].kl.mean, r->rows[0].kl_mean);
  // Faults in the calibration options name them, before the work.
  o.calibration.chunks = 0;
  EXPECT_THAT(std::string(api::Mix(o).status().message()), HasSubstr("calib_chunks"));
  o.calibration.chunks = 4;
  o.types = {"q4_K:gptq", "q4_K:gptq"};
  EXPECT_THAT(std::string(api::Mix(o).status().message()), HasSubstr("given twice"));
  o.types = {"q4_K:gptq=actorder"};
  EXPECT_THAT(std::string(api::Mix(o).status().message()), HasSubstr("act_order"));
}

TEST(MixSensitivity, SampledRowsAreWholeUnitsSpreadOverTheMatrix) {
  // Small matrices whole.
  EXPECT_EQ(SampledRows(768, 256, 1), (std::vector<std::pair<int64_t, int64_t>>{{0, 768}}));
  EXPECT_EQ(SampledRows(4, 1 << 22, 1), (std::vector<std::pair<int64_t, int64_t>>{{0, 4}}));
  EXPECT_TRUE(SampledRows(0, 256, 1).empty());
  for (const auto& [rows, cols, unit] :
       std::vector<std::tuple<int64_t, int64_t, int64_t>>{{4096, 4096, 1},
                                                          {14336, 4096, 1},
                                                          {4096, 14336, 1},
                                                          {128256, 4096, 1},
                                                          {100003, 2048, 7},
                                                          {5000, 2048, 64}}) {
    const std::vector<std::pair<int64_t, int64_t>> w = SampledRows(rows, cols, unit);
    ASSERT_FALSE(w.empty());
    int64_t sampled = 0, end = 0;
    for (const auto& [first, count] : w) {
      EXPECT_EQ(first % unit, 0) << rows;
      EXPECT_EQ(count % unit, 0) << rows;
      EXPECT_GE(first, end) << "overlapping windows of " << rows;
      EXPECT_LE(first + count, rows);
      end = first + count;
      sampled += count;
    }
    EXPECT_EQ(w.front().first, 0);
    EXPECT_GT(w.back().first, rows * 7 / 8) << "spread to the last rows";
    // About kErrorSampleElements, never the whole.
    EXPECT_GE(sampled * cols, kErrorSampleElements / 2) << rows << "x" << cols;
    EXPECT_LE(sampled * cols, 2 * kErrorSampleElements + kErrorWindows * unit * cols)
        << rows << "x" << cols;
    EXPECT_LT(sampled, rows);
  }
}

// The predicted table: each matrix measured in the probe type alone, every
// other type its KL scaled by the ratio of weight errors, which are those
// MeasureTensor gives the whole matrix; the probe's cells are the exact
// table's bit for bit.
TEST(MixSensitivity, PredictedScalesTheProbeByTheWeightErrors) {
  api::MixOptions o = Small();
  o.baselines = {"none"};
  o.random_mixes = 0;
  absl::StatusOr<api::MixResult> predicted = api::Mix(o);
  ASSERT_TRUE(predicted.ok()) << predicted.status();
  o.sensitivity = "exact";
  absl::StatusOr<api::MixResult> exact = api::Mix(o);
  ASSERT_TRUE(exact.ok()) << exact.status();
  EXPECT_EQ(predicted->method, MixSensitivity::kPredicted);
  EXPECT_EQ(predicted->Probe(), "q6_K");  // the middle of q4_K, q6_K, q8_0 by bytes
  const size_t G = predicted->groups.size(), probe = 1;
  EXPECT_EQ(predicted->candidates_measured, static_cast<int64_t>(G));
  EXPECT_EQ(exact->candidates_measured, static_cast<int64_t>(3 * G));
  EXPECT_TRUE(exact->weight_error.empty());
  absl::StatusOr<Checkpoint> model = Checkpoint::OpenModel(kModel, {});
  ASSERT_TRUE(model.ok()) << model.status();
  int compared = 0;
  std::vector<double> sums(3), exact_sums(3);
  for (size_t g = 0; g < G; ++g) {
    SCOPED_TRACE(predicted->groups[g].name);
    EXPECT_EQ(predicted->sensitivity[g][probe], exact->sensitivity[g][probe]);
    for (size_t t = 0; t < 3; ++t) {
      EXPECT_EQ(predicted->measured[g][t], t == probe);
      EXPECT_EQ(exact->measured[g][t], 1);
      const double ratio = predicted->weight_error[g][t] / predicted->weight_error[g][probe];
      EXPECT_DOUBLE_EQ(predicted->sensitivity[g][t], predicted->sensitivity[g][probe] * ratio);
      sums[t] += predicted->sensitivity[g][t];
      exact_sums[t] += exact->sensitivity[g][t];
      for (const TensorView& v : model->set().tensors()) {
        if (v.name != predicted->groups[g].name) continue;
        absl::StatusOr<QuantReport> r = MeasureTensor(v, *predicted->schemes[t]);
        ASSERT_TRUE(r.ok()) << r.status();
        EXPECT_NEAR(predicted->weight_error[g][t],
                    r->stats.sum_squared_error / r->stats.sum_squared_input,
                    1e-9 * predicted->weight_error[g][t]);
        ++compared;
      }
    }
  }
  EXPECT_EQ(compared, static_cast<int>(3 * G));
  // On these 64 tuning positions single cells are noisy (0.57x to 1.9x of
  // the measured when written); each type's total over the matrices is
  // within 15% (0.90x for q4_K and q8_0).
  for (size_t t = 0; t < 3; ++t) EXPECT_NEAR(sums[t] / exact_sums[t], 1, 0.15) << t;
}

TEST(Mix, ErrorsNameTheOption) {
  auto message = [](const std::function<void(api::MixOptions&)>& change) {
    api::MixOptions o = Small();
    change(o);
    return std::string(api::Mix(o).status().message());
  };
  EXPECT_THAT(message([](auto& o) { o.bits_per_weight.reset(); }), HasSubstr("(one)"));
  EXPECT_THAT(message([](auto& o) { o.bits_per_weight = 0; }),
              HasSubstr("bits_per_weight: 0 is not a budget"));
  EXPECT_THAT(message([](auto& o) { o.bits_per_weight = -1; }),
              HasSubstr("bits_per_weight: -1 is not a budget"));
  EXPECT_THAT(message([](auto& o) {
                o.bits_per_weight.reset();
                o.bytes = 0;
              }),
              HasSubstr("bytes: 0 is not a budget"));
  EXPECT_THAT(message([](auto& o) { o.bytes = 100; }), HasSubstr("one"));
  EXPECT_THAT(message([](auto& o) { o.bits_per_weight = 33; }), HasSubstr("above float32"));
  EXPECT_THAT(message([](auto& o) { o.bits_per_weight = 2; }),
              HasSubstr("below the smallest mix of these types"));
  EXPECT_THAT(message([](auto& o) {
                o.bits_per_weight.reset();
                o.bytes = 10;
              }),
              HasSubstr("bytes: 10 bytes"));
  EXPECT_THAT(message([](auto& o) { o.types = {"q4_K", "bogus"}; }), HasSubstr("types: bogus"));
  EXPECT_THAT(message([](auto& o) { o.types = {"Q4_K_M"}; }), HasSubstr("is a recipe"));
  EXPECT_THAT(message([](auto& o) {
                o.model = kData + "/stories260K-hf";
                o.types = {"q4_K"};
              }),
              HasSubstr("would store it as"));
  EXPECT_THAT(message([](auto& o) { o.baselines = {"Q4_K_X"}; }), HasSubstr("baselines"));
  EXPECT_THAT(message([](auto& o) { o.random_mixes = -1; }), HasSubstr("random_mixes"));
  EXPECT_THAT(message([](auto& o) { o.sensitivity = "fast"; }),
              HasSubstr("sensitivity: 'fast' is not predicted or exact"));
  EXPECT_THAT(message([](auto& o) { o.verify.sample = "2:9999"; }), HasSubstr("sample"));
  EXPECT_THAT(message([](auto& o) { o.model = "/nonexistent"; }), HasSubstr("/nonexistent"));
}

TEST(MixBudget, WhatTheDeviceLeavesBesideTheJob) {
  absl::StatusOr<Checkpoint> model = Checkpoint::OpenModel(kModel, {});
  ASSERT_TRUE(model.ok()) << model.status();
  uint64_t weights = 0;
  for (const MixGroup& g : MixGroups(*model)) weights += static_cast<uint64_t>(g.weights());
  SizingOptions job;
  job.seq = 256;
  absl::StatusOr<Device> device = FindDevice("toy:3GB");
  ASSERT_TRUE(device.ok());
  absl::StatusOr<DeviceBudget> b = BudgetOnDevice(model->config(), weights, *device, job);
  ASSERT_TRUE(b.ok()) << b.status();
  // K and V of 4 layers x 4 heads x 32 at 256 positions in fp16.
  EXPECT_EQ(b->kv_cache_bytes, 2 * 4 * 4 * 32 * 256 * 2);
  EXPECT_EQ(b->sizing.kv, "fp16");
  // Beside the matrices: the KV cache, the 2 GB of buffers, the 9 norms of
  // 256 at float32 and the forward pass's workspace.
  EXPECT_GT(b->other_bytes, b->kv_cache_bytes + 2'000'000'000 + 9 * 256 * 4);
  EXPECT_EQ(b->capacity_bytes, 3'000'000'000);
  EXPECT_EQ(b->matrices_bytes, b->capacity_bytes - b->other_bytes);
  // The memory model prices the float32 matrices beside the same job as the
  // rest plus 4 bytes a weight.
  SizingOptions f32 = b->sizing;
  absl::StatusOr<SizingReport> r = EstimateMemory(model->config(), f32, *device);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->per_device.total(), b->other_bytes + 4 * static_cast<int64_t>(weights));

  // A device with room for 5 bits per weight beside the job gets that budget.
  const int64_t room = static_cast<int64_t>(5 * weights / 8);
  api::MixOptions o = Small();
  o.bits_per_weight.reset();
  o.device = absl::StrCat("toy:", b->other_bytes + room);
  o.job = job;
  absl::StatusOr<api::MixResult> mix = api::Mix(o);
  ASSERT_TRUE(mix.ok()) << mix.status();
  ASSERT_TRUE(mix->device.has_value());
  EXPECT_EQ(mix->budget_bytes, static_cast<uint64_t>(room));
  EXPECT_LE(mix->rows[0].bytes, static_cast<uint64_t>(room));
  EXPECT_EQ(api::ToJson(*mix)["device"]["matrices_bytes"], room);
  // Too small a device, an unknown one, two budgets.
  o.device = absl::StrCat("toy:", b->other_bytes + 1000);
  EXPECT_THAT(std::string(api::Mix(o).status().message()),
              AllOf(HasSubstr("device: toy leaves 1000 bytes beside the job's"),
                    HasSubstr("below the smallest mix")));
  o.device = "nosuch";
  EXPECT_THAT(std::string(api::Mix(o).status().message()), HasSubstr("device: "));
  o.device = "h100";
  o.bits_per_weight = 4;
  EXPECT_THAT(std::string(api::Mix(o).status().message()), HasSubstr("(one)"));
}

TEST(MixBudget, MatrixWeightsOfAConfigAreTheCheckpointsGroups) {
  absl::StatusOr<Checkpoint> model = Checkpoint::OpenModel(kModel, {});
  ASSERT_TRUE(model.ok()) << model.status();
  uint64_t weights = 0;
  for (const MixGroup& g : MixGroups(*model)) weights += static_cast<uint64_t>(g.weights());
  EXPECT_EQ(MixMatrixWeights(model->config()), weights);
  // Llama 3.1 8B: 128256 x 4096 embedding and lm_head (untied), 32 layers of
  // 4096 x (4096 + 1024 + 1024 + 4096) + 3 x 4096 x 14336.
  absl::StatusOr<ModelConfig> llama = FindModel("llama-3.1-8b");
  ASSERT_TRUE(llama.ok());
  EXPECT_EQ(MixMatrixWeights(*llama),
            2ull * 128256 * 4096 + 32ull * (4096ull * 10240 + 3ull * 4096 * 14336));
}

TEST(PlanMix, PerDeviceTheMixForWhatTheDeviceLeaves) {
  absl::StatusOr<Checkpoint> model = Checkpoint::OpenModel(kModel, {});
  ASSERT_TRUE(model.ok()) << model.status();
  const uint64_t weights = MixMatrixWeights(model->config());
  SizingOptions job;
  job.mode = Mode::kInference;
  job.seq = 256;
  job.kv = "bf16";
  absl::StatusOr<Device> probe = FindDevice("probe:3GB");
  ASSERT_TRUE(probe.ok());
  absl::StatusOr<DeviceBudget> b = BudgetOnDevice(model->config(), weights, *probe, job);
  ASSERT_TRUE(b.ok()) << b.status();
  const int64_t room = static_cast<int64_t>(5 * weights / 8);
  api::PlanJobOptions o;
  o.model = kModel;
  o.sizing = job;
  o.formats = {"q8_0"};
  o.devices = {absl::StrCat("five:", b->other_bytes + room), absl::StrCat("none:", b->other_bytes + 1000)};
  o.tensor_files = {kModel + "/model.safetensors"};
  o.mix = true;
  o.mix_types = {"q4_K", "q8_0"};
  o.mix_tune_sample = "2:32";
  o.eval_sample = "2:48";
  o.threads = 2;
  absl::StatusOr<Plan> plan = api::PlanJob(o);
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_TRUE(plan->mix.has_value());
  ASSERT_EQ(plan->mix->devices.size(), 2u);
  const PlanMix& m = plan->mix->devices[0];
  ASSERT_TRUE(m.possible) << m.reason;
  EXPECT_EQ(m.budget_bytes, room);
  EXPECT_EQ(m.other_bytes, b->other_bytes);
  EXPECT_NEAR(m.budget_bits_per_weight, 5, 1e-5);
  EXPECT_LE(m.bits_per_weight, m.budget_bits_per_weight);
  EXPECT_LE(m.per_device_bytes, m.capacity_bytes);
  ASSERT_TRUE(m.end_to_end.has_value());
  EXPECT_FALSE(plan->eval->proxy);
  // The snapshot plans itself: its rules through eval on the plan's tokens
  // give the plan's KL.
  api::EvalOptions e;
  e.model = kModel;
  e.sample = "2:48";
  e.weights = m.weights_option;
  e.threads = 2;
  absl::StatusOr<api::EvalResult> eval = api::Eval(e);
  ASSERT_TRUE(eval.ok()) << eval.status();
  EXPECT_EQ(eval->report.candidates[0].kl.mean, m.end_to_end->kl_mean);
  EXPECT_FALSE(plan->mix->devices[1].possible);
  EXPECT_THAT(plan->mix->devices[1].reason, HasSubstr("below the smallest mix"));
  // The JSON has both.
  const nlohmann::json j = api::ToJson(*plan);
  EXPECT_EQ(j["mix"]["devices"].size(), 2u);
  EXPECT_EQ(j["mix"]["devices"][1]["possible"], false);
  // Serving only, one device per replica; the mix's own options named.
  o.sizing.mode = Mode::kPretrain;
  o.formats = {"bf16"};
  EXPECT_THAT(std::string(api::PlanJob(o).status().message()), HasSubstr("mix: "));
  o.sizing = job;
  o.sizing.tp = 2;
  EXPECT_THAT(std::string(api::PlanJob(o).status().message()), HasSubstr("one device per replica"));
  o.sizing = job;
  o.formats = {"q8_0"};
  o.mix_types = {"bogus"};
  EXPECT_THAT(std::string(api::PlanJob(o).status().message()), HasSubstr("mix_types: bogus"));
}

}  // namespace
}  // namespace lowp

namespace lowp {
namespace {

using ::testing::ElementsAre;

// Phi-3's q, k, v (and gate, up) are one tensor of one type in a llama.cpp
// file: one group each, whose rule names its members and whose llama-quantize
// option names the fused tensor; DeepSeek's kv_b is llama.cpp's attn_k_b and
// attn_v_b.
TEST(MixGroups, FusedTensorsAndSplitKvB) {
  MixGroup qkv{"model.layers.2.self_attn.qkv_proj.weight", "blk.2.attn_qkv.weight", 96, 64, 2};
  qkv.members = {"model.layers.2.self_attn.q_proj.weight", "model.layers.2.self_attn.k_proj.weight",
                 "model.layers.2.self_attn.v_proj.weight"};
  EXPECT_EQ(qkv.pattern(), absl::StrJoin(qkv.members, ","));
  EXPECT_THAT(MixRules({qkv}, {"q8_0"}),
              ElementsAre("model.layers.2.self_attn.q_proj.weight=q8_0",
                          "model.layers.2.self_attn.k_proj.weight=q8_0",
                          "model.layers.2.self_attn.v_proj.weight=q8_0"));
  MixGroup kv_b{"model.layers.2.self_attn.kv_b_proj.weight", "blk.2.attn_kv_b.weight", 64, 32, 2};
  absl::StatusOr<LlamaQuantizeCommand> line = LlamaQuantizeArguments({qkv, kv_b}, {"q8_0", "q4_0"});
  ASSERT_TRUE(line.ok()) << line.status();
  EXPECT_THAT(line->options, ElementsAre("--tensor-type", "blk\\.2\\.attn_qkv\\.weight=q8_0",
                                         "--tensor-type", "blk\\.2\\.attn_k_b\\.weight=q4_0",
                                         "--tensor-type", "blk\\.2\\.attn_v_b\\.weight=q4_0"));
}

}  // namespace
}  // namespace lowp
