#include "sizing/memory.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "formats/format.h"
#include "formats/option_error.h"
#include "quant/recipe.h"
#include "quant/scheme.h"

namespace lowp {
namespace {

// Intermediate byte counts are 128-bit so that an absurd request (a million
// sequences of a million tokens) is reported as too large, not wrapped.
using Wide = __int128;
constexpr Wide kMaxBytes = std::numeric_limits<int64_t>::max();

constexpr int64_t kMaxDevices = int64_t{1} << 20;

Wide CeilDiv(Wide a, Wide b) { return (a + b - 1) / b; }

// Bytes by component while they are summed.
struct WideBytes {
  Wide weights = 0, gradients = 0, master = 0, optimizer = 0, activations = 0, kv_cache = 0,
       workspace = 0, buffers = 0;
  Wide host = 0;         // offloaded to host memory
  Wide decode_read = 0;  // bytes one decode step reads on this device

  Wide total() const {
    return weights + gradients + master + optimizer + activations + kv_cache + workspace + buffers;
  }
  bool Narrow(Bytes& out) const {
    for (Wide v : {weights, gradients, master, optimizer, activations, kv_cache, workspace, buffers,
                   host, decode_read, total()}) {
      if (v > kMaxBytes) return false;
    }
    out = Bytes{static_cast<int64_t>(weights),     static_cast<int64_t>(gradients),
                static_cast<int64_t>(master),      static_cast<int64_t>(optimizer),
                static_cast<int64_t>(activations), static_cast<int64_t>(kv_cache),
                static_cast<int64_t>(workspace),   static_cast<int64_t>(buffers)};
    return true;
  }
};

bool IsFloatCast(absl::string_view name, int min_bits) {
  const absl::StatusOr<Format> f = FindFormat(name);
  return f.ok() && f->is_float() && f->bits >= min_bits;
}

// The options and model resolved once: defaults filled in, schemes parsed.
struct Job {
  const ModelConfig* model = nullptr;
  SizingOptions options;
  bool training = false;  // pretrain, finetune, lora, qlora
  bool adapters = false;  // lora, qlora
  std::map<std::string, std::unique_ptr<Scheme>> schemes;
  const Scheme* weights = nullptr;
  const Scheme* embed = nullptr;
  const Scheme* grads = nullptr;
  const Scheme* master = nullptr;  // null: no master copy
  const Scheme* opt_state = nullptr;
  const Scheme* kv = nullptr;
  const Scheme* host_grads = nullptr;  // fp32 gradients kept by optimizer offload
  std::vector<TensorSpec> input, output;
  std::vector<LayerKind> layers;  // each kind of decoder layer with its layers
  // weights is a llama.cpp mix (quant/recipe.h): each linear layer priced
  // as the mix stores it; with embed left to its default, every other weight
  // too (embeddings and lm_head in the mix's types, norms, biases and router
  // in f32), as a GGUF file holds them.
  const Recipe* recipe = nullptr;
  bool recipe_embed = false;
  RecipeModel recipe_model;
};

// Stored bytes of `count` tensors of rows x cols in `scheme`, each tensor
// rounded up to whole bytes.
Wide TensorBytes(const Scheme& scheme, int64_t rows, int64_t cols, int64_t count = 1) {
  if (rows == 0 || cols == 0 || count == 0) return 0;
  return CeilDiv(Wide{scheme.StorageBits(rows, cols)}, 8) * count;
}

// The weights' scheme of tensor `t` (of layer `layer`, -1 outside the
// layers): the mix's choice for it when the weights are a recipe, else the
// weights' or the embeddings' format.
const Scheme& WeightScheme(const Job& job, const TensorSpec& t, int64_t layer) {
  const Scheme& plain = t.linear ? *job.weights : *job.embed;
  if (job.recipe == nullptr) return plain;
  if (!t.linear && !job.recipe_embed) return plain;
  // The tensor as a checkpoint would name and shape it.
  TensorView view;
  const bool bias = absl::EndsWith(t.name, ".bias");
  const std::string leaf = bias ? t.name : absl::StrCat(t.name, ".weight");
  view.name = t.name == "embed_tokens"                 ? "model.embed_tokens.weight"
              : t.component == Component::kLmHead      ? "lm_head.weight"
              : layer < 0                              ? absl::StrCat("model.", leaf)
                                                       : absl::StrCat("model.layers.", layer, ".", leaf);
  if (t.count > 1) {
    view.shape = {t.count, t.rows, t.cols};
  } else if (t.rows == 1) {
    view.shape = {t.cols};  // a norm's or a bias's vector
  } else {
    view.shape = {t.rows, t.cols};
  }
  return SchemeForTensor(*job.weights, view, job.recipe_model);
}

absl::StatusOr<const Scheme*> GetScheme(Job& job, const std::string& name,
                                        absl::string_view option) {
  auto it = job.schemes.find(name);
  if (it != job.schemes.end()) return it->second.get();
  absl::StatusOr<std::unique_ptr<Scheme>> scheme = ParseScheme(name);
  if (!scheme.ok()) {
    return OptionError(absl::StrCat(option, " ", name), scheme.status().message());
  }
  const Scheme* raw = scheme->get();
  job.schemes.emplace(name, *std::move(scheme));
  return raw;
}

absl::Status Invalid(absl::string_view field, absl::string_view why) {
  return OptionError(field, why);
}

absl::Status CheckModelLimits(const ModelConfig& m) {
  // Limits well above any real model, tighter than ValidateModel's: they
  // keep the element count of every tensor priced (a KV cache of up to 2^24
  // tokens x kv_heads x head_dim included) within Scheme::StorageBits'
  // uint64 bits, and every byte sum far below 2^127.
  struct Field {
    const char* name;
    int64_t value, limit;
  } const fields[] = {{"hidden_size", m.hidden_size, 1 << 20},
                      {"intermediate_size", m.intermediate_size, 1 << 22},
                      {"num_hidden_layers", m.num_layers, 1 << 14},
                      {"num_attention_heads", m.num_heads, 1 << 14},
                      {"num_key_value_heads", m.num_kv_heads, 1 << 14},
                      {"head_dim", m.head_dim, 1 << 16},
                      {"vocab_size", m.vocab_size, 1 << 24},
                      {"num_local_experts", m.num_experts, 1 << 12},
                      {"q_lora_rank", m.q_lora_rank, 1 << 20},
                      {"kv_lora_rank", m.kv_lora_rank, 1 << 20},
                      {"qk_nope_head_dim", m.qk_nope_head_dim, 1 << 16},
                      {"qk_rope_head_dim", m.qk_rope_head_dim, 1 << 16},
                      {"v_head_dim", m.v_head_dim, 1 << 16}};
  for (const Field& f : fields) {
    if (f.value > f.limit) {
      return absl::InvalidArgumentError(absl::StrCat("model ", m.name, ": ", f.name, " = ", f.value,
                                                     " exceeds the memory model's limit ",
                                                     f.limit));
    }
  }
  return ValidateModel(m);
}

absl::StatusOr<Job> Resolve(const ModelConfig& model, const SizingOptions& in) {
  if (absl::Status s = CheckModelLimits(model); !s.ok()) return s;
  Job job;
  job.model = &model;
  job.options = in;
  SizingOptions& o = job.options;
  job.training = o.mode != Mode::kInference;
  job.adapters = o.mode == Mode::kLora || o.mode == Mode::kQlora;

  if (o.seq < 1 || o.seq > kSizingMaxSeq)
    return Invalid("seq", absl::StrCat(o.seq, " is not in 1..", kSizingMaxSeq));
  if (o.batch < 1 || o.batch > kSizingMaxBatch) {
    return Invalid("batch", absl::StrCat(o.batch, " is not in 1..", kSizingMaxBatch));
  }
  for (auto [name, value] : {std::pair{"dp", o.dp}, {"tp", o.tp}, {"pp", o.pp}}) {
    if (value < 1 || value > kMaxDevices) {
      return Invalid(name, absl::StrCat(value, " is not in 1..", kMaxDevices));
    }
  }
  if (o.zero < 0 || o.zero > 3)
    return Invalid("zero", absl::StrCat(o.zero, " is not a ZeRO stage (0-3)"));
  if (!job.training && o.zero != 0)
    return Invalid("zero", "ZeRO partitions training states; inference takes `zero` 0");
  if (!job.training && o.offload_optimizer)
    return Invalid("offload", "inference has no optimizer to offload");
  if (o.offload_optimizer && o.zero == 0)
    return Invalid("offload", "optimizer offload is ZeRO-Offload: it takes `zero` 1-3");
  if (!job.training && o.recompute != Recompute::kNone)
    return Invalid("recompute", "inference keeps no activations for a backward pass");
  if (!job.training && o.sequence_parallel)
    return Invalid("sequence_parallel", "is modelled for training activations only");
  if (!(o.headroom >= 0 && o.headroom < 1))
    return Invalid("headroom", absl::StrCat(o.headroom, " is not in [0, 1)"));
  if (o.buffers_bytes < 0) return Invalid("buffers", "negative");
  if (o.activation_bytes != 2 && o.activation_bytes != 4) {
    return Invalid("activation_bytes", absl::StrCat(o.activation_bytes, " is not 2 or 4"));
  }
  if (o.prefill_tokens < 0 || o.prefill_tokens > kSizingMaxSeq * 16) {
    return Invalid("prefill_tokens", absl::StrCat(o.prefill_tokens, " is out of range"));
  }
  if (o.lora_rank < 1 || o.lora_rank > (1 << 16)) {
    return Invalid("lora_rank", absl::StrCat(o.lora_rank, " is not in 1..65536"));
  }
  // Tensor parallelism divides heads, MLP columns and (vocabulary-parallel)
  // embedding rows; kv heads are divided, or replicated when fewer than tp.
  const int64_t tp = o.tp;
  if (model.num_heads % tp != 0) {
    return Invalid("tp",
                   absl::StrCat(tp, " does not divide num_attention_heads = ", model.num_heads));
  }
  if (model.intermediate_size % tp != 0) {
    return Invalid(
        "tp", absl::StrCat(tp, " does not divide intermediate_size = ", model.intermediate_size));
  }
  if (model.num_kv_heads >= tp ? model.num_kv_heads % tp != 0 : tp % model.num_kv_heads != 0) {
    return Invalid("tp",
                   absl::StrCat(tp, " neither divides nor is a multiple of num_key_value_heads = ",
                                model.num_kv_heads));
  }
  if (o.pp > model.num_layers) {
    return Invalid("pp", absl::StrCat(o.pp, " stages for ", model.num_layers, " layers"));
  }
  if (o.sequence_parallel && tp == 1) return Invalid("sequence_parallel", "needs `tp` above 1");

  // Formats, defaults first.
  if (o.weights.empty()) o.weights = o.mode == Mode::kQlora ? "nf4" : "bf16";
  const bool embed_default = o.embed.empty();
  if (o.embed.empty()) o.embed = IsFloatCast(o.weights, 16) ? o.weights : "bf16";
  if (o.kv.empty()) o.kv = o.embed;
  if (job.training) {
    // What the optimizer updates: the weights themselves, or the adapters
    // (kept in the embeddings' format).
    const std::string& trained = job.adapters ? o.embed : o.weights;
    if (!job.adapters && !IsFloatCast(o.weights, 1)) {
      return Invalid("weights", absl::StrCat(o.weights,
                                               " is a quantization scheme; full training updates "
                                               "floating weights (use `mode` qlora)"));
    }
    if (o.grads.empty()) o.grads = trained;
    if (o.master.empty()) o.master = IsFloatCast(trained, 32) ? "none" : "fp32";
    if (o.opt_state.empty()) o.opt_state = "fp32";
  } else {
    o.grads = o.master = o.opt_state = "";
  }
  struct Slot {
    const Scheme** scheme;
    const std::string& name;
    const char* option;
    bool wanted;
  } const slots[] = {
      {&job.weights, o.weights, "weights", true},
      {&job.embed, o.embed, "embed", true},
      {&job.kv, o.kv, "kv", true},
      {&job.grads, o.grads, "grads", job.training},
      {&job.master, o.master, "master", job.training && o.master != "none"},
      {&job.opt_state, o.opt_state, "opt_state", job.training},
  };
  for (const Slot& slot : slots) {
    if (!slot.wanted) continue;
    absl::StatusOr<const Scheme*> s = GetScheme(job, slot.name, slot.option);
    if (!s.ok()) return s.status();
    *slot.scheme = *s;
  }

  job.input = InputTensors(model);
  job.layers = LayerKinds(model);
  job.output = OutputTensors(model);
  job.recipe = AsRecipe(*job.weights);
  if (job.recipe != nullptr) {
    job.recipe_embed = embed_default;
    job.recipe_model.layers = static_cast<int>(model.num_layers);
    job.recipe_model.attention_v = static_cast<int>(model.num_layers);
    job.recipe_model.gqa = model.num_heads / model.num_kv_heads;
    job.recipe_model.has_output = !model.tie_word_embeddings;
    job.recipe_model.experts = static_cast<int>(model.num_experts);
  }
  if (job.adapters) {
    std::vector<std::string> known;
    for (const LayerKind& kind : job.layers) {
      for (const TensorSpec& t : kind.tensors) {
        if (!t.lora_name.empty() &&
            std::find(known.begin(), known.end(), t.lora_name) == known.end()) {
          known.push_back(t.lora_name);
        }
      }
    }
    for (const std::string& target : o.lora_targets) {
      if (std::find(known.begin(), known.end(), target) == known.end()) {
        return Invalid("lora_targets",
                       absl::StrCat("'", target, "' is not a linear layer of ", model.name, " (",
                                    absl::StrJoin(known, ","), ")"));
      }
    }
  }
  if (o.offload_optimizer) {
    absl::StatusOr<const Scheme*> fp32 = GetScheme(job, "fp32", "grads");
    if (!fp32.ok()) return fp32.status();
    job.host_grads = *fp32;
  }
  return job;
}

bool IsTarget(const Job& job, const TensorSpec& t) {
  if (!job.adapters || !t.linear) return false;
  const std::vector<std::string>& targets = job.options.lora_targets;
  return targets.empty() || std::find(targets.begin(), targets.end(), t.lora_name) != targets.end();
}

// LoRA's A [rank, cols] and B [rows, rank] for `t`'s rows x cols (a shard
// of it under tensor parallelism), stored in the embeddings' format.
Wide AdapterBytes(const Job& job, const TensorSpec& t, int64_t rows, int64_t cols) {
  const int64_t r = job.options.lora_rank;
  return TensorBytes(*job.embed, r, cols, t.count) + TensorBytes(*job.embed, rows, r, t.count);
}

// The device layout one estimate is made for.
struct Layout {
  int64_t dp = 1, tp = 1, pp = 1;
  int zero = 0;
  bool sequence_parallel = false;
  bool offload = false;
  int64_t buffers = 0;
  int64_t kv_heads = 0;  // kv heads per device: divided by tp, at least one

