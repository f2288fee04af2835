// The training-state numerics of `lowp update-error` (optim/): AdamW's
// float64 step and schedule by hand, the recipes and their bytes,
// bitsandbytes' dynamic maps and quantizer, and what the recipes do to
// updates: fp32 follows the reference, bf16 without a master copy loses
// updates below half an ulp, stochastic rounding keeps them on average,
// Kahan summation recovers them, 8-bit states track fp32.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "formats/option_error.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "optim/adamw.h"
#include "optim/dynamic_map.h"
#include "optim/recipe.h"
#include "optim/update_error.h"

namespace lowp {
namespace {

using ::testing::HasSubstr;

TEST(AdamW, OneStepByHand) {
  // t = 1 from p = 1, g = 0.5: m = 0.05, v = 0.0125; m^ = 0.5, v^ = 0.25,
  // so the step is lr * 0.5 / (0.5 + eps): about lr, Adam's first step.
  AdamWOptions o;
  o.lr = 0.1;
  o.beta1 = 0.9;
  o.beta2 = 0.95;
  o.eps = 1e-8;
  o.weight_decay = 0;
  AdamWState64 s{1.0, 0, 0};
  AdamWStep64(o, AdamWCorrections(o, 1), o.lr, 0.5, s);
  EXPECT_DOUBLE_EQ(s.m, 0.05);
  EXPECT_NEAR(s.v, 0.0125, 1e-16);
  EXPECT_NEAR(s.p, 1.0 - 0.1 * 0.5 / (0.5 + 1e-8), 1e-15);
  // Decoupled decay first: p = 1 - 0.1 * 0.1 * 1 = 0.99, then the step.
  o.weight_decay = 0.1;
  AdamWState64 d{1.0, 0, 0};
  AdamWStep64(o, AdamWCorrections(o, 1), o.lr, 0.5, d);
  EXPECT_NEAR(d.p, 0.99 - 0.1 * 0.5 / (0.5 + 1e-8), 1e-15);
  // Step 2 with g = -0.5: m = 0.9 * 0.05 - 0.05 = -0.005, v = 0.95 * 0.0125 +
  // 0.0125 = 0.024375; m^ = -0.005 / 0.19, v^ = 0.024375 / 0.0975 = 0.25.
  o.weight_decay = 0;
  AdamWStep64(o, AdamWCorrections(o, 2), o.lr, -0.5, s);
  EXPECT_NEAR(s.m, -0.005, 1e-15);
  EXPECT_NEAR(s.v, 0.024375, 1e-15);
  EXPECT_NEAR(s.p, 1.0 - 0.1 * 0.5 / (0.5 + 1e-8) + 0.1 * (0.005 / 0.19) / (0.5 + 1e-8), 1e-14);
}

TEST(AdamW, Schedules) {
  AdamWOptions o;
  o.lr = 1.0;
  o.steps = 12;
  EXPECT_EQ(LearningRate(o, 1), 1.0);
  EXPECT_EQ(LearningRate(o, 12), 1.0);
  o.schedule = "cosine";
  o.warmup = 1;
  o.min_lr_ratio = 0.1;
  EXPECT_DOUBLE_EQ(LearningRate(o, 1), 0.5);  // warmup: t / (warmup + 1)
  EXPECT_DOUBLE_EQ(LearningRate(o, 2), 1.0);  // the cosine's start
  EXPECT_NEAR(LearningRate(o, 12), 0.1, 1e-15);
  EXPECT_NEAR(LearningRate(o, 7), 0.55, 1e-15);  // halfway (steps 2..12): the mean of 1 and 0.1
}

TEST(AdamW, BadOptionsNameTheField) {
  auto field = [](auto set) {
    AdamWOptions o;
    set(o);
    absl::Status s = ValidateAdamW(o);
    EXPECT_FALSE(s.ok());
    return OptionOf(s).value_or("");
  };
  EXPECT_EQ(field([](AdamWOptions& o) { o.lr = -1e-4; }), "lr");
  EXPECT_EQ(field([](AdamWOptions& o) { o.lr = NAN; }), "lr");
  EXPECT_EQ(field([](AdamWOptions& o) { o.beta1 = 1; }), "beta1");
  EXPECT_EQ(field([](AdamWOptions& o) { o.beta2 = -0.1; }), "beta2");
  EXPECT_EQ(field([](AdamWOptions& o) { o.eps = 0; }), "eps");
  EXPECT_EQ(field([](AdamWOptions& o) { o.weight_decay = -1; }), "weight-decay");
  EXPECT_EQ(field([](AdamWOptions& o) { o.steps = 0; }), "steps");
  EXPECT_EQ(field([](AdamWOptions& o) { o.steps = int64_t{1} << 40; }), "steps");
  EXPECT_EQ(field([](AdamWOptions& o) { o.schedule = "linear"; }), "schedule");
  EXPECT_EQ(field([](AdamWOptions& o) { o.warmup = 100; }), "warmup");
  UpdateErrorOptions u;
  u.grad_scale = 0;
  EXPECT_EQ(OptionOf(ValidateUpdateError(u)).value_or(""), "grad-scale");
}

TEST(Recipes, BytesPerParameterLadder) {
  auto bytes = [](const char* name) { return ParseTrainingRecipe(name)->BytesPerParameter(); };
  EXPECT_EQ(bytes("fp32"), 16);
  EXPECT_EQ(bytes("fp32-master"), 16);  // 2 + 2 + 4 + 4 + 4
  EXPECT_EQ(bytes("bf16-kahan"), 14);
  EXPECT_EQ(bytes("bf16-rne"), 12);
  EXPECT_EQ(bytes("bf16-sr"), 12);
  EXPECT_EQ(bytes("fp32-master-8bit"), 10 + 8.0 / 256);  // the block absmaxes
  EXPECT_EQ(bytes("bf16-sr-bf16-moments"), 8);
  EXPECT_EQ(bytes("bf16-sr-8bit"), 6 + 8.0 / 256);
  EXPECT_EQ(bytes("fp8-grads"), 15);
  for (const TrainingRecipe& r : TrainingRecipes()) {
    absl::StatusOr<TrainingRecipe> again = ParseTrainingRecipe(r.Spelling());
    ASSERT_TRUE(again.ok()) << r.Spelling() << ": " << again.status();
    EXPECT_EQ(again->BytesPerParameter(), r.BytesPerParameter()) << r.name;
  }
}

TEST(Recipes, SpellingsAndRefusals) {
  absl::StatusOr<TrainingRecipe> r = ParseTrainingRecipe("weights=bf16+update=sr+moments=8bit");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->grads.name, "bf16");  // the weights' format when not given
  EXPECT_FALSE(r->master);
  for (const char* bad : {"nosuch", "grads=bf16", "weights=int8", "weights=bf16+master=fp16",
                          "weights=bf16+master=fp32+update=sr", "weights=bf16+moments=int4",
                          "weights=bf16+weights=fp32", "weights=bf16+color=red"}) {
    absl::StatusOr<TrainingRecipe> s = ParseTrainingRecipe(bad);
    ASSERT_FALSE(s.ok()) << bad;
    EXPECT_THAT(std::string(s.status().message()), HasSubstr(bad)) << bad;
  }
  EXPECT_THAT(std::string(ParseTrainingRecipe("grads=bf16").status().message()),
              HasSubstr("names no weights format"));
}

// The maps as tests/data/bnb/dynamic_maps.txt gives them (an independent
// NumPy emulation of bitsandbytes' create_dynamic_map).
std::vector<uint32_t> GoldenMap(const std::string& which) {
  std::ifstream in(std::string(LOWP_TEST_DATA_DIR) + "/bnb/dynamic_maps.txt");
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream words(line);
    std::string name;
    words >> name;
    if (name != which) continue;
    std::vector<uint32_t> bits;
    std::string hex;
    while (words >> hex) bits.push_back(static_cast<uint32_t>(std::stoul(hex, nullptr, 16)));
    return bits;
  }
  return {};
}

