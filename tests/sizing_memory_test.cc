// The memory model against known answers: the seeds' cases, the ZeRO
// paper's partitioning, Korthikanti et al.'s activation formulas on GPT-3
// 175B's shape, the KV cache of Llama 3 70B, and exact byte counts derived
// by hand from each model's tensor shapes.
#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>

#include "gmock/gmock.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "formats/option_error.h"
#include "sizing/memory.h"
#include "model/config.h"

namespace lowp {
namespace {

using ::testing::HasSubstr;

const Device kH100{"h100-sxm", "test", 80'000'000'000, 3.35e12, "test"};

ModelConfig Model(const char* name) {
  absl::StatusOr<ModelConfig> m = FindModel(name);
  EXPECT_TRUE(m.ok()) << m.status();
  return *m;
}

SizingReport Estimate(const ModelConfig& model, const SizingOptions& options,
                      const Device& device = kH100) {
  absl::StatusOr<SizingReport> r = EstimateMemory(model, options, device);
  EXPECT_TRUE(r.ok()) << r.status();
  return r.ok() ? *r : SizingReport{};
}

// Llama 3.1 405B, mixed-precision AdamW: 16 bytes per parameter, 6.49 TB,
// 81.17 devices of 80e9 bytes before rounding up to 82.
TEST(SizingMemoryTest, Llama405BTrainingStatesAreSixteenBytesPerParameter) {
  const ModelConfig m = Model("llama-3.1-405b");
  SizingOptions o;
  o.buffers_bytes = 0;
  const SizingReport r = Estimate(m, o);
  const int64_t p = 405'853'388'800;
  ASSERT_EQ(r.parameters.total, p);
  EXPECT_EQ(r.trainable_parameters, p);
  EXPECT_EQ(r.whole.weights, 2 * p);
  EXPECT_EQ(r.whole.gradients, 2 * p);
  EXPECT_EQ(r.whole.master, 4 * p);
  EXPECT_EQ(r.whole.optimizer, 8 * p);
  EXPECT_EQ(r.whole.model_states(), int64_t{6'493'654'220'800});
  EXPECT_NEAR(r.devices_for_states_exact, 81.17, 0.005);
  EXPECT_EQ(r.devices_for_states, 82);
  EXPECT_EQ(r.options.weights, "bf16");
  EXPECT_EQ(r.options.grads, "bf16");
  EXPECT_EQ(r.options.master, "fp32");
  EXPECT_EQ(r.options.opt_state, "fp32");
  // DeepSpeed's convention (fp32 gradients): 18 bytes per parameter.
  o.grads = "fp32";
  EXPECT_EQ(Estimate(m, o).whole.model_states(), 18 * p);
  // Pure bf16 training without a master copy: 12.
  o.grads = "";
  o.master = "none";
  EXPECT_EQ(Estimate(m, o).whole.model_states(), 12 * p);
}

// A 70B model's fp16 weights take 141 GB: two 80 GB devices at least.
TEST(SizingMemoryTest, Llama70BInFp16NeedsTwoDevicesForItsWeights) {
  const ModelConfig m = Model("llama-3.1-70b");
  SizingOptions o;
  o.mode = Mode::kInference;
  o.weights = "fp16";
  o.seq = 1;
  o.buffers_bytes = 0;
  const SizingReport r = Estimate(m, o);
  EXPECT_EQ(r.options.embed, "fp16");
  EXPECT_EQ(r.whole.weights, 2 * int64_t{70'553'706'496});
  EXPECT_EQ(r.devices_for_states, 2);
  EXPECT_FALSE(r.fits);
  o.tp = 2;
  EXPECT_TRUE(Estimate(m, o).fits);
}

// In int4 with groups of 128 and fp16 scales (4.125 bits per weight) the
// linear layers of a 70B model and its bf16 embeddings fit one 80 GB device
// with an 8K context.
// Dense layers among the experts' (Qwen3-MoE's mlp_only_layers and
// decoder_sparse_step, DeepSeek-V3's first_k_dense_replace) are counted as
// what they are: in bf16 throughout, the weights are 2 bytes a parameter
// however the layers mix.
TEST(SizingMemoryTest, DenseLayersAmongExpertsAreCountedAsDense) {
  ModelConfig m = Model("qwen3-30b-a3b");
  SizingOptions o;
  o.mode = Mode::kInference;
  const int64_t all_moe = Estimate(m, o).whole.weights;
  EXPECT_EQ(all_moe, 2 * CountParameters(m).total);
  m.mlp_only_layers = {0, 5};
  const SizingReport two_dense = Estimate(m, o);
  EXPECT_EQ(two_dense.whole.weights, 2 * CountParameters(m).total);
  // Each dense layer trades the router and 128 experts of 768 for one MLP
  // of 6144.
  const int64_t per_layer = 3 * 2048 * (6144 - 128 * 768) - 128 * 2048;
  EXPECT_EQ(two_dense.whole.weights - all_moe, 2 * 2 * per_layer);
  m.mlp_only_layers.clear();
  m.decoder_sparse_step = 2;
  EXPECT_EQ(Estimate(m, o).whole.weights - all_moe, 2 * 24 * per_layer);
  // Pipeline stages hold their own layers: of 48 layers in 4 stages of 12,
  // the last holds lm_head and is the heaviest, unless its layers are the
  // dense ones; then the first, with the embedding.
  m.decoder_sparse_step = 1;
  o.pp = 4;
  EXPECT_EQ(Estimate(m, o).pipeline_stage, 3);
  for (int64_t layer = 36; layer < 48; ++layer) m.mlp_only_layers.push_back(layer);
  EXPECT_EQ(Estimate(m, o).pipeline_stage, 0);
  const ModelConfig deepseek = Model("deepseek-v3");
  o.pp = 1;
  EXPECT_EQ(Estimate(deepseek, o).whole.weights, 2 * CountParameters(deepseek).total);
}

// Multi-head latent attention caches each token's 512-wide latent and its
// 64-wide shared rotated key in every layer, whole on every tensor-parallel
// device: 61 x 576 values of 2 bytes a token for DeepSeek-V3, 70,272 bytes
// (a llama of its 128 heads of 192 and 128 would cache 61 x 128 x 320).
TEST(SizingMemoryTest, LatentAttentionCachesTheLatent) {
  const ModelConfig m = Model("deepseek-v3");
  SizingOptions o;
  o.mode = Mode::kInference;
  o.seq = 4096;
  o.batch = 2;
  SizingReport r = Estimate(m, o);
  EXPECT_EQ(r.per_device.kv_cache, int64_t{61} * 576 * 2 * 4096 * 2);
  o.tp = 8;
  r = Estimate(m, o);
  EXPECT_EQ(r.per_device.kv_cache, int64_t{61} * 576 * 2 * 4096 * 2);
  o.kv = "fp8_e4m3fn";
  EXPECT_EQ(Estimate(m, o).per_device.kv_cache, int64_t{61} * 576 * 4096 * 2);
  // Training counts the heads' keys and values, expanded from the latents.
  SizingOptions t;
  t.seq = 4096;
  t.tp = 8;
  t.pp = 8;
  EXPECT_GT(Estimate(m, t).per_device.activations, 0);
}

// Qwen3-MoE's experts are moe_intermediate_size wide; intermediate_size
// (of dense layers it has none of) changes no figure, in serving or
// training; the expert width does.
TEST(SizingMemoryTest, MoeActivationsTakeTheExpertsWidth) {
  ModelConfig m = Model("qwen3-30b-a3b");
  for (Mode mode : {Mode::kInference, Mode::kPretrain}) {
    SizingOptions o;
    o.mode = mode;
    const SizingReport base = Estimate(m, o);
    ModelConfig wider = m;
    wider.intermediate_size *= 4;
    EXPECT_EQ(Estimate(wider, o).per_device.activations, base.per_device.activations);
    wider = m;
    wider.moe_intermediate_size *= 4;
    EXPECT_GT(Estimate(wider, o).per_device.activations, base.per_device.activations);
  }
}

TEST(SizingMemoryTest, Llama70BInInt4FitsOneDevice) {
  const ModelConfig m = Model("llama-3.1-70b");
  const ParameterCounts c = CountParameters(m);
  SizingOptions o;
  o.mode = Mode::kInference;
  o.weights = "int4-g128";
  o.seq = 8192;
  const SizingReport r = Estimate(m, o);
  EXPECT_EQ(r.options.embed, "bf16");
  EXPECT_DOUBLE_EQ(r.linear_bits_per_parameter, 4.125);
  // Every linear's input width (8192, 28672) is a multiple of 128: 4 bits
  // per weight and 16 per group of 128.
  const int64_t linear = c.attention + c.mlp;  // no attention biases in Llama
  const int64_t high = c.embedding + c.lm_head + c.norms;
  EXPECT_EQ(r.whole.weights, linear / 2 + linear / 128 * 2 + 2 * high);
  EXPECT_EQ(r.per_device.kv_cache, int64_t{2'684'354'560});
  EXPECT_TRUE(r.fits);
  EXPECT_EQ(r.devices_needed, 1);
  EXPECT_GT(r.max_seq, 8192);
  // The decode bound: every weight and the whole cache read once per token.
  EXPECT_EQ(r.bytes_read_per_step, r.per_device.weights + r.per_device.kv_cache);
  EXPECT_DOUBLE_EQ(r.decode_tokens_per_s_per_sequence,
                   3.35e12 / static_cast<double>(r.bytes_read_per_step));
}

// 2 x layers x kv_heads x head_dim x bytes x tokens x sequences, with the
// KV heads of grouped-query attention (8, not 64).
TEST(SizingMemoryTest, KvCacheCountsGroupedQueryHeads) {
  const ModelConfig m = Model("llama-3.1-70b");
  SizingOptions o;
  o.mode = Mode::kInference;
  o.seq = 8192;
  EXPECT_EQ(Estimate(m, o).per_device.kv_cache, int64_t{2'684'354'560});
  o.batch = 3;
  o.seq = 1000;
  EXPECT_EQ(Estimate(m, o).per_device.kv_cache, 2LL * 80 * 8 * 128 * 2 * 1000 * 3);
  // fp8 halves it; int4 groups of 128 along head_dim add one fp16 scale per
  // head and token: 4.125 bits.
  o.kv = "fp8_e4m3fn";
  EXPECT_EQ(Estimate(m, o).per_device.kv_cache, 2LL * 80 * 8 * 128 * 1000 * 3);
  o.kv = "int4-g128";
  EXPECT_EQ(Estimate(m, o).per_device.kv_cache, 2LL * 80 * 8 * (64 + 2) * 1000 * 3);
  // Tensor parallelism divides the KV heads; beyond 8 devices each keeps one.
  o.kv = "";
  o.tp = 8;
  EXPECT_EQ(Estimate(m, o).per_device.kv_cache, 2LL * 80 * 1 * 128 * 2 * 1000 * 3);
  o.tp = 16;
  EXPECT_EQ(Estimate(m, o).per_device.kv_cache, 2LL * 80 * 1 * 128 * 2 * 1000 * 3);
}

int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

// ZeRO (Rajbhandari et al. 2020, Figure 1): 7.5B parameters on 64 devices
// hold 120 / 31.4 / 16.6 / 1.9 GB of model states per device at stages 0-3.
TEST(SizingMemoryTest, ZeroStagesPartitionAsThePaperDefines) {
  const ModelConfig m = Model("llama-2-7b");
  const int64_t p = m.name.empty() ? 0 : CountParameters(m).total;
  SizingOptions o;
  o.dp = 64;
  const int64_t expected[4] = {
      16 * p, 2 * p + 2 * p + CeilDiv(4 * p, 64) + CeilDiv(8 * p, 64),
      2 * p + CeilDiv(2 * p, 64) + CeilDiv(4 * p, 64) + CeilDiv(8 * p, 64),
      CeilDiv(2 * p, 64) + CeilDiv(2 * p, 64) + CeilDiv(4 * p, 64) + CeilDiv(8 * p, 64)};
  for (int stage = 0; stage <= 3; ++stage) {
    o.zero = stage;
    const SizingReport r = Estimate(m, o);
    EXPECT_EQ(r.per_device.model_states(), expected[stage]) << "stage " << stage;
    // The paper's figures for 7.5B parameters, from the same per-parameter
    // bytes the estimate gives for this model.
    const double per_parameter = static_cast<double>(r.per_device.model_states()) / p;
    const double paper[4] = {120, 31.4, 16.6, 1.9};
    EXPECT_NEAR(per_parameter * 7.5, paper[stage], 0.05) << "stage " << stage;
  }
  // Stage 3 gathers one decoder layer (202,383,360 parameters, larger than
  // the 32000 x 4096 embedding and lm_head) for its forward and backward:
  // its bf16 weights and its full bf16 gradient before the reduce-scatter.
  o.zero = 3;
  const SizingReport r = Estimate(m, o);
  const int64_t layer = 4 * 4096LL * 4096 + 3 * 4096LL * 11008 + 2 * 4096;
  ASSERT_GT(layer, 32000LL * 4096);
  EXPECT_EQ(r.per_device.workspace, 2 * layer + 2 * layer);
}

// ZeRO-3's workspace is the largest unit it gathers whole: a decoder layer,
// the embedding or the lm_head (each tensor outside the layers is its own
// unit, as DeepSpeed gathers module by module), in its stored format, plus
// that unit's full gradient before the reduce-scatter where it is trained.
// Llama 3.1's lm_head, 128256 x 4096 = 525,336,576 parameters in the 8B,
// is larger than a decoder layer (218,112,000); so is the 70B's.
TEST(SizingMemoryTest, ZeroThreeGathersTheLargestUnitWithItsGradient) {
  const int64_t vocab = 128256;
  SizingOptions o;
  o.zero = 3;
  o.dp = 8;
  const ModelConfig m8 = Model("llama-3.1-8b");
  const int64_t head8 = vocab * 4096;
  ASSERT_EQ(head8, 525'336'576);
  const int64_t layer8 = 2 * 4096LL * 4096 + 2 * 1024LL * 4096 + 3 * 4096LL * 14336 + 2 * 4096;
  ASSERT_EQ(layer8, 218'112'000);
  // Pretraining: bf16 weights and bf16 gradients, 2 + 2 bytes a parameter:
  // DeepSpeed's 4 x largest_layer_params.
  EXPECT_EQ(Estimate(m8, o).per_device.workspace, 2 * head8 + 2 * head8);
  EXPECT_EQ(2 * head8 + 2 * head8, 2'101'346'304);
  // Tensor parallelism: each rank gathers its shard, 64128 vocabulary rows.
  o.tp = 2;
  EXPECT_EQ(Estimate(m8, o).per_device.workspace, 2 * (vocab / 2 * 4096) * 2);
  o.tp = 1;
  // DeepSpeed's fp32 gradients: 2 + 4 bytes.
  o.grads = "fp32";
  EXPECT_EQ(Estimate(m8, o).per_device.workspace, 2 * head8 + 4 * head8);
  o.grads = "";
  // Tied embeddings: one tensor, gathered once with one gradient.
  ModelConfig tied = m8;
  tied.tie_word_embeddings = true;
  EXPECT_EQ(Estimate(tied, o).per_device.workspace, 2 * head8 + 2 * head8);
  // LoRA: the frozen lm_head is gathered without a gradient and is still
  // the largest unit (a layer: 218,112,000 bf16 weights and 1,310,720
  // adapter parameters with their bf16 gradients).
  o.mode = Mode::kLora;
  const int64_t adapters8 = 16LL * ((4096 + 4096) * 2 + (4096 + 1024) * 2 + (4096 + 14336) * 3);
  ASSERT_EQ(adapters8 * 32, 41'943'040);
  ASSERT_LT(2 * layer8 + 4 * adapters8, 2 * head8);
  EXPECT_EQ(Estimate(m8, o).per_device.workspace, 2 * head8);
  // QLoRA: the same bf16 lm_head, plus the largest linear dequantized.
  o.mode = Mode::kQlora;
  EXPECT_EQ(Estimate(m8, o).per_device.workspace, 2 * head8 + 2 * 14336LL * 4096);
  o.mode = Mode::kPretrain;

  const ModelConfig m70 = Model("llama-3.1-70b");
  const int64_t head70 = vocab * 8192;
  const int64_t layer70 = 2 * 8192LL * 8192 + 2 * 1024LL * 8192 + 3 * 8192LL * 28672 + 2 * 8192;
  ASSERT_GT(head70, layer70);
  EXPECT_EQ(Estimate(m70, o).per_device.workspace, 2 * head70 + 2 * head70);
  EXPECT_EQ(2 * head70 + 2 * head70, 4'202'692'608);
  // Llama 3.1 405B: a decoder layer (3,187,703,808 parameters) is larger
  // than its 2,101,346,304-parameter lm_head.
  const ModelConfig m405 = Model("llama-3.1-405b");
  const int64_t layer405 =
      2 * 16384LL * 16384 + 2 * 1024LL * 16384 + 3 * 16384LL * 53248 + 2 * 16384;
  ASSERT_EQ(layer405, 3'187'703'808);
  ASSERT_GT(layer405, vocab * 16384);
  EXPECT_EQ(Estimate(m405, o).per_device.workspace, 2 * layer405 + 2 * layer405);
  // Below stage 3 nothing is gathered.
  o.zero = 2;
  EXPECT_EQ(Estimate(m8, o).per_device.workspace, 0);
}

// Optimizer offload (ZeRO-Offload) moves the master weights, the optimizer
// states and an fp32 copy of the gradients of each rank's partition to host
// memory: 16 bytes per parameter over the ranks.
TEST(SizingMemoryTest, OffloadMovesOptimizerStatesToHost) {
  const ModelConfig m = Model("llama-3.1-8b");
  const int64_t p = 8'030'261'248;
  SizingOptions o;
  o.offload_optimizer = true;
  o.dp = 8;
  o.zero = 2;
  const SizingReport r = Estimate(m, o);
  EXPECT_EQ(r.per_device.master + r.per_device.optimizer, 0);
  EXPECT_EQ(r.host_bytes_per_device, CeilDiv(4 * p, 8) + CeilDiv(8 * p, 8) + CeilDiv(4 * p, 8));
  EXPECT_EQ(r.per_device.gradients, CeilDiv(2 * p, 8));
}

// Korthikanti et al. 2022, Table 2, on GPT-3 175B (s = 2048, b = 1, h =
// 12288, a = 96, L = 96, t = 8), activations per layer in bytes:
//   no parallelism           sbh (34 + 5as/h)
//   tensor parallel          sbh (10 + 24/t + 5as/(ht))
//   + sequence parallel      sbh/t (34 + 5as/h)
//   tp + selective           sbh (10 + 24/t)
//   tp + sp + selective      sbh/t 34
//   full recomputation       2sbh   (2sbh/t with sp)
// plus, outside the layers, the embedding's dropout mask (sbh, /t with sp)
// and the final norm and lm_head inputs and fp32 logits (4sbh + 4sbv/t, the
// first part /t with sp).
TEST(SizingMemoryTest, KorthikantiActivationsOnGpt3Shape) {
  const ModelConfig m = Model("gpt3-175b");
  ASSERT_EQ(m.hidden_size, 12288);
  ASSERT_TRUE(m.dropout);
  const int64_t s = 2048, h = 12288, a = 96, layers = 96, v = 51200, t = 8;
  const int64_t sbh = s * h;
  const int64_t score = 5 * a * s * s;  // 5as^2b: sbh * 5as/h
  SizingOptions o;
  o.seq = s;
  o.flash_attention = false;
  auto activations = [&](int64_t tp, bool sp, Recompute recompute) {
    o.tp = tp;
    o.sequence_parallel = sp;
    o.recompute = recompute;
    return Estimate(m, o).per_device.activations;
  };
  const int64_t outside = sbh + 4 * sbh + 4 * s * v;
  const int64_t outside_tp = sbh + 4 * sbh + 4 * s * v / t;
  const int64_t outside_sp = sbh / t + 4 * sbh / t + 4 * s * v / t;
  EXPECT_EQ(activations(1, false, Recompute::kNone), layers * (34 * sbh + score) + outside);
  EXPECT_EQ(activations(t, false, Recompute::kNone),
            layers * (10 * sbh + 24 * sbh / t + score / t) + outside_tp);
  EXPECT_EQ(activations(t, true, Recompute::kNone),
            layers * (34 * sbh / t + score / t) + outside_sp);
  EXPECT_EQ(activations(t, false, Recompute::kSelective),
            layers * (10 * sbh + 24 * sbh / t) + outside_tp);
  EXPECT_EQ(activations(t, true, Recompute::kSelective), layers * 34 * sbh / t + outside_sp);
  EXPECT_EQ(activations(1, false, Recompute::kFull), layers * 2 * sbh + outside);
  EXPECT_EQ(activations(t, true, Recompute::kFull), layers * 2 * sbh / t + outside_sp);
  // FlashAttention keeps no scores: the same as selective recomputation.
  o.flash_attention = true;
  o.tp = t;
  o.sequence_parallel = true;
  o.recompute = Recompute::kNone;
  EXPECT_EQ(Estimate(m, o).per_device.activations, layers * 34 * sbh / t + outside_sp);
  // The paper's headline: 34sbhL/t, one micro-batch, in GB.
  EXPECT_NEAR(static_cast<double>(layers * 34 * sbh / t) / 1e9, 10.27, 0.01);
}

// Llama's shape: no dropout, grouped-query attention, SwiGLU with three
// f-wide tensors kept (gate and up outputs, their product).
TEST(SizingMemoryTest, LlamaActivationsAdaptTheFormula) {
  const ModelConfig m = Model("llama-3.1-8b");
  const int64_t s = 4096, h = 4096, q = 4096, kv = 1024, f = 14336, v = 128256;
  SizingOptions o;
  o.seq = s;
  const int64_t per_layer = s * (2 * h * 4 + 2 * (q + 2 * kv + q) + 2 * 3 * f);
  EXPECT_EQ(Estimate(m, o).per_device.activations, 32 * per_layer + 4 * s * h + 4 * s * v);
  o.batch = 3;
  EXPECT_EQ(Estimate(m, o).per_device.activations, 3 * (32 * per_layer + 4 * s * h + 4 * s * v));
}

// Pipeline stages: layers split evenly, the remainder to the first stages;
// 1F1B keeps pp - i micro-batches in flight on stage i; the first stage is
// the most loaded.
TEST(SizingMemoryTest, PipelineStagesHoldTheirLayersAndMicroBatches) {
  const ModelConfig m = Model("llama-3.1-405b");  // 126 layers
  SizingOptions o;
  o.pp = 8;
  o.tp = 8;
  o.recompute = Recompute::kFull;
  o.seq = 8192;
  const SizingReport r = Estimate(m, o);
  EXPECT_EQ(r.pipeline_stage, 0);
  const int64_t h = 16384, v = 128256;
  const int64_t q = 128 * 128 / 8, kv = 8 * 128 / 8, f = 53248 / 8;
  const int64_t layer = h * (q + kv + kv) + q * h + 3 * h * f + 2 * h;
  const int64_t stage0 = 16 * layer + v / 8 * h;  // 126 = 6 x 16 + 2 x 15
  EXPECT_EQ(r.per_device.weights, 2 * stage0);
  EXPECT_EQ(r.per_device.activations, 16 * 8 * 2 * 8192 * h);  // 16 layers x 8 micro-batches
  EXPECT_EQ(r.devices_in_layout, 64);
}

// Tensor parallelism: column- and row-parallel shards, vocabulary-parallel
// embeddings, replicated norms.
TEST(SizingMemoryTest, TensorParallelShards) {
  const ModelConfig m = Model("llama-3.1-70b");
  const ParameterCounts c = CountParameters(m);
  SizingOptions o;
  o.mode = Mode::kInference;
  o.tp = 8;
  const SizingReport r = Estimate(m, o);
  EXPECT_EQ(r.per_device.weights,
            2 * ((c.attention + c.mlp + c.embedding + c.lm_head) / 8 + c.norms));
}

TEST(SizingMemoryTest, OptimizerStates) {
  const ModelConfig m = Model("llama-3.1-8b");
  const int64_t p = 8'030'261'248;
  SizingOptions o;
  o.optimizer = Optimizer::kSgd;
  EXPECT_EQ(Estimate(m, o).whole.optimizer, 4 * p);
  // Adafactor: a row and a column vector per matrix, a full vector else.
  o.optimizer = Optimizer::kAdafactor;
  const int64_t h = 4096, kv = 1024, f = 14336, v = 128256;
  const int64_t layer =
      4 * ((h + h) + (kv + h) + (kv + h) + (h + h) + 2 * (f + h) + (h + f)) + 4 * 2 * h;
  EXPECT_EQ(Estimate(m, o).whole.optimizer, 32 * layer + 2 * 4 * (v + h) + 4 * h);
  // 8-bit Adam (bitsandbytes): 2 bytes per parameter and two fp32 absmax per
  // block of 256; tensors under 4096 elements would keep fp32 states, but
  // every tensor here (norms: 4096) is large enough, and a multiple of 256.
  o.optimizer = Optimizer::kAdamW8bit;
  EXPECT_EQ(Estimate(m, o).whole.optimizer, 2 * p + 2 * 4 * (p / 256));
  // Qwen2.5 7B's biases and norms (3584 and 512 elements) keep fp32 states.
  const ModelConfig qwen = Model("qwen2.5-7b");
  const int64_t small = 28 * (3584 + 512 + 512 + 2 * 3584) + 3584;
  const int64_t large = CountParameters(qwen).total - small;
  EXPECT_EQ(Estimate(qwen, o).whole.optimizer, 8 * small + 2 * large + 2 * 4 * (large / 256));
}

// LoRA rank 16 on every linear of Llama 3 8B: 41,943,040 trainable
// parameters (what PEFT prints for this model and rank).
TEST(SizingMemoryTest, LoraTrainsTheAdaptersOnly) {
  const ModelConfig m = Model("llama-3.1-8b");
  const int64_t p = 8'030'261'248, adapters = 41'943'040;
  SizingOptions o;
  o.mode = Mode::kLora;
  o.buffers_bytes = 0;
  SizingReport r = Estimate(m, o);
  EXPECT_EQ(r.trainable_parameters, adapters);
  EXPECT_EQ(r.whole.weights, 2 * p + 2 * adapters);
  EXPECT_EQ(r.whole.gradients, 2 * adapters);
  EXPECT_EQ(r.whole.master, 4 * adapters);
  EXPECT_EQ(r.whole.optimizer, 8 * adapters);
  // q and v only: 16 x (4096 + 4096 + 4096 + 1024) x 32.
  o.lora_targets = {"q", "v"};
  r = Estimate(m, o);
  EXPECT_EQ(r.trainable_parameters, 16LL * (8192 + 5120) * 32);
  // QLoRA: the frozen linears in NF4 (4 bits + an fp32 absmax per 64).
  o.mode = Mode::kQlora;
  o.lora_targets = {};
  r = Estimate(m, o);
  EXPECT_EQ(r.options.weights, "nf4");
  EXPECT_DOUBLE_EQ(r.linear_bits_per_parameter, 4.5);
  EXPECT_GT(r.per_device.workspace, 0);  // one linear dequantized to bf16
  EXPECT_EQ(r.per_device.workspace, 2LL * 14336 * 4096);
}

// The largest context and batch that fit are the edges of what fits.
TEST(SizingMemoryTest, MaxSeqAndBatchAreTheLargestThatFit) {
  const ModelConfig m = Model("llama-3.1-70b");
  SizingOptions o;
  o.mode = Mode::kInference;
  o.weights = "int4-g128";
  o.batch = 4;
  const SizingReport r = Estimate(m, o);
  ASSERT_GT(r.max_seq, 0);
  ASSERT_LT(r.max_seq, m.max_position_embeddings);
  SizingOptions at = o;
  at.seq = r.max_seq;
  EXPECT_TRUE(Estimate(m, at).fits);
  at.seq = r.max_seq + 1;
  EXPECT_FALSE(Estimate(m, at).fits);
  at = o;
  at.batch = r.max_batch;
  EXPECT_TRUE(Estimate(m, at).fits);
  at.batch = r.max_batch + 1;
  EXPECT_FALSE(Estimate(m, at).fits);
  // Headroom keeps a fraction free.
  o.headroom = 0.5;
  EXPECT_LT(Estimate(m, o).max_seq, r.max_seq);
  // With a short request the prefill chunk (min(seq x batch, 8192)) grows
  // with the searched sequence: the edge is still exact.
  o = {};
  o.mode = Mode::kInference;
  o.weights = "int4-g128";
  o.seq = 100;
  o.batch = 16;
  const SizingReport small = Estimate(m, o);
  at = o;
  at.seq = small.max_seq;
  EXPECT_TRUE(Estimate(m, at).fits);
  at.seq = small.max_seq + 1;
  EXPECT_FALSE(Estimate(m, at).fits);
  at = o;
  at.batch = small.max_batch;
  EXPECT_TRUE(Estimate(m, at).fits);
  at.batch = small.max_batch + 1;
  EXPECT_FALSE(Estimate(m, at).fits);
}

// A mixture of experts: a decode step of one sequence reads 2 of 8 experts.
TEST(SizingMemoryTest, MixtureOfExpertsDecodeReadsRoutedExperts) {
  const ModelConfig m = Model("mixtral-8x7b");
  const ParameterCounts c = CountParameters(m);
  SizingOptions o;
  o.mode = Mode::kInference;
  o.seq = 1;
  const SizingReport r = Estimate(m, o);
  EXPECT_EQ(r.whole.weights, 2 * c.total);
  EXPECT_EQ(r.bytes_read_per_step, 2 * (c.total - c.mlp * 6 / 8) + r.per_device.kv_cache);
  // Four sequences routed uniformly read 8 (1 - (6/8)^4) = 5.46875 experts
  // of 8 per layer in expectation: 175/256 of the experts' bytes.
  o.batch = 4;
  const SizingReport four = Estimate(m, o);
  EXPECT_EQ(four.bytes_read_per_step,
            2 * (c.total - c.mlp) + 2 * c.mlp / 256 * 175 + four.per_device.kv_cache);
}

// The whole job does not depend on the layout it is compared with.
TEST(SizingMemoryTest, WholeJobIsTheSameForEveryLayout) {
  const ModelConfig m = Model("llama-3.1-70b");
  for (Mode mode : {Mode::kInference, Mode::kPretrain}) {
    SizingOptions o;
    o.mode = mode;
    o.seq = 8192;
    const SizingReport one = Estimate(m, o);
    for (int64_t tp : {2, 8, 16}) {
      o.tp = tp;
      const SizingReport r = Estimate(m, o);
      EXPECT_EQ(r.whole.total(), one.whole.total()) << tp;
      EXPECT_EQ(r.whole.kv_cache, one.whole.kv_cache) << tp;
      EXPECT_EQ(r.devices_needed, one.devices_needed) << tp;
    }
  }
}

// k and v are divided by whole heads: beyond 8 devices each holds one head
// of Llama 3.1 70B's 8, not a fraction of one.
TEST(SizingMemoryTest, KvProjectionsReplicateWholeHeads) {
  const ModelConfig m = Model("llama-3.1-70b");
  const int64_t h = 8192, d = 128, v = 128256;
  for (int64_t tp : {8, 16, 32}) {
    const int64_t q = 64 * d / tp, kv = std::max<int64_t>(1, 8 / tp) * d, f = 28672 / tp;
    const int64_t layer = h * q + 2 * h * kv + q * h + 3 * h * f + 2 * h;
    SizingOptions o;
    o.mode = Mode::kInference;
    o.tp = tp;
    EXPECT_EQ(Estimate(m, o).per_device.weights, 2 * (80 * layer + 2 * (v / tp) * h + h)) << tp;
  }
}

// A column-parallel layer's bias is divided with its rows; a row-parallel
// layer's is replicated.
TEST(SizingMemoryTest, BiasesFollowTheirLinears) {
  const ModelConfig m = Model("qwen2.5-7b");
  const int64_t h = 3584, d = 128, f = 18944, v = 152064, tp = 2;
  const int64_t q = 28 * d / tp, kv = 4 * d / tp;
  const int64_t layer = (h * q + q) + 2 * (h * kv + kv) + q * h + 3 * h * f / tp + 2 * h;
  SizingOptions o;
  o.mode = Mode::kInference;
  o.tp = tp;
  EXPECT_EQ(Estimate(m, o).per_device.weights, 2 * (28 * layer + 2 * (v / tp) * h + h));
}

// Full recomputation keeps each layer's input, and rebuilds one layer's
// activations at a time for its backward pass (workspace).
TEST(SizingMemoryTest, FullRecomputationRebuildsOneLayer) {
  const ModelConfig m = Model("llama-3.1-8b");
  SizingOptions o;
  const int64_t layer = Estimate(m, o).per_device.activations;  // 32 layers + outputs
  o.recompute = Recompute::kFull;
  const SizingReport r = Estimate(m, o);
  const int64_t s = 4096, h = 4096, v = 128256;
  EXPECT_EQ(r.per_device.activations, 32 * 2 * s * h + 4 * s * h + 4 * s * v);
  EXPECT_EQ(r.per_device.workspace, (layer - 4 * s * h - 4 * s * v) / 32);
}

TEST(SizingMemoryTest, CompareFormatsRanksTheWeightFormats) {
  const ModelConfig m = Model("llama-3.1-70b");
  SizingOptions o;
  o.mode = Mode::kInference;
  absl::StatusOr<std::vector<FormatRow>> rows =
      CompareFormats(m, o, kH100, DefaultCompareFormats());
  ASSERT_TRUE(rows.ok()) << rows.status();
  ASSERT_EQ(rows->size(), DefaultCompareFormats().size());
  const int64_t p = 70'553'706'496;
  EXPECT_EQ((*rows)[0].format, "fp32");
  EXPECT_EQ((*rows)[0].weight_bytes, 4 * p);
  EXPECT_DOUBLE_EQ((*rows)[0].saving_vs_bf16, -1.0);
  EXPECT_EQ((*rows)[1].weight_bytes, 2 * p);
  EXPECT_EQ((*rows)[1].saving_vs_bf16, 0);
  // The rows differ in their weights only (the KV cache stays bf16 in the
  // fp32 row).
  EXPECT_EQ((*rows)[0].per_device_bytes - (*rows)[1].per_device_bytes,
            (*rows)[0].weight_bytes - (*rows)[1].weight_bytes);
  for (const FormatRow& row : *rows) {
    if (row.format == "int4-g128") {
      EXPECT_DOUBLE_EQ(row.linear_bits_per_parameter, 4.125);
      EXPECT_TRUE(row.fits);
      EXPECT_GT(row.saving_vs_bf16, 0.7);
    }
  }
  o.mode = Mode::kPretrain;
  EXPECT_FALSE(CompareFormats(m, o, kH100, DefaultCompareFormats()).ok());
}

TEST(SizingMemoryTest, RejectsBadOptionsNamingThem) {
  const ModelConfig m = Model("llama-3.1-70b");
  // The message starts with the option's field, which is also its payload
  // (formats/option_error.h), for front ends to name the option their way.
  auto error = [&](SizingOptions o) {
    absl::StatusOr<SizingReport> r = EstimateMemory(m, o, kH100);
    EXPECT_FALSE(r.ok());
    const std::optional<std::string> field = OptionOf(r.status());
    EXPECT_TRUE(field.has_value()) << r.status();
    EXPECT_TRUE(absl::StartsWith(r.status().message(), field.value_or("?"))) << r.status();
    return absl::StrCat("[", field.value_or(""), "] ", r.status().message());
  };
  SizingOptions o;
  o.tp = 3;
  EXPECT_THAT(error(o), HasSubstr("[tp] tp: 3"));
  o = {};
  o.zero = 4;
  EXPECT_THAT(error(o), HasSubstr("[zero] zero: 4"));
  o = {};
  o.headroom = 1;
  EXPECT_THAT(error(o), HasSubstr("[headroom] headroom: 1"));
  o = {};
  o.weights = "int4-g128";
  EXPECT_THAT(error(o), HasSubstr("[weights] weights:"));
  o = {};
  o.mode = Mode::kInference;
  o.kv = "fp7";
  EXPECT_THAT(error(o), HasSubstr("[kv fp7] kv fp7:"));
  o = {};
  o.mode = Mode::kLora;
  o.lora_targets = {"qkv"};
  EXPECT_THAT(error(o), HasSubstr("[lora_targets] lora_targets:"));
  o = {};
  o.pp = 81;
  EXPECT_THAT(error(o), HasSubstr("[pp] pp:"));
  o = {};
  o.seq = 0;
  EXPECT_THAT(error(o), HasSubstr("[seq] seq:"));
  o = {};
  o.buffers_bytes = 80'000'000'000;
  EXPECT_THAT(error(o), HasSubstr("[buffers and headroom] buffers and headroom:"));
  o = {};
  o.sequence_parallel = true;
  EXPECT_THAT(error(o), HasSubstr("[sequence_parallel] sequence_parallel: needs `tp`"));
  o = {};
  o.offload_optimizer = true;
  EXPECT_THAT(error(o), HasSubstr("[offload] offload: optimizer offload is ZeRO-Offload: it takes `zero` 1-3"));
  o = {};
  o.mode = Mode::kInference;
  o.recompute = Recompute::kFull;
  EXPECT_THAT(error(o), HasSubstr("[recompute] recompute:"));
  o = {};
  o.headroom = 0.99;
  EXPECT_THAT(error(o), HasSubstr("[buffers and headroom] buffers and headroom:"));
  // Absurd but valid sizes are too large, not wrapped.
  o = {};
  o.seq = 1 << 24;
  o.batch = 1 << 20;
  o.flash_attention = false;
  EXPECT_THAT(error(o), HasSubstr("[seq and batch] seq and batch:"));
}

}  // namespace
}  // namespace lowp