  Layout(const ModelConfig& m, int64_t dp, int64_t tp, int64_t pp, int zero, bool sp, bool offload,
         int64_t buffers)
      : dp(dp),
        tp(tp),
        pp(pp),
        zero(zero),
        sequence_parallel(sp),
        offload(offload),
        buffers(buffers),
        kv_heads(std::max<int64_t>(1, m.num_kv_heads / tp)) {}
  // Tokens of a micro-batch in the tensors tensor parallelism replicates:
  // sequence parallelism divides them along the sequence.
  Wide ReplicatedTokens(int64_t seq, int64_t batch) const {
    return (sequence_parallel ? CeilDiv(Wide{seq}, tp) : Wide{seq}) * batch;
  }
};

// The shard of a tensor one tensor-parallel device holds. Vectors ([1, n])
// are divided along n.
void Shard(const TensorSpec& t, const Layout& l, const ModelConfig& m, int64_t& rows,
           int64_t& cols) {
  rows = t.rows;
  cols = t.cols;
  int64_t& out_features = t.rows == 1 ? cols : rows;
  switch (t.split) {
    case Split::kReplicated:
      break;
    case Split::kRows:  // vocabulary rows may not divide: the last shard is the smaller
      out_features = CeilDiv(out_features, l.tp);
      break;
    case Split::kKvHeads:
      out_features = l.kv_heads * m.head_dim;
      break;
    case Split::kCols:
      cols = CeilDiv(t.cols, l.tp);
      break;
  }
}

// Tokens in one prefill chunk of an inference forward pass.
int64_t PrefillTokens(const SizingOptions& o, int64_t seq, int64_t batch) {
  return o.prefill_tokens > 0 ? o.prefill_tokens : std::min<int64_t>(seq * batch, 8192);
}

// Optimizer state bytes of a trained tensor shard.
Wide OptimizerBytes(const Job& job, int64_t rows, int64_t cols, int64_t count) {
  const Scheme& s = *job.opt_state;
  const int64_t n = rows * cols;
  switch (job.options.optimizer) {
    case Optimizer::kAdamW:
      return 2 * TensorBytes(s, rows, cols, count);
    case Optimizer::kSgd:
      return TensorBytes(s, rows, cols, count);
    case Optimizer::kAdafactor:
      // Factored second moment (a row and a column vector) for matrices,
      // a full one for vectors; no first moment (beta1 = None, the default).
      if (rows > 1 && cols > 1) return (TensorBytes(s, 1, rows) + TensorBytes(s, 1, cols)) * count;
      return TensorBytes(s, rows, cols, count);
    case Optimizer::kAdamW8bit:
      // bitsandbytes: two uint8 states with an fp32 absmax per block of 256;
      // tensors under 4096 elements keep fp32 states (min_8bit_size).
      if (n < 4096) return Wide{2} * 4 * n * count;
      return Wide{2} * (n + 4 * CeilDiv(n, 256)) * count;
  }
  return 0;
}

// Activation bytes of one decoder layer for one micro-batch in training
// (Korthikanti et al. 2022, generalized to grouped-query attention, gated
// MLPs and mixtures of experts; docs/sizing.md derives each term).
// Attention's widths on one device: q, k and v (the inputs of QK^T and of
// the V product) and the attention's output (the input of o_proj), divided
// by tp; and multi-head latent attention's latents, which every device
// computes whole (q_a's and kv_a's outputs, the inputs of their norms).
struct AttentionWidths {
  Wide q = 0, k = 0, v = 0, out = 0, latents = 0;
};
AttentionWidths AttentionOf(const ModelConfig& m, const Layout& l) {
  AttentionWidths w;
  const Wide t = l.tp;
  w.q = Wide{m.num_heads} * KeyHeadDim(m) / t;
  w.out = Wide{m.num_heads} * ValueHeadDim(m) / t;
  if (m.kv_lora_rank > 0) {  // keys and values per head, expanded from the latent
    w.k = w.q;
    w.v = w.out;
    w.latents = Wide{m.q_lora_rank} + m.kv_lora_rank + m.qk_rope_head_dim;
  } else {
    w.k = w.v = Wide{l.kv_heads} * m.head_dim;
  }
  return w;
}

Wide LayerActivations(const Job& job, const LayerKind& kind, const Layout& l, int64_t seq,
                      int64_t batch, Recompute recompute) {
  const ModelConfig& m = *job.model;
  const SizingOptions& o = job.options;
  const Wide a = o.activation_bytes;  // bytes of a stored activation value
  const Wide t = l.tp;
  const Wide sb = Wide{seq} * batch;
  const Wide sb_replicated = l.ReplicatedTokens(seq, batch);
  const Wide h = m.hidden_size;
  if (recompute == Recompute::kFull) return a * sb_replicated * h;  // the layer's input

  // Replicated across tp: norm inputs, the inputs of the attention and MLP
  // blocks, the dropout masks after them (1 byte each).
  Wide replicated = a * h * (m.norms_per_layer + 2);
  if (m.dropout) replicated += 2 * h;
  // Divided by tp: q, k, v, the attention output, q/k norm inputs, the MLP.
  // The latents of multi-head latent attention are kept twice, as their
  // norms' inputs and outputs (the inputs of q_b and kv_b).
  const AttentionWidths w = AttentionOf(m, l);
  Wide divided = a * (w.q + w.k + w.v + w.out);
  if (m.qk_norm) divided += a * (w.q + w.k);
  replicated += 2 * a * w.latents;
  const Wide f = Wide{kind.moe ? ExpertWidth(m) : m.intermediate_size} / t;
  // Gated: gate and up outputs (inputs of the activation and the product)
  // and the product (input of down); plain: the activation's input and
  // output. Each routed token passes through experts_per_token experts
  // (and Qwen2-MoE's shared expert).
  const Wide experts = kind.moe ? m.experts_per_token : 1;
  divided += a * f * (m.gated_mlp ? 3 : 2) * experts;
  if (kind.moe) {
    divided += a * (Wide{m.shared_expert_intermediate_size} / t) * (m.gated_mlp ? 3 : 2);
  }
  // A mixture of experts also keeps each expert's copy of its routed tokens
  // (input of its gate/up weight gradients) and its output (for the routing
  // weight's gradient): 2k h-wide copies, replicated like the block input.
  if (kind.moe) replicated += 2 * experts * a * h;
  Wide bytes = sb_replicated * replicated + sb * divided;
  // LoRA: each adapter keeps A's output (rank wide) for B's gradient.
  if (job.adapters) {
    for (const TensorSpec& tensor : kind.tensors) {
      if (IsTarget(job, tensor)) bytes += a * sb * o.lora_rank * (tensor.count > 1 ? experts : 1);
    }
  }
  // The attention scores, s x s per head: softmax output, and with dropout
  // its mask and output. FlashAttention and selective recomputation keep none.
  if (!o.flash_attention && recompute == Recompute::kNone) {
    const Wide per_score = a + (m.dropout ? 1 + a : 0);
    bytes += per_score * (Wide{m.num_heads} / t) * Wide{seq} * seq * batch;
  }
  return bytes;
}

// One pipeline stage on one device.
WideBytes StageBytes(const Job& job, const Layout& l, int stage, int64_t seq, int64_t batch) {
  const ModelConfig& m = *job.model;
  const SizingOptions& o = job.options;
  const bool first = stage == 0, last = stage == l.pp - 1;
  const int64_t layers = m.num_layers / l.pp + (stage < m.num_layers % l.pp ? 1 : 0);
  WideBytes b;

  // Weights and training states of every tensor held, in `multiplicity`
  // identical copies (one per layer).
  //
  // ZeRO-3 gathers its units whole on each rank: a decoder layer, and each
  // tensor outside the layers (token and position embeddings, final norm,
  // lm_head; a tied embedding is one tensor), each of this tensor-parallel
  // rank's shard, in its stored format, with the unit's full gradient before
  // the reduce-scatter where it is trained (docs/sizing.md).
  Wide gathered_layer = 0;    // the largest decoder layer with its gradient
  Wide gathered_largest = 0;  // the largest unit outside the layers
  Wide expert_weights = 0;
  Wide host_grads = 0;  // fp32 gradients on the host with optimizer offload
  // The stage's layers are [first_layer, first_layer + layers).
  const int64_t first_layer =
      stage * (m.num_layers / l.pp) + std::min<int64_t>(stage, m.num_layers % l.pp);
  // The stage's layers of each kind.
  std::vector<std::vector<int64_t>> stage_layers(job.layers.size());
  for (size_t k = 0; k < job.layers.size(); ++k) {
    for (int64_t i : job.layers[k].layers) {
      if (i >= first_layer && i < first_layer + layers) stage_layers[k].push_back(i);
    }
  }
  Wide gathered_kind = 0;  // one layer of the kind being added
  // Tensor `t` of each of `held` (layers; {-1}: a tensor outside them).
  auto add = [&](const TensorSpec& t, const std::vector<int64_t>& held) {
    const bool in_layer = held.front() >= 0;
    const int64_t multiplicity = static_cast<int64_t>(held.size());
    int64_t rows, cols;
    Shard(t, l, m, rows, cols);
    // Of one layer (the largest, when a mix stores layers differently), and
    // of all `multiplicity` copies.
    Wide one = TensorBytes(WeightScheme(job, t, held.front()), rows, cols, t.count);
    Wide w = one * multiplicity;
    if (job.recipe != nullptr && in_layer) {
      w = 0;
      for (int64_t i : held) {
        const Wide bytes = TensorBytes(WeightScheme(job, t, i), rows, cols, t.count);
        w += bytes;
        one = std::max(one, bytes);
      }
    }
    b.weights += w;
    if (t.count > 1) expert_weights += w;
    Wide gathered = one;  // this tensor of one layer, gathered, with its gradients
    auto train = [&](int64_t r, int64_t c) {
      const Wide g = TensorBytes(*job.grads, r, c, t.count);
      gathered += g;
      b.gradients += g * multiplicity;
      if (job.master != nullptr) b.master += TensorBytes(*job.master, r, c, t.count) * multiplicity;
      b.optimizer += OptimizerBytes(job, r, c, t.count) * multiplicity;
      if (job.host_grads != nullptr) {
        host_grads += TensorBytes(*job.host_grads, r, c, t.count) * multiplicity;
      }
    };
    if (job.training && !job.adapters) train(rows, cols);
    if (IsTarget(job, t)) {
      // A [rank, in] and B [out, rank] on the base's shard: the side tensor
      // parallelism does not divide is held whole.
      const Wide adapters = AdapterBytes(job, t, rows, cols);
      gathered += adapters;
      b.weights += adapters * multiplicity;
      train(o.lora_rank, cols);
      train(rows, o.lora_rank);
    }
    if (in_layer) {
      gathered_kind += gathered;
    } else {
      gathered_largest = std::max(gathered_largest, gathered);
    }
  };
  const std::vector<int64_t> outside = {-1};
  if (first) {
    for (const TensorSpec& t : job.input) add(t, outside);
  }
  for (size_t k = 0; k < job.layers.size(); ++k) {
    if (stage_layers[k].empty()) continue;
    gathered_kind = 0;
    for (const TensorSpec& t : job.layers[k].tensors) add(t, stage_layers[k]);
    gathered_layer = std::max(gathered_layer, gathered_kind);
  }
  if (last) {
    for (const TensorSpec& t : job.output) add(t, outside);
    // Tied embeddings split across stages: the last stage keeps its own copy
    // of the embedding as the lm_head (Megatron-LM).
    if (m.tie_word_embeddings && l.pp > 1) {
      for (const TensorSpec& t : job.input) {
        if (t.component == Component::kEmbedding && t.name == "embed_tokens") add(t, outside);
      }
    }
  }

  // ZeRO partitions among the data-parallel ranks: stage 1 the optimizer
  // states (with the master weights), 2 also the gradients, 3 also the
  // weights; flat partitions rounded up.
  if (l.zero >= 1) {
    b.optimizer = CeilDiv(b.optimizer, l.dp);
    b.master = CeilDiv(b.master, l.dp);
  }
  if (l.zero >= 2) b.gradients = CeilDiv(b.gradients, l.dp);
  if (l.zero >= 3) {
    b.weights = CeilDiv(b.weights, l.dp);
    // The largest unit gathered for its forward and backward.
    b.workspace += std::max(gathered_layer, gathered_largest);
  }
  if (o.mode == Mode::kQlora) {
    // The largest linear dequantized for its matmul.
    Wide largest = 0;
    for (const LayerKind& kind : job.layers) {
      for (const TensorSpec& t : kind.tensors) {
        if (!t.linear) continue;
        int64_t rows, cols;
        Shard(t, l, m, rows, cols);
        largest = std::max(largest, TensorBytes(*job.embed, rows, cols));
      }
    }
    b.workspace += largest;
  }
  if (l.offload) {
    // ZeRO-Offload: the optimizer steps on the host, with fp32 master
    // weights, states and gradients of this rank's partition there.
    b.host = b.master + b.optimizer + CeilDiv(host_grads, l.dp);
    b.master = b.optimizer = 0;
  }

  const Wide act = o.activation_bytes;
  const Wide h = m.hidden_size;
  const Wide vocab_rows = CeilDiv(Wide{m.vocab_size}, l.tp);
  if (job.training) {
    // 1F1B: stage i holds the activations of pp - i micro-batches.
    const Wide in_flight = l.pp - stage;
    Wide rebuilt = 0;
    for (size_t k = 0; k < job.layers.size(); ++k) {
      if (stage_layers[k].empty()) continue;
      const Wide count = static_cast<Wide>(stage_layers[k].size());
      b.activations +=
          LayerActivations(job, job.layers[k], l, seq, batch, o.recompute) * count * in_flight;
      if (o.recompute == Recompute::kFull) {
        rebuilt = std::max(rebuilt,
                           LayerActivations(job, job.layers[k], l, seq, batch, Recompute::kNone));
      }
    }
    // Full recomputation rebuilds one layer's activations for its backward.
    if (o.recompute == Recompute::kFull) b.workspace += rebuilt;
    const Wide sb = Wide{seq} * batch;
    const Wide sb_replicated = l.ReplicatedTokens(seq, batch);
    if (first && m.dropout)
      b.activations += sb_replicated * h * in_flight;  // embedding dropout mask
    if (last) {
      // Final norm input, lm_head input, fp32 logits for the loss.
      b.activations += 2 * act * sb_replicated * h + 4 * sb * vocab_rows;
    }
  } else {
    // The forward pass's workspace, reused by every layer: the residual and
    // the normed input, plus the wider of attention (q, k, v, output) and
    // MLP intermediates, for the tokens of one prefill chunk; fp32 logits of
    // each sequence's last token.
    const AttentionWidths w = AttentionOf(m, l);
    const Wide attention = w.q + w.k + w.v + w.out + w.latents;
    // A mixture of experts: k experts' intermediates (ExpertWidth wide) and
    // the shared expert's; the widest kind of layer on the stage.
    Wide mlp = 0;
    for (size_t k = 0; k < job.layers.size(); ++k) {
      if (stage_layers[k].empty()) continue;
      const bool moe = job.layers[k].moe;
      const Wide experts = moe ? m.experts_per_token : 1;
      const Wide width = moe ? ExpertWidth(m) : m.intermediate_size;
      const Wide shared = moe ? m.shared_expert_intermediate_size : 0;
      mlp = std::max(mlp, (Wide{width} / l.tp * experts + shared / l.tp) * (m.gated_mlp ? 3 : 2));
    }
    b.activations = Wide{PrefillTokens(o, seq, batch)} * act * (2 * h + std::max(attention, mlp));
    if (last) b.activations += 4 * Wide{batch} * vocab_rows;
    if (m.kv_lora_rank > 0) {
      // Multi-head latent attention caches each token's latent and its
      // shared rotated key part, kv_lora_rank + qk_rope_head_dim values per
      // layer, as vLLM, SGLang and llama.cpp do; every tensor-parallel
      // device holds all of it. Each sequence's cache is priced as its own
      // [seq, kv_lora_rank + qk_rope_head_dim] tensor per layer.
      b.kv_cache = Wide{layers} * batch *
                   TensorBytes(*job.kv, seq, m.kv_lora_rank + m.qk_rope_head_dim);
    } else {
      // K and V of every layer for every token of every sequence. Each
      // sequence's cache is priced as its own [seq * kv_heads, head_dim]
      // tensor per layer for K and for V.
      b.kv_cache = 2 * Wide{layers} * batch * TensorBytes(*job.kv, seq * l.kv_heads, m.head_dim);
    }
    // A decode step reads the weights and the KV cache. Of a mixture of
    // experts it reads the experts the batch's tokens are routed to: k of E
    // for one sequence; for b sequences routed uniformly and independently,
    // E (1 - (1 - k/E)^b) expected.
    Wide read = b.weights;
    if (m.num_experts > 0) {
      const double e = static_cast<double>(m.num_experts);
      const double used =
          e * (1 - std::pow(1 - static_cast<double>(m.experts_per_token) / e, batch));
      read -= expert_weights -
              static_cast<Wide>(std::llround(static_cast<double>(expert_weights) * used / e));
    }
    b.decode_read = read + b.kv_cache;
  }
  b.buffers = l.buffers;
  return b;
}

// The most loaded stage of a layout; false when a count passes 2^63.
struct DeviceEstimate {
  Bytes bytes;
  int stage = 0;
  int64_t host = 0;
  int64_t decode_read = 0;  // summed over the stages of one pipeline path
};
bool EstimateDevice(const Job& job, const Layout& l, int64_t seq, int64_t batch,
                    DeviceEstimate& out) {
  Wide best = -1, read = 0;
  for (int stage = 0; stage < l.pp; ++stage) {
    const WideBytes b = StageBytes(job, l, stage, seq, batch);
    read += b.decode_read;
    if (b.total() > best) {
      best = b.total();
      out.stage = stage;
      if (!b.Narrow(out.bytes)) return false;
      out.host = static_cast<int64_t>(b.host);
    }
  }
  if (read > kMaxBytes) return false;
  out.decode_read = static_cast<int64_t>(read);
  return true;
}

Layout LayoutOf(const ModelConfig& m, const SizingOptions& o) {
  return Layout(m, o.dp, o.tp, o.pp, o.zero, o.sequence_parallel, o.offload_optimizer,
                o.buffers_bytes);
}

// The largest value in [1, cap] for which `fits` holds, 0 if none; `fits`
// is monotone (true up to some value, false above).
template <typename Fits>
int64_t LargestFitting(int64_t cap, Fits fits) {
  if (!fits(1)) return 0;
  int64_t lo = 1, hi = cap;
  while (lo < hi) {
    const int64_t mid = lo + (hi - lo + 1) / 2;
    if (fits(mid)) {
      lo = mid;
    } else {
      hi = mid - 1;
    }
  }
  return lo;
}

}  // namespace

absl::StatusOr<Mode> ParseMode(absl::string_view name) {
  const std::string n = absl::AsciiStrToLower(name);
  for (Mode m : {Mode::kPretrain, Mode::kFinetune, Mode::kLora, Mode::kQlora, Mode::kInference}) {
    if (n == ModeName(m)) return m;
  }
  return OptionError("mode", absl::StrCat("unknown mode '", name,
                                          "' (pretrain, finetune, lora, qlora, inference)"));
}

absl::StatusOr<Optimizer> ParseOptimizer(absl::string_view name) {
  const std::string n = absl::AsciiStrToLower(name);
  for (Optimizer o :
       {Optimizer::kAdamW, Optimizer::kAdamW8bit, Optimizer::kSgd, Optimizer::kAdafactor}) {
    if (n == OptimizerName(o)) return o;
  }
  return OptionError("optimizer", absl::StrCat("unknown optimizer '", name,
                                               "' (adamw, adamw8bit, sgd, adafactor)"));
}

absl::StatusOr<Recompute> ParseRecompute(absl::string_view name) {
  const std::string n = absl::AsciiStrToLower(name);
  for (Recompute r : {Recompute::kNone, Recompute::kSelective, Recompute::kFull}) {
    if (n == RecomputeName(r)) return r;
  }
  return OptionError("recompute",
                     absl::StrCat("unknown value '", name, "' (none, selective, full)"));
}

absl::string_view ModeName(Mode mode) {
  switch (mode) {
    case Mode::kPretrain:
      return "pretrain";
    case Mode::kFinetune:
      return "finetune";
    case Mode::kLora:
      return "lora";
    case Mode::kQlora:
      return "qlora";
    case Mode::kInference:
      return "inference";
  }
  return "?";
}

absl::string_view OptimizerName(Optimizer optimizer) {
  switch (optimizer) {
    case Optimizer::kAdamW:
      return "adamw";
    case Optimizer::kAdamW8bit:
      return "adamw8bit";
    case Optimizer::kSgd:
      return "sgd";
    case Optimizer::kAdafactor:
      return "adafactor";
  }
  return "?";
}

absl::string_view RecomputeName(Recompute recompute) {
  switch (recompute) {
    case Recompute::kNone:
      return "none";
    case Recompute::kSelective:
      return "selective";
    case Recompute::kFull:
      return "full";
  }
  return "?";
}

absl::StatusOr<SizingReport> EstimateMemory(const ModelConfig& model, const SizingOptions& options,
                                            const Device& device) {
  absl::StatusOr<Job> resolved = Resolve(model, options);
  if (!resolved.ok()) return resolved.status();
  const Job& job = *resolved;
  const SizingOptions& o = job.options;
  if (device.memory_bytes <= 0) {
    return Invalid("device", absl::StrCat(device.name, " has no memory size"));
  }
  SizingReport r;
  r.model = model;
  r.options = o;
  r.device = device;
  r.parameters = CountParameters(model);

  const int64_t capacity = static_cast<int64_t>(
      std::floor(static_cast<double>(device.memory_bytes) * (1.0 - o.headroom)));
  r.capacity_bytes = capacity;
  r.usable_bytes = capacity - o.buffers_bytes;
  if (r.usable_bytes <= 0) {
    return Invalid("buffers and headroom",
                   absl::StrCat(o.buffers_bytes, " bytes of buffers leave nothing of ", device.name,
                                "'s ", capacity, " bytes after a headroom of ", o.headroom));
  }

  // The whole job on one imaginary device.
  const Layout whole(model, 1, 1, 1, 0, false, false, 0);
  DeviceEstimate w;
  if (!EstimateDevice(job, whole, o.seq, o.batch, w)) {
    return Invalid("seq and batch", "the job's memory would exceed 2^63 bytes");
  }
  r.whole = w.bytes;

  const Layout layout = LayoutOf(model, o);
  DeviceEstimate d;
  if (!EstimateDevice(job, layout, o.seq, o.batch, d)) {
    return Invalid("seq and batch", "the per-device memory would exceed 2^63 bytes");
  }
  r.per_device = d.bytes;
  r.pipeline_stage = d.stage;
  r.host_bytes_per_device = d.host;
  r.fits = r.per_device.total() <= capacity;
  r.devices_in_layout = o.dp * o.tp * o.pp;
  r.options.prefill_tokens = job.training ? 0 : PrefillTokens(o, o.seq, o.batch);

  // Parameters trained, and bits per weight as stored.
  int64_t linear_params = 0;
  Wide linear_bytes = 0, adapter_bytes = 0;
  for (const LayerKind& kind : job.layers) {
    const int64_t copies = static_cast<int64_t>(kind.layers.size());
    for (const TensorSpec& t : kind.tensors) {
      if (!t.linear) continue;
      linear_params += t.parameters() * copies;
      for (int64_t i : kind.layers) {
        linear_bytes += TensorBytes(WeightScheme(job, t, i), t.rows, t.cols, t.count);
      }
      if (IsTarget(job, t)) {
        r.trainable_parameters += o.lora_rank * (t.rows + t.cols) * t.count * copies;
        adapter_bytes += AdapterBytes(job, t, t.rows, t.cols) * copies;
      }
    }
  }
  if (job.training && !job.adapters) r.trainable_parameters = r.parameters.total;
  r.linear_bits_per_parameter =
      linear_params == 0 ? 0 : 8.0 * static_cast<double>(linear_bytes) / linear_params;
  // Over the model's own parameters (without the adapters, which the whole
  // estimate's weights include).
  r.weight_bits_per_parameter =
      8.0 * static_cast<double>(r.whole.weights - static_cast<int64_t>(adapter_bytes)) /
      static_cast<double>(r.parameters.total);

  r.devices_for_states_exact =
      static_cast<double>(r.whole.model_states()) / static_cast<double>(capacity);
  r.devices_for_states = static_cast<int64_t>(CeilDiv(r.whole.model_states(), capacity));
  r.devices_needed_exact =
      static_cast<double>(r.whole.total()) / static_cast<double>(r.usable_bytes);
  r.devices_needed = static_cast<int64_t>(CeilDiv(r.whole.total(), r.usable_bytes));

  auto fits_with = [&](int64_t seq, int64_t batch) {
    DeviceEstimate e;
    return EstimateDevice(job, layout, seq, batch, e) && e.bytes.total() <= capacity;
  };
  const int64_t seq_cap = model.max_position_embeddings > 0
                              ? std::min(model.max_position_embeddings, kSizingMaxSeq)
                              : kSizingMaxSeq;
  r.max_seq = LargestFitting(seq_cap, [&](int64_t s) { return fits_with(s, o.batch); });
  r.max_batch = LargestFitting(kSizingMaxBatch, [&](int64_t b) { return fits_with(o.seq, b); });

  if (!job.training) {
    r.bytes_read_per_step = d.decode_read;
    if (device.bandwidth_bytes_per_s > 0 && d.decode_read > 0) {
      r.decode_tokens_per_s_per_sequence =
          device.bandwidth_bytes_per_s / static_cast<double>(d.decode_read);
      r.decode_tokens_per_s = r.decode_tokens_per_s_per_sequence * static_cast<double>(o.batch);
    }
  }
  return r;
}

const std::vector<std::string>& DefaultCompareFormats() {
  static const std::vector<std::string> formats = {
      "fp32", "bf16", "fp8_e4m3fn", "int8-channel", "int4-g128", "nf4", "mxfp4", "q4_0"};
  return formats;
}

absl::StatusOr<std::vector<FormatRow>> CompareFormats(const ModelConfig& model,
                                                      const SizingOptions& options,
                                                      const Device& device,
                                                      const std::vector<std::string>& formats) {
  if (options.mode == Mode::kPretrain || options.mode == Mode::kFinetune) {
    return Invalid("compare_formats",
                   "compares formats of stored weights: use `mode` inference, lora or qlora");
  }
  if (formats.empty()) return Invalid("formats", "empty list");
  for (const std::string& format : formats) {
    absl::StatusOr<std::unique_ptr<Scheme>> scheme = ParseScheme(format);
    if (!scheme.ok()) return Invalid(absl::StrCat("formats ", format), scheme.status().message());
  }
  SizingOptions base = options;
  base.weights = "bf16";
  base.embed.clear();
  absl::StatusOr<SizingReport> reference = EstimateMemory(model, base, device);
  if (!reference.ok()) return reference.status();
  std::vector<FormatRow> rows;
  for (const std::string& format : formats) {
    SizingOptions o = options;
    o.weights = format;
    // The KV cache stays in the reference's format: the rows compare weights.
    o.kv = reference->options.kv;
    absl::StatusOr<SizingReport> r = EstimateMemory(model, o, device);
    if (!r.ok()) return r.status();
    FormatRow row;
    row.format = format;
    row.linear_bits_per_parameter = r->linear_bits_per_parameter;
    row.weight_bytes = r->whole.weights;
    row.saving_vs_bf16 =
        1.0 - static_cast<double>(r->whole.weights) / static_cast<double>(reference->whole.weights);
    row.per_device_bytes = r->per_device.total();
    row.fits = r->fits;
    row.devices_needed = r->devices_needed;
    row.max_seq = r->max_seq;
    row.decode_tokens_per_s_per_sequence = r->decode_tokens_per_s_per_sequence;
    rows.push_back(std::move(row));
  }
  return rows;
}

}  // namespace lowp