TEST(DynamicMap, EqualsBitsandbytesMapsBitForBit) {
  for (bool is_signed : {true, false}) {
    const std::vector<uint32_t> golden = GoldenMap(is_signed ? "signed" : "unsigned");
    ASSERT_EQ(golden.size(), 256u);
    const std::array<float, 256>& map = DynamicMap(is_signed);
    for (int i = 0; i < 256; ++i) {
      uint32_t bits;
      std::memcpy(&bits, &map[i], 4);
      EXPECT_EQ(bits, golden[i]) << (is_signed ? "signed " : "unsigned ") << i << " " << map[i];
    }
  }
  EXPECT_EQ(DynamicMap(true)[127], 0.0f);
  EXPECT_EQ(DynamicMap(true)[255], 1.0f);
  EXPECT_FLOAT_EQ(DynamicMap(true)[0], -0.99296874f);
  EXPECT_EQ(DynamicMap(false)[0], 0.0f);
}

TEST(DynamicMap, NearestByFloatMidpointsTiesToEvenAndTheSignFixUp) {
  for (bool is_signed : {true, false}) {
    const std::array<float, 256>& map = DynamicMap(is_signed);
    std::mt19937 rng(3);
    std::uniform_real_distribution<float> u(is_signed ? -1.0f : 0.0f, 1.0f);
    for (int k = 0; k < 20000; ++k) {
      const float x = k % 2 ? u(rng) : u(rng) * 1e-3f;
      // Brute force: the code whose float32 midpoints bracket x.
      int want = 0;
      while (want < 255 && x > (map[want] + map[want + 1]) * 0.5f) ++want;
      if (want < 255 && x == (map[want] + map[want + 1]) * 0.5f && want % 2 == 1) ++want;
      if (is_signed && std::signbit(x) && !std::signbit(map[want])) --want;
      ASSERT_EQ(QuantizeDynamic(map, is_signed, x), want) << x;
    }
    // Every exact midpoint goes to the even index of its pair.
    for (int a = 0; a < 255; ++a) {
      const float mid = (map[a] + map[a + 1]) * 0.5f;
      if (mid == map[a] || mid == map[a + 1]) continue;
      int q = QuantizeDynamic(map, is_signed, mid);
      const int even = a % 2 == 0 ? a : a + 1;
      if (is_signed && std::signbit(mid) && !std::signbit(map[even])) {
        EXPECT_EQ(q, even - 1) << a;
      } else {
        EXPECT_EQ(q, even) << a;
      }
    }
  }
  // A tiny negative moment never stores as +0: code 126, not 127.
  EXPECT_EQ(QuantizeDynamic(DynamicMap(true), true, -1e-12f), 126);
  EXPECT_EQ(QuantizeDynamic(DynamicMap(true), true, 1e-12f), 127);
  EXPECT_EQ(QuantizeDynamic(DynamicMap(true), true, NAN), 0);
  // Blocks of 256: each scaled by its own absmax.
  std::vector<float> x(300, 0.25f);
  x[0] = 1.0f;
  x[299] = 4.0f;
  RoundTripDynamic(false, x);
  EXPECT_EQ(x[0], 1.0f);
  EXPECT_EQ(x[299], 4.0f);
  EXPECT_NEAR(x[1], 0.25f, 0.25f * 0.02f);
}

