#include "model/gguf_layout.h"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "model/gguf_index.h"

namespace lowp {
namespace {

constexpr uint32_t kQuantizationVersion = 2;  // GGML_QNT_VERSION

// llama-quantize's recipe names and the llama_ftype each writes
// (tools/quantize/quantize.cpp QUANT_OPTIONS, include/llama.h).
constexpr std::pair<absl::string_view, uint32_t> kRecipes[] = {
    {"F32", 0},      {"F16", 1},     {"Q4_0", 2},     {"Q4_1", 3},     {"Q8_0", 7},
    {"Q5_0", 8},     {"Q5_1", 9},    {"Q2_K", 10},    {"Q3_K_S", 11},  {"Q3_K_M", 12},
    {"Q3_K", 12},    {"Q3_K_L", 13}, {"Q4_K_S", 14},  {"Q4_K_M", 15},  {"Q4_K", 15},
    {"Q5_K_S", 16},  {"Q5_K_M", 17}, {"Q5_K", 17},    {"Q6_K", 18},    {"IQ2_XXS", 19},
    {"IQ2_XS", 20},  {"Q2_K_S", 21}, {"IQ3_XS", 22},  {"IQ3_XXS", 23}, {"IQ1_S", 24},
    {"IQ4_NL", 25},  {"IQ3_S", 26},  {"IQ3_M", 27},   {"IQ2_S", 28},   {"IQ2_M", 29},
    {"IQ4_XS", 30},  {"IQ1_M", 31},  {"BF16", 32},    {"TQ1_0", 36},   {"TQ2_0", 37},
    {"MXFP4_MOE", 38},
};

}  // namespace

absl::StatusOr<std::string> LlamaCppArchitecture(const ModelConfig& c) {
  const std::string& t = c.model_type;
  auto refuse = [&](const std::string& why) {
    return absl::InvalidArgumentError(absl::StrCat(c.name, ": ", why));
  };
  static constexpr const char* kTypes[] = {"llama",     "mistral",  "mixtral", "qwen2",
                                           "qwen3",     "qwen2_moe", "qwen3_moe", "gemma",
                                           "gemma2",    "phi3",     "gpt_oss", "deepseek_v3"};
  if (std::find(std::begin(kTypes), std::end(kTypes), t) == std::end(kTypes)) {
    return refuse(absl::StrCat("model_type ", t, " has no GGUF layout in lowp (",
                               absl::StrJoin(kTypes, ", "), ")"));
  }
  // llama.cpp's qwen2moe and qwen3moe: experts in every layer; qwen3moe
  // renormalizes the top-k weights, qwen2moe does not.
  const bool qwen_moe = t == "qwen2_moe" || t == "qwen3_moe";
  if (qwen_moe && c.norm_topk_prob != (t == "qwen3_moe")) {
    return refuse(absl::StrCat("norm_topk_prob ", c.norm_topk_prob ? "true" : "false",
                               ": llama.cpp's ", t == "qwen3_moe" ? "qwen3moe" : "qwen2moe",
                               t == "qwen3_moe" ? " renormalizes" : " does not renormalize",
                               " the top-k weights"));
  }
  if (qwen_moe && (!c.mlp_only_layers.empty() || c.decoder_sparse_step != 1)) {
    return refuse(absl::StrCat(c.mlp_only_layers.empty() ? "decoder_sparse_step" : "mlp_only_layers",
                               ": llama.cpp's ", t, " has experts in every layer"));
  }
  if (t == "qwen2_moe" && c.head_dim * c.num_heads != c.hidden_size) {
    return refuse(absl::StrCat("head_dim ", c.head_dim, ": llama.cpp's qwen2moe takes "
                               "hidden_size / num_attention_heads"));
  }
  const std::string& rope = c.rope_scaling.type;
  const bool rope_ok = rope.empty() || rope == "linear" || (rope == "llama3" && t == "llama") ||
                       (rope == "yarn" && (t == "gpt_oss" || t == "deepseek_v3")) ||
                       (rope == "longrope" && t == "phi3");
  if (!rope_ok) return refuse(absl::StrCat("rope_scaling ", rope, " is not written for ", t));
  // gpt-oss: llama.cpp windows the even layers, with its SwiGLU's alpha
  // 1.702 and limit 7 fixed.
  if (t == "gpt_oss") {
    for (int64_t layer = 0; layer < c.num_layers; ++layer) {
      if (SlidingLayer(c, layer) != (layer % 2 == 0)) {
        return refuse(absl::StrCat("layer_types: layer ", layer, " is ",
                                   SlidingLayer(c, layer) ? "" : "not ",
                                   "windowed; llama.cpp's gpt-oss windows the even layers"));
      }
    }
    if (c.swiglu_limit != 7 || c.swiglu_alpha != 1.702) {
      return refuse(absl::StrCat("swiglu_limit ", c.swiglu_limit, ", alpha ", c.swiglu_alpha,
                                 ": llama.cpp's gpt-oss fixes them at 7 and 1.702"));
    }
  }
  if (t == "deepseek_v3" && !c.rope_interleave) {
    return refuse("rope_interleave false: llama.cpp's deepseek2 rotates interleaved pairs");
  }
  // llama.cpp's YaRN for DeepSeek takes one mscale for both of
  // transformers' (the rotation's and the softmax's): DeepSeek-V2's and
  // V3's configs have them equal.
  if (t == "deepseek_v3" && rope == "yarn" &&
      (c.rope_scaling.mscale_all_dim <= 0 ||
       c.rope_scaling.mscale != c.rope_scaling.mscale_all_dim)) {
    return refuse(absl::StrCat(
        "rope_scaling mscale ", c.rope_scaling.mscale, " and mscale_all_dim ",
        c.rope_scaling.mscale_all_dim,
        ": llama.cpp's deepseek2 runs YaRN with the two equal and positive"));
  }
  if (t == "deepseek_v3" && c.num_experts > 0 && c.first_k_dense_replace >= c.num_layers) {
    return refuse("first_k_dense_replace: no layer has experts");
  }
  // What llama.cpp's architectures cannot express, refused rather than
  // written as a model that runs differently there: a sliding window on
  // llama's and qwen2's (llama.cpp attends to the whole context), Gemma 2's
  // query scaling other than its head size (or its 27B's hidden / heads,
  // which llama.cpp takes from the layer count).
  if (c.sliding_window > 0 && t != "gemma2" && t != "gpt_oss" &&
      (c.max_position_embeddings == 0 || c.sliding_window < c.max_position_embeddings)) {
    return refuse(absl::StrCat("sliding_window ", c.sliding_window, ": llama.cpp's ",
                               t == "qwen2" || t == "phi3" ? t : "llama",
                               " architecture attends to the whole context, so the file would "
                               "run as another model"));
  }
  if (t == "gemma2" && c.query_pre_attn_scalar > 0 &&
      c.query_pre_attn_scalar != static_cast<double>(c.head_dim) &&
      !(c.num_layers == 46 &&
        c.query_pre_attn_scalar == static_cast<double>(c.hidden_size / c.num_heads))) {
    return refuse(absl::StrCat("query_pre_attn_scalar ", c.query_pre_attn_scalar,
                               ": llama.cpp's gemma2 scales queries by head_dim (", c.head_dim,
                               ") but for its 27B"));
  }
  if ((t == "gemma" || t == "gemma2") && c.rope_theta != 10000) {
    return refuse(absl::StrCat("rope_theta ", c.rope_theta, ": llama.cpp's ", t,
                               " has no key for it and takes 10000"));
  }
  return std::string(LlamaCppArchitectureName(t));
}

std::vector<std::string> LlamaCppNotes(const ModelConfig& c) {
  std::vector<std::string> notes;
  if (c.model_type == "gpt_oss" && c.rope_scaling.type == "yarn" && !c.rope_scaling.truncate) {
    notes.push_back(
        "rope_scaling truncate false: llama.cpp rounds YaRN's correction range to whole "
        "dimensions (floor and ceil), as truncate true does, so it rotates some frequencies "
        "otherwise than transformers and OpenAI's reference (evaluate with truncate true to "
        "measure llama.cpp's)");
  }
  if (c.model_type == "phi3" && !c.rope_scaling.long_factor.empty()) {
    notes.push_back(
        "longrope: llama.cpp takes the long factors whenever its context (n_ctx, which it "
        "pads to a multiple of 256) exceeds original_max_position_embeddings, whatever the "
        "sequence's length; lowp's eval, as transformers, takes them by the sequence's length");
  }
  return notes;
}

bool LlamaCppPermutesQk(const ModelConfig& config) {
  const std::string& t = config.model_type;
  return t == "llama" || t == "mistral" || t == "mixtral";
}

absl::Status AddLlamaCppModelKeys(const ModelConfig& c, absl::string_view name,
                                  uint32_t file_type, GgufWriter& out) {
  absl::StatusOr<std::string> arch = LlamaCppArchitecture(c);
  if (!arch.ok()) return arch.status();
  const std::string& a = *arch;
  auto key = [&a](absl::string_view suffix) { return absl::StrCat(a, ".", suffix); };
  auto u32 = [](int64_t v) { return static_cast<uint32_t>(v); };
  out.AddString("general.architecture", a);
  out.AddString("general.type", "model");
  out.AddString("general.name", name);
  const bool gemma = a == "gemma" || a == "gemma2";
  if (gemma) {  // GemmaModel / Gemma2Model.set_gguf_parameters: their own list
    out.AddU32(key("context_length"), u32(c.max_position_embeddings));
    out.AddU32(key("embedding_length"), u32(c.hidden_size));
    out.AddU32(key("block_count"), u32(c.num_layers));
    out.AddU32(key("feed_forward_length"), u32(c.intermediate_size));
    out.AddU32(key("attention.head_count"), u32(c.num_heads));
    out.AddU32(key("attention.head_count_kv"), u32(c.num_kv_heads));
    out.AddF32(key("attention.layer_norm_rms_epsilon"), static_cast<float>(c.rms_norm_eps));
    out.AddU32(key("attention.key_length"), u32(c.head_dim));
    out.AddU32(key("attention.value_length"), u32(c.head_dim));
    out.AddU32("general.file_type", file_type);
    if (a == "gemma2") {
      out.AddF32(key("attn_logit_softcapping"), static_cast<float>(c.attn_logit_softcapping));
      out.AddF32(key("final_logit_softcapping"), static_cast<float>(c.final_logit_softcapping));
      out.AddU32(key("attention.sliding_window"), u32(c.sliding_window));
    }
  } else if (a == "phi3") {  // Phi3MiniModel.set_gguf_parameters: its own list
    const int64_t original = c.rope_scaling.original_max_position_embeddings > 0
                                 ? c.rope_scaling.original_max_position_embeddings
                                 : c.max_position_embeddings;
    out.AddU32(key("context_length"), u32(c.max_position_embeddings));
    out.AddU32(key("rope.scaling.original_context_length"), u32(original));
    out.AddU32(key("embedding_length"), u32(c.hidden_size));
    out.AddU32(key("feed_forward_length"), u32(c.intermediate_size));
    out.AddU32(key("block_count"), u32(c.num_layers));
    out.AddU32(key("attention.head_count"), u32(c.num_heads));
    out.AddU32(key("attention.head_count_kv"), u32(c.num_kv_heads));
    out.AddF32(key("attention.layer_norm_rms_epsilon"), static_cast<float>(c.rms_norm_eps));
    out.AddU32(key("rope.dimension_count"), u32(RotaryDim(c)));
    out.AddF32(key("rope.freq_base"), static_cast<float>(c.rope_theta));
    out.AddU32("general.file_type", file_type);
    out.AddU32(key("attention.sliding_window"), u32(std::max<int64_t>(c.sliding_window, 0)));
    if (!c.rope_scaling.long_factor.empty()) {  // generate_extra_tensors' attention factor
      const double scale = static_cast<double>(c.max_position_embeddings) / original;
      const double factor =
          scale > 1 ? std::sqrt(1 + std::log(scale) / std::log(static_cast<double>(original))) : 1;
      out.AddF32(key("rope.scaling.attn_factor"), static_cast<float>(factor));
    }
  } else {  // TextModel.set_gguf_parameters, then the subclass's extras
    const bool deepseek = a == "deepseek2";
    out.AddU32(key("block_count"), u32(c.num_layers));
    if (c.max_position_embeddings > 0) {
      out.AddU32(key("context_length"), u32(c.max_position_embeddings));
    }
    out.AddU32(key("embedding_length"), u32(c.hidden_size));
    out.AddU32(key("feed_forward_length"), u32(c.intermediate_size));
    out.AddU32(key("attention.head_count"), u32(c.num_heads));
    // DeepSeek's latent attention is written as one key-value head (MQA).
    out.AddU32(key("attention.head_count_kv"), u32(deepseek ? 1 : c.num_kv_heads));
    const RopeScaling& r = c.rope_scaling;
    if (r.type == "linear") {
      out.AddString(key("rope.scaling.type"), "linear");
      out.AddF32(key("rope.scaling.factor"), static_cast<float>(r.factor));
    } else if (r.type == "yarn") {
      out.AddString(key("rope.scaling.type"), "yarn");
      out.AddF32(key("rope.scaling.factor"), static_cast<float>(r.factor));
      out.AddU32(key("rope.scaling.original_context_length"),
                 u32(r.original_max_position_embeddings));
      if (r.attention_factor > 0) {
        out.AddF32(key("rope.scaling.yarn_attn_factor"), static_cast<float>(r.attention_factor));
      }
      out.AddF32(key("rope.scaling.yarn_beta_fast"), static_cast<float>(r.beta_fast));
      out.AddF32(key("rope.scaling.yarn_beta_slow"), static_cast<float>(r.beta_slow));
    }
    out.AddF32(key("rope.freq_base"), static_cast<float>(c.rope_theta));
    out.AddF32(key("attention.layer_norm_rms_epsilon"), static_cast<float>(c.rms_norm_eps));
    if (c.num_experts > 0) {
      out.AddU32(key("expert_count"), u32(c.num_experts));
      out.AddU32(key("expert_used_count"), u32(c.experts_per_token));
    }
    if (deepseek) {
      out.AddU32(key("expert_group_count"), u32(c.n_group));
      out.AddU32(key("expert_group_used_count"), u32(c.topk_group));
      out.AddU32(key("expert_gating_func"), 2);  // sigmoid
    }
    // The converter writes these from a config's head_dim; written here
    // where llama.cpp's default (embedding_length / head_count) is not it.
    if (!deepseek && c.head_dim * c.num_heads != c.hidden_size) {
      out.AddU32(key("attention.key_length"), u32(c.head_dim));
      out.AddU32(key("attention.value_length"), u32(c.head_dim));
    }
    out.AddU32("general.file_type", file_type);
    if (a == "llama") {
      out.AddU32(key("vocab_size"), u32(c.vocab_size));
      out.AddU32(key("rope.dimension_count"), u32(c.head_dim));
    }
    if (a == "qwen3moe" || a == "qwen2moe") {  // Qwen2MoeModel.set_gguf_parameters' additions
      out.AddU32(key("expert_feed_forward_length"), u32(ExpertWidth(c)));
    }
    if (a == "qwen2moe") {
      out.AddU32(key("expert_shared_feed_forward_length"), u32(c.shared_expert_intermediate_size));
    }
    if (a == "gpt-oss") {  // GptOssModel.set_gguf_parameters
      out.AddU32(key("attention.sliding_window"), u32(c.sliding_window));
      out.AddU32(key("expert_feed_forward_length"), u32(ExpertWidth(c)));
    }
    if (deepseek) {  // DeepseekV2Model.set_gguf_parameters
      out.AddU32(key("leading_dense_block_count"), u32(c.first_k_dense_replace));
      out.AddU32(key("vocab_size"), u32(c.vocab_size));
      // 0 for q_proj: the converter leaves the key out, which llama.cpp
      // takes for its lite shapes only (26 or 27 layers) and refuses for
      // others; 0 loads as q_proj in all.
      out.AddU32(key("attention.q_lora_rank"), u32(c.q_lora_rank));
      out.AddU32(key("attention.kv_lora_rank"), u32(c.kv_lora_rank));
      out.AddU32(key("attention.key_length"), u32(c.kv_lora_rank + c.qk_rope_head_dim));
      out.AddU32(key("attention.value_length"), u32(c.kv_lora_rank));
      out.AddU32(key("attention.key_length_mla"), u32(KeyHeadDim(c)));
      out.AddU32(key("attention.value_length_mla"), u32(ValueHeadDim(c)));
      out.AddU32(key("expert_feed_forward_length"), u32(ExpertWidth(c)));
      out.AddU32(key("expert_shared_count"),
                 u32(c.shared_expert_intermediate_size / ExpertWidth(c)));
      out.AddF32(key("expert_weights_scale"), static_cast<float>(c.routed_scaling_factor));
      if (c.norm_topk_prob) out.AddBool(key("expert_weights_norm"), true);
      out.AddU32(key("rope.dimension_count"), u32(c.qk_rope_head_dim));
      if (r.type == "yarn" && r.mscale_all_dim > 0) {
        out.AddF32(key("rope.scaling.yarn_log_multiplier"),
                   static_cast<float>(0.1 * r.mscale_all_dim));
      }
    }
  }
  out.AddU32("general.quantization_version", kQuantizationVersion);
  return absl::OkStatus();
}

std::optional<uint32_t> LlamaCppRecipeFileType(absl::string_view recipe) {
  const std::string upper = absl::AsciiStrToUpper(recipe);
  for (const auto& [name, type] : kRecipes) {
    if (upper == name) return type;
  }
  return std::nullopt;
}

std::optional<uint32_t> LlamaCppTypeFileType(ggml::Type type) {
  using T = ggml::Type;
  switch (type) {
    case T::kF32: return 0;
    case T::kF16: return 1;
    case T::kQ4_0: return 2;
    case T::kQ4_1: return 3;
    case T::kQ8_0: return 7;
    case T::kQ5_0: return 8;
    case T::kQ5_1: return 9;
    case T::kQ2_K: return 10;
    case T::kQ3_K: return 12;
    case T::kQ4_K: return 15;
    case T::kQ5_K: return 17;
    case T::kQ6_K: return 18;
    case T::kIQ2_XXS: return 19;
    case T::kIQ2_XS: return 20;
    case T::kIQ3_XXS: return 23;
    case T::kIQ1_S: return 24;
    case T::kIQ4_NL: return 25;
    case T::kIQ3_S: return 26;
    case T::kIQ2_S: return 28;
    case T::kIQ4_XS: return 30;
    case T::kIQ1_M: return 31;
    case T::kBF16: return 32;
    case T::kTQ1_0: return 36;
    case T::kTQ2_0: return 37;
    case T::kMXFP4: return 38;
    case T::kNVFP4: return 39;
    default: return std::nullopt;
  }
}

}  // namespace lowp