// Runs the named recipes on n values of N(0, 0.02^2).
std::vector<UpdateReport> RunRecipes(const std::vector<std::string>& names, UpdateErrorOptions o,
                                     int64_t n = 1 << 14) {
  std::mt19937 rng(11);
  std::normal_distribution<float> normal(0.0f, 0.02f);
  std::vector<float> w(static_cast<size_t>(n));
  for (float& v : w) v = normal(rng);
  std::vector<TrainingRecipe> recipes;
  for (const std::string& name : names) recipes.push_back(*ParseTrainingRecipe(name));
  std::vector<UpdateReport> reports(recipes.size());
  absl::Status s = MeasureUpdates("w", w, 0, o, recipes, reports);
  EXPECT_TRUE(s.ok()) << s;
  return reports;
}

TEST(UpdateError, Fp32FollowsTheReference) {
  UpdateErrorOptions o;
  o.adamw.lr = 1e-3;
  o.adamw.steps = 40;
  const std::vector<UpdateReport> r = RunRecipes({"fp32"}, o);
  EXPECT_EQ(r[0].steps, 40);
  EXPECT_EQ(r[0].elements, 1u << 14);
  EXPECT_LT(r[0].weight_relative_error(), 1e-4);
  EXPECT_LT(r[0].updates_lost(), 1e-3);
  EXPECT_NEAR(r[0].update_ratio(), 1.0, 1e-4);
  EXPECT_LT(r[0].m_relative_error(), 1e-5);
  EXPECT_LT(r[0].v_relative_error(), 1e-5);
}

TEST(UpdateError, SmallUpdatesBf16LosesSrKeepsOnAverageKahanRecovers) {
  // lr 1e-5 on weights of 0.02: Adam's steps of about 1e-5 against bf16's
  // ulp of 2^-13..2^-14 at 0.02 (6e-5..1.2e-4): below half an ulp, so
  // nearest-even rounds nearly all of them away.
  UpdateErrorOptions o;
  o.adamw.lr = 1e-5;
  o.adamw.steps = 96;
  o.adamw.weight_decay = 0;
  const std::vector<UpdateReport> r =
      RunRecipes({"bf16-rne", "bf16-sr", "bf16-kahan", "fp32-master"}, o, 1 << 14);
  const UpdateReport &rne = r[0], &sr = r[1], &kahan = r[2], &master = r[3];
  EXPECT_GT(rne.updates_lost(), 0.8);
  EXPECT_LT(rne.update_ratio(), 0.2);
  EXPECT_GT(rne.weight_relative_error(), 0.8);
  // Stochastic rounding: each update arrives with probability |u| / ulp, so
  // the applied total matches the intended on average. Over 96 x 16384
  // element-steps the ratio's standard deviation is below 0.01 (each
  // element-step's applied/intended is a Bernoulli of mean 1 scaled by
  // ulp/|u| <= ~20; sqrt(20 / 1.5e6) < 0.004): 0.1 is over ten of them.
  EXPECT_NEAR(sr.update_ratio(), 1.0, 0.1);
  EXPECT_LT(sr.weight_relative_error(), rne.weight_relative_error());
  // Kahan: the compensation carries what rounding dropped into later steps.
  EXPECT_NEAR(kahan.update_ratio(), 1.0, 0.1);
  EXPECT_LT(kahan.weight_relative_error(), 0.3);
  EXPECT_LT(kahan.weight_relative_error(), sr.weight_relative_error());
  EXPECT_LT(master.weight_relative_error(), 0.01);
  EXPECT_LT(master.updates_lost(), 0.01);
}

TEST(UpdateError, EightBitStatesTrackFp32) {
  UpdateErrorOptions o;
  o.adamw.lr = 1e-3;
  o.adamw.steps = 20;
  const std::vector<UpdateReport> r =
      RunRecipes({"fp32-master", "fp32-master-8bit", "fp32-master-fp8-moments"}, o);
  EXPECT_LT(r[0].m_relative_error(), 0.01);  // bf16 gradients only
  EXPECT_LT(r[1].m_relative_error(), 0.1);
  EXPECT_LT(r[1].v_relative_error(), 0.1);
  EXPECT_GT(r[1].m_relative_error(), r[0].m_relative_error());
  EXPECT_LT(r[1].weight_relative_error(), 0.1);
  EXPECT_LT(r[2].weight_relative_error(), 0.1);
}

TEST(UpdateError, GradientsOfFp16AndFp8AreScaledPerTensor) {
  // Gradients of rms 2e-5: unscaled fp16 would flush a share of them to
  // subnormals and zero; scaled, none is lost and none overflows.
  UpdateErrorOptions o;
  o.adamw.steps = 4;
  const std::vector<UpdateReport> r = RunRecipes({"fp16-master", "fp8-grads"}, o);
  EXPECT_EQ(r[0].census.grad_overflow, 0u);
  EXPECT_EQ(r[0].census.grad_underflow, 0u);
  EXPECT_LT(r[1].census.grad_underflow, r[1].elements * 4 / 100);
  const std::vector<UpdateReport> unscaled = RunRecipes({"weights=bf16+master=fp32+grads=fp16"}, o);
  EXPECT_EQ(unscaled[0].census.grad_underflow, 0u);  // fp16 given alone is scaled too
}

TEST(UpdateError, SameResultOnAnyThreadCountAndRefusesNonFinite) {
  UpdateErrorOptions o;
  o.adamw.steps = 6;
  o.threads = 1;
  const std::vector<UpdateReport> one = RunRecipes({"bf16-sr-8bit", "bf16-kahan"}, o, 20000);
  o.threads = 2;
  const std::vector<UpdateReport> two = RunRecipes({"bf16-sr-8bit", "bf16-kahan"}, o, 20000);
  for (size_t r = 0; r < one.size(); ++r) {
    EXPECT_EQ(one[r].lost, two[r].lost);
    EXPECT_EQ(one[r].applied_dot_intended, two[r].applied_dot_intended);
    EXPECT_EQ(one[r].error_squared, two[r].error_squared);
  }
  std::vector<float> w = {0.1f, NAN};
  std::vector<TrainingRecipe> recipes = {*ParseTrainingRecipe("fp32")};
  std::vector<UpdateReport> reports(1);
  absl::Status s = MeasureUpdates("layers.0.w", w, 0, o, recipes, reports);
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(std::string(s.message()), HasSubstr("layers.0.w"));
}

TEST(UpdateError, ReadsATensorABlockAtATimeAndPassesReadErrorsOn) {
  // 1.5 M elements: read in blocks of at most 2^20 (4 MiB), twice over,
  // whatever the tensor's size; a reader's error comes back as it is.
  const int64_t n = 3 << 19;
  std::vector<float> w(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) w[i] = 0.02f * std::sin(static_cast<float>(i));
  size_t largest = 0, total = 0;
  const ValueReader read = [&](int64_t first, std::span<float> out) {
    largest = std::max(largest, out.size());
    total += out.size();
    std::copy_n(w.begin() + first, out.size(), out.begin());
    return absl::OkStatus();
  };
  UpdateErrorOptions o;
  o.adamw.steps = 1;
  const std::vector<TrainingRecipe> recipes = {*ParseTrainingRecipe("bf16-rne")};
  std::vector<UpdateReport> streamed(1), whole(1);
  ASSERT_TRUE(MeasureUpdates("w", n, read, 0, o, recipes, streamed).ok());
  EXPECT_LE(largest, size_t{1} << 20);
  EXPECT_EQ(total, 2 * static_cast<size_t>(n));
  ASSERT_TRUE(MeasureUpdates("w", w, 0, o, recipes, whole).ok());
  EXPECT_EQ(streamed[0].lost, whole[0].lost);
  EXPECT_EQ(streamed[0].elements, static_cast<uint64_t>(n));
  const ValueReader shrinking = [&](int64_t first, std::span<float> out) {
    if (first > 0) return absl::DataLossError("w.safetensors shrank while read");
    std::copy_n(w.begin(), out.size(), out.begin());
    return absl::OkStatus();
  };
  absl::Status s = MeasureUpdates("w", n, shrinking, 0, o, recipes, streamed);
  EXPECT_THAT(std::string(s.message()), HasSubstr("shrank"));
}

}  // namespace
}  // namespace lowp
