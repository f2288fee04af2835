// Reading a Hugging Face config.json into a ModelConfig (model/config.h):
// untrusted input, every field checked by type and range.
#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <optional>
#include <set>
#include <string>
#include <system_error>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "nlohmann/json.hpp"
#include "io/mapped_file.h"
#include "io/strict_json.h"
#include "model/config.h"

namespace lowp {
namespace {

using Json = nlohmann::ordered_json;

// A config.json is a few kilobytes; anything far larger is not one, and is
// refused before the parser spends memory on it.
constexpr int64_t kMaxConfigBytes = int64_t{16} << 20;
constexpr int64_t kMaxDimension = kMaxModelDimension;

absl::Status FieldError(absl::string_view source, absl::string_view field,
                        absl::string_view message) {
  return absl::InvalidArgumentError(absl::StrCat(source, ": \"", field, "\" ", message));
}


// "a string", "an integer", ...: what a JSON value is, for messages.
absl::string_view Described(const Json& value) {
  if (value.is_number_integer()) return "an integer";
  if (value.is_number_float()) return "a number";
  if (value.is_array()) return "an array";
  if (value.is_object()) return "an object";
  if (value.is_boolean()) return "a boolean";
  if (value.is_string()) return "a string";
  return "null";
}

// Reads the fields of a config.json. A multimodal model's text fields live
// in "text_config"; a key found there wins over the top level, the way
// Hugging Face builds the text model from that object alone plus the
// top-level defaults.
//
// The first bad field is kept in status() and every later read returns a
// default, so a caller reads a group of fields and checks once.
class FieldReader {
 public:
  // `prefix` names a nested object in messages ("rope_scaling.").
  FieldReader(const Json& top, const Json* text, absl::string_view source,
              std::string prefix = "")
      : top_(top), text_(text), source_(source), prefix_(std::move(prefix)) {}

  const absl::Status& status() const { return status_; }

  // A positive integer no larger than 2^40; nullopt when the key is absent
  // or null. Floats with no fractional part (4096.0) are accepted, since
  // some exporters write them; fractions, strings and booleans are not.
  std::optional<int64_t> OptionalSize(const std::string& key) {
    std::string where;
    const Json* value = Find(key, &where);
    if (value == nullptr || value->is_null()) return std::nullopt;
    int64_t n = 0;
    if (value->is_number_unsigned()) {
      const uint64_t u = value->get<uint64_t>();
      n = u > static_cast<uint64_t>(kMaxDimension) ? kMaxDimension + 1 : static_cast<int64_t>(u);
    } else if (value->is_number_integer()) {
      n = value->get<int64_t>();
    } else if (value->is_number_float()) {
      const double d = value->get<double>();
      if (!std::isfinite(d) || d != std::floor(d)) {
        Fail(where, absl::StrCat("is ", value->dump(), ", not an integer"));
        return std::nullopt;
      }
      n = d > static_cast<double>(kMaxDimension) ? kMaxDimension + 1
          : d < 0                                ? -1
                                                 : static_cast<int64_t>(d);
    } else {
      Fail(where, absl::StrCat("is ", Described(*value), ", not an integer"));
      return std::nullopt;
    }
    if (n > kMaxDimension) {
      Fail(where, absl::StrCat("is ", value->dump(), ", above the limit of 2^40"));
      return std::nullopt;
    }
    if (n <= 0) {
      Fail(where, absl::StrCat("is ", value->dump(), "; it must be positive"));
      return std::nullopt;
    }
    return n;
  }

  // A required OptionalSize; 0 when missing or bad.
  int64_t Size(const std::string& key) {
    const std::optional<int64_t> n = OptionalSize(key);
    if (!n.has_value()) Fail(key, "is missing");
    return n.value_or(0);
  }

  // An array of layer indices (integers 0 to 2^40); empty when absent or
  // null.
  std::vector<int64_t> LayerList(const std::string& key) {
    std::string where;
    const Json* value = Find(key, &where);
    std::vector<int64_t> out;
    if (value == nullptr || value->is_null()) return out;
    if (!value->is_array()) {
      Fail(where, absl::StrCat("is ", Described(*value), ", not an array of layer indices"));
      return out;
    }
    for (const Json& v : *value) {
      if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() > kMaxDimension) {
        Fail(where, absl::StrCat("holds ", v.dump(), ", not a layer index"));
        return {};
      }
      out.push_back(v.get<int64_t>());
    }
    return out;
  }

  // An array of finite numbers; empty when absent or null (or bad).
  std::vector<double> NumberList(const std::string& key) {
    std::string where;
    const Json* value = Find(key, &where);
    std::vector<double> out;
    if (value == nullptr || value->is_null()) return out;
    if (!value->is_array()) {
      Fail(where, absl::StrCat("is ", Described(*value), ", not an array of numbers"));
      return out;
    }
    for (const Json& v : *value) {
      if (!v.is_number() || !std::isfinite(v.get<double>())) {
        Fail(where, absl::StrCat("holds ", Described(v), ", not a finite number"));
        return {};
      }
      out.push_back(v.get<double>());
    }
    return out;
  }

  // An array of strings; nullopt when absent or null (or bad).
  std::optional<std::vector<std::string>> StringList(const std::string& key) {
    std::string where;
    const Json* value = Find(key, &where);
    if (value == nullptr || value->is_null()) return std::nullopt;
    if (!value->is_array()) {
      Fail(where, absl::StrCat("is ", Described(*value), ", not an array of strings"));
      return std::nullopt;
    }
    std::vector<std::string> out;
    for (const Json& v : *value) {
      if (!v.is_string()) {
        Fail(where, absl::StrCat("holds ", Described(v), ", not a string"));
        return std::nullopt;
      }
      out.push_back(v.get<std::string>());
    }
    return out;
  }

  // A boolean; `fallback` when absent, null or bad.
  bool Bool(const std::string& key, bool fallback) {
    std::string where;
    const Json* value = Find(key, &where);
    if (value == nullptr || value->is_null()) return fallback;
    if (!value->is_boolean()) {
      Fail(where, absl::StrCat("is ", Described(*value), ", not true or false"));
      return fallback;
    }
    return value->get<bool>();
  }

  // A string; nullopt when absent, null or bad.
  std::optional<std::string> OptionalString(const std::string& key) {
    std::string where;
    const Json* value = Find(key, &where);
    if (value == nullptr || value->is_null()) return std::nullopt;
    if (!value->is_string()) {
      Fail(where, absl::StrCat("is ", Described(*value), ", not a string"));
      return std::nullopt;
    }
    return value->get<std::string>();
  }

  // A finite number; nullopt when absent, null or bad.
  std::optional<double> OptionalNumber(const std::string& key) {
    std::string where;
    const Json* value = Find(key, &where);
    if (value == nullptr || value->is_null()) return std::nullopt;
    if (!value->is_number() || !std::isfinite(value->get<double>())) {
      Fail(where, absl::StrCat("is ", Described(*value), ", not a finite number"));
      return std::nullopt;
    }
    return value->get<double>();
  }

  // An object; null when absent or null (an error when another type).
  const Json* OptionalObject(const std::string& key) {
    std::string where;
    const Json* value = Find(key, &where);
    if (value == nullptr || value->is_null()) return nullptr;
    if (!value->is_object()) {
      Fail(where, absl::StrCat("is ", Described(*value), ", not an object"));
      return nullptr;
    }
    return value;
  }

  // Keeps another reader's error unless an earlier one is kept.
  void Adopt(const absl::Status& status) {
    if (status_.ok()) status_ = status;
  }

  // Whether the key is present (null included).
  bool Has(const std::string& key) const {
    std::string where;
    return Find(key, &where) != nullptr;
  }

  // Records an error about `field` unless an earlier one is kept.
  void Fail(absl::string_view field, absl::string_view message) {
    if (status_.ok()) status_ = FieldError(source_, field, message);
  }

 private:
  // The value of `key`, or null when absent; `*where` is the key as a user
  // finds it in the file ("text_config.hidden_size").
  const Json* Find(const std::string& key, std::string* where) const {
    if (text_ != nullptr) {
      if (auto it = text_->find(key); it != text_->end()) {
        *where = "text_config." + key;
        return &*it;
      }
    }
    *where = prefix_ + key;
    auto it = top_.find(key);
    return it == top_.end() ? nullptr : &*it;
  }

  const Json& top_;
  const Json* text_;
  absl::string_view source_;
  std::string prefix_;
  absl::Status status_;
};

// What a model_type fixes about the architecture, beyond the config fields.
struct Family {
  const char* model_type;
  bool tie_default = false;  // Hugging Face's default for tie_word_embeddings
  // The config class has an attention_bias field (default false); without
  // one, `attention_bias` is fixed.
  bool reads_attention_bias = false;
  bool attention_bias = false;
  bool qk_norm = false;
  int norms_per_layer = 2;
  bool mixture_of_experts = false;
  // Qwen3-MoE's fields (num_experts, moe_intermediate_size, norm_topk_prob,
  // decoder_sparse_step, mlp_only_layers) rather than Mixtral's
  // (num_local_experts, experts intermediate_size wide, always renormalized).
  bool qwen_moe = false;
  // The config class defaults head_dim to a constant (Gemma: 256, Qwen3:
  // 128), not to hidden_size / num_attention_heads, so a config without it
  // is ambiguous and is refused rather than guessed.
  bool requires_head_dim = false;
  // Gemma: RMSNorm scales by 1 + w, embeddings are multiplied by
  // sqrt(hidden_size), the activation is read from hidden_activation and is
  // tanh-approximated GELU unless it says otherwise.
  bool gemma = false;
  // Hugging Face's default when config.json has no sliding_window key (a
  // null one means no window), and whether use_sliding_window gates it.
  int64_t default_window = 0;
  bool window_gated = false;
  SlidingLayers sliding_layers = SlidingLayers::kAll;
  // kListed without layer_types: every layer but each pattern-th is windowed.
  int64_t default_window_pattern = 6;
  // A sliding_window key with no default: absent or null means no window.
  bool optional_window = false;
  double default_rope_theta = 10000;
};

constexpr Family kFamilies[] = {
    {.model_type = "llama", .reads_attention_bias = true},
    {.model_type = "mistral", .default_window = 4096},
    {.model_type = "qwen2",
     .attention_bias = true,
     .default_window = 4096,
     .window_gated = true,
     .sliding_layers = SlidingLayers::kFrom},
    {.model_type = "qwen3",
     .reads_attention_bias = true,
     .qk_norm = true,
     .requires_head_dim = true,
     .default_window = 4096,
     .window_gated = true,
     .sliding_layers = SlidingLayers::kFrom},
    {.model_type = "gemma",
     .tie_default = true,
     .reads_attention_bias = true,
     .requires_head_dim = true,
     .gemma = true},
    {.model_type = "gemma2",
     .tie_default = true,
     .reads_attention_bias = true,
     .norms_per_layer = 4,
     .requires_head_dim = true,
     .gemma = true,
     .default_window = 4096,
     .sliding_layers = SlidingLayers::kEven},
    {.model_type = "gemma3_text",
     .tie_default = true,
     .reads_attention_bias = true,
     .qk_norm = true,
     .norms_per_layer = 4,
     .requires_head_dim = true,
     .gemma = true,
     .default_window = 4096,
     .sliding_layers = SlidingLayers::kListed,
     .default_rope_theta = 1e6},
    {.model_type = "mixtral", .mixture_of_experts = true, .default_rope_theta = 1e6},
    {.model_type = "qwen2_moe",
     .attention_bias = true,
     .mixture_of_experts = true,
     .qwen_moe = true,
     .default_window = 4096,
     .window_gated = true,
     .sliding_layers = SlidingLayers::kFrom},
    {.model_type = "qwen3_moe",
     .reads_attention_bias = true,
     .qk_norm = true,
     .mixture_of_experts = true,
     .qwen_moe = true,
     .requires_head_dim = true,
     .default_window = 4096,
     .window_gated = true,
     .sliding_layers = SlidingLayers::kFrom},
    // GptOssConfig: biases on q, k, v, o unless attention_bias is false,
    // even layers windowed by default.
    {.model_type = "gpt_oss",
     .reads_attention_bias = true,
     .attention_bias = true,
     .mixture_of_experts = true,
     .requires_head_dim = true,
     .default_window = 128,
     .sliding_layers = SlidingLayers::kListed,
     .default_window_pattern = 2,
     .default_rope_theta = 150000},
    {.model_type = "phi3", .optional_window = true},
    // DeepseekV3Config (Kimi K2's too): no window; keys and values from
    // latents (MLA).
    {.model_type = "deepseek_v3", .reads_attention_bias = true, .mixture_of_experts = true},
};

// Gemma 3's and gpt-oss's windowed layers: layer_types ("sliding_attention"
// or "full_attention" per layer) where given, else every layer but each
// sliding_window_pattern-th (Gemma3TextConfig's default 6; gpt-oss's 2).
void ReadLayerTypes(FieldReader& fields, int64_t default_pattern, ModelConfig& m) {
  const int64_t layers = m.num_layers;
  m.window_layers.assign(static_cast<size_t>(std::max<int64_t>(0, layers)), false);
  const std::optional<std::vector<std::string>> listed = fields.StringList("layer_types");
  if (!fields.status().ok()) return;
  if (listed.has_value()) {
    const std::vector<std::string>& types = *listed;
    if (static_cast<int64_t>(types.size()) != layers) {
      fields.Fail("layer_types", absl::StrCat("lists ", types.size(), " layers, not ",
                                              "num_hidden_layers (", layers, ")"));
      return;
    }
    for (size_t i = 0; i < types.size(); ++i) {
      if (types[i] != "sliding_attention" && types[i] != "full_attention") {
        fields.Fail("layer_types", absl::StrCat("holds \"", types[i],
                                                "\" (lowp runs sliding_attention and "
                                                "full_attention)"));
        return;
      }
      m.window_layers[i] = types[i] == "sliding_attention";
    }
    return;
  }
  const int64_t pattern = fields.OptionalSize("sliding_window_pattern").value_or(default_pattern);
  for (int64_t i = 0; i < layers; ++i) {
    m.window_layers[static_cast<size_t>(i)] = (i + 1) % pattern != 0;
  }
}

// rope_theta and rope_scaling, or transformers 5's rope_parameters (the
// two in one object) where the config has it. The pretrained context of
// llama3 defaults to 8192, yarn's to max_position_embeddings, longrope's
// (Phi-3) is the top-level original_max_position_embeddings; yarn and
// longrope then take factor = max_position_embeddings / that context, as
// modeling_rope_utils does when the config names it.
void ReadRope(FieldReader& fields, const Family& family, const std::string& source,
              ModelConfig& m) {
  const bool v5 = fields.Has("rope_parameters");
  const Json* rope = fields.OptionalObject(v5 ? "rope_parameters" : "rope_scaling");
  const std::string prefix = v5 ? "rope_parameters." : "rope_scaling.";
  m.rope_theta = fields.OptionalNumber("rope_theta").value_or(family.default_rope_theta);
  if (rope == nullptr) {
    if (!(m.rope_theta > 0)) fields.Fail("rope_theta", "must be positive");
    if (m.model_type == "gpt_oss") {  // GptOssConfig's default, also for null
      m.rope_scaling.type = "yarn";
      m.rope_scaling.factor = 32;
      m.rope_scaling.original_max_position_embeddings = 4096;
      m.rope_scaling.truncate = false;
    }
    return;
  }
  FieldReader scaling(*rope, nullptr, source, prefix);
  if (v5) m.rope_theta = scaling.OptionalNumber("rope_theta").value_or(m.rope_theta);
  if (!(m.rope_theta > 0)) fields.Fail(v5 ? prefix + "rope_theta" : "rope_theta", "must be positive");
  std::optional<std::string> type = scaling.OptionalString("rope_type");
  if (!type.has_value()) type = scaling.OptionalString("type");
  RopeScaling& r = m.rope_scaling;
  r.type = type.value_or("");
  if (r.type == "default") r.type.clear();
  r.factor = scaling.OptionalNumber("factor").value_or(1);
  r.low_freq_factor = scaling.OptionalNumber("low_freq_factor").value_or(1);
  r.high_freq_factor = scaling.OptionalNumber("high_freq_factor").value_or(4);
  std::optional<int64_t> context = scaling.OptionalSize("original_max_position_embeddings");
  r.beta_fast = scaling.OptionalNumber("beta_fast").value_or(32);
  r.beta_slow = scaling.OptionalNumber("beta_slow").value_or(1);
  r.truncate = scaling.Bool("truncate", true);
  r.attention_factor = scaling.OptionalNumber("attention_factor").value_or(0);
  r.mscale = scaling.OptionalNumber("mscale").value_or(0);
  r.mscale_all_dim = scaling.OptionalNumber("mscale_all_dim").value_or(0);
  r.short_factor = scaling.NumberList("short_factor");
  r.long_factor = scaling.NumberList("long_factor");
  if (!scaling.status().ok()) {
    fields.Adopt(scaling.status());
    return;
  }
  // Phi3Config reads "su" and "yarn" as longrope.
  if (m.model_type == "phi3" && (r.type == "su" || r.type == "yarn")) r.type = "longrope";
  const bool stretched = r.type == "yarn" || r.type == "longrope";
  if (stretched) {
    if (std::optional<int64_t> top = fields.OptionalSize("original_max_position_embeddings")) {
      context = top;
    }
    if (!context.has_value() && m.max_position_embeddings > 0) context = m.max_position_embeddings;
    if (!scaling.OptionalNumber("factor").has_value() && context.has_value() &&
        m.max_position_embeddings > 0) {
      r.factor = static_cast<double>(m.max_position_embeddings) / static_cast<double>(*context);
    }
  }
  r.original_max_position_embeddings = context.value_or(8192);
  if (!(r.factor > 0) || !(r.low_freq_factor > 0) || !(r.high_freq_factor > r.low_freq_factor)) {
    fields.Fail(prefix.substr(0, prefix.size() - 1),
                "needs factor > 0 and high_freq_factor > low_freq_factor > 0");
  }
  if (r.attention_factor < 0 || r.mscale < 0 || r.mscale_all_dim < 0 || !(r.beta_fast > 0) ||
      !(r.beta_slow > 0)) {
    fields.Fail(prefix.substr(0, prefix.size() - 1),
                "needs beta_fast, beta_slow > 0 and attention_factor, mscale, mscale_all_dim >= 0");
  }
  for (const std::vector<double>* list : {&r.short_factor, &r.long_factor}) {
    for (double f : *list) {
      if (!(f > 0)) fields.Fail(prefix + (list == &r.short_factor ? "short_factor" : "long_factor"),
                                "holds a factor that is not positive");
    }
  }
}

// DeepseekV3Config's fields, with its defaults where a key is absent
// (q_lora_rank null: q_proj). What lowp does not implement is refused by
// name: another scoring_func or topk_method, moe_layer_freq other than 1.
void ReadDeepSeekFields(FieldReader& fields, ModelConfig& m) {
  // A count that may be 0 (first_k_dense_replace, n_shared_experts).
  auto count = [&](const std::string& key, int64_t fallback) -> int64_t {
    const std::optional<double> v = fields.OptionalNumber(key);
    if (!v.has_value()) return fallback;
    if (*v < 0 || *v != std::floor(*v) || *v > static_cast<double>(kMaxDimension)) {
      fields.Fail(key, "is not a count (an integer from 0 to 2^40)");
      return 0;
    }
    return static_cast<int64_t>(*v);
  };
  m.num_experts = fields.OptionalSize("n_routed_experts").value_or(256);
  m.experts_per_token = fields.OptionalSize("num_experts_per_tok").value_or(8);
  m.moe_intermediate_size = fields.OptionalSize("moe_intermediate_size").value_or(2048);
  const int64_t shared = fields.Has("n_shared_experts") ? count("n_shared_experts", 0) : 1;
  m.shared_expert_intermediate_size = shared * m.moe_intermediate_size;
  m.shared_expert_gated = false;
  m.routing = Routing::kSigmoidGroups;
  m.norm_topk_prob = fields.Bool("norm_topk_prob", true);
  m.routed_scaling_factor = fields.OptionalNumber("routed_scaling_factor").value_or(2.5);
  if (!(m.routed_scaling_factor > 0)) fields.Fail("routed_scaling_factor", "must be positive");
  m.n_group = fields.OptionalSize("n_group").value_or(8);
  m.topk_group = fields.OptionalSize("topk_group").value_or(4);
  m.first_k_dense_replace =
      fields.Has("first_k_dense_replace") ? count("first_k_dense_replace", 0) : 3;
  m.q_lora_rank =
      fields.Has("q_lora_rank") ? fields.OptionalSize("q_lora_rank").value_or(0) : 1536;
  m.kv_lora_rank = fields.OptionalSize("kv_lora_rank").value_or(512);
  m.qk_nope_head_dim = fields.OptionalSize("qk_nope_head_dim").value_or(128);
  m.qk_rope_head_dim = fields.OptionalSize("qk_rope_head_dim").value_or(64);
  m.v_head_dim = fields.OptionalSize("v_head_dim").value_or(128);
  m.rope_interleave = fields.Bool("rope_interleave", true);
  if (!fields.status().ok()) return;
  if (m.attention_bias) fields.Fail("attention_bias", "is true; lowp's latent attention has no biases");
  if (std::optional<std::string> f = fields.OptionalString("scoring_func"); f && *f != "sigmoid") {
    fields.Fail("scoring_func", absl::StrCat("is \"", *f, "\"; lowp runs DeepSeek-V3's \"sigmoid\""));
  }
  if (std::optional<std::string> t = fields.OptionalString("topk_method"); t && *t != "noaux_tc") {
    fields.Fail("topk_method", absl::StrCat("is \"", *t, "\"; lowp runs DeepSeek-V3's \"noaux_tc\""));
  }
  if (fields.OptionalSize("moe_layer_freq").value_or(1) != 1) {
    fields.Fail("moe_layer_freq", "is not 1; lowp puts experts in every layer from first_k_dense_replace");
  }
  if (m.qk_rope_head_dim % 2 != 0) fields.Fail("qk_rope_head_dim", "must be even");
  if (m.num_experts % m.n_group != 0 || m.num_experts / m.n_group < 2) {
    fields.Fail("n_group", absl::StrCat("is ", m.n_group, "; it must divide n_routed_experts (",
                                        m.num_experts, ") into groups of 2 or more"));
  } else if (m.topk_group > m.n_group ||
             m.experts_per_token > m.topk_group * (m.num_experts / m.n_group)) {
    fields.Fail("topk_group", absl::StrCat("is ", m.topk_group, " of ", m.n_group,
                                           " groups: too few experts for num_experts_per_tok (",
                                           m.experts_per_token, ")"));
  }
}

// The forward-pass fields of a config.json (ModelConfig's last group).
void ReadForwardFields(FieldReader& fields, const Family& family, const std::string& source,
                       ModelConfig& m) {
  m.rms_norm_eps = fields.OptionalNumber("rms_norm_eps").value_or(1e-6);
  if (m.rms_norm_eps < 0) fields.Fail("rms_norm_eps", "is negative");
  ReadRope(fields, family, source, m);
  if (family.gemma) {
    m.norm_adds_one = true;
    m.scale_embeddings = true;
    m.activation = fields.OptionalString("hidden_activation").value_or("gelu_pytorch_tanh");
  } else {
    m.activation = fields.OptionalString("hidden_act").value_or("silu");
  }
  const bool windowed = !family.window_gated || fields.Bool("use_sliding_window", false);
  std::string where;
  if (windowed && (family.default_window > 0 || family.mixture_of_experts || family.optional_window)) {
    // Present and null: no window; absent: the config class's default.
    if (fields.Has("sliding_window")) {
      m.sliding_window = fields.OptionalSize("sliding_window").value_or(0);
    } else {
      m.sliding_window = family.default_window;
    }
  }
  m.sliding_layers = family.sliding_layers;
  if (m.sliding_layers == SlidingLayers::kFrom) {
    m.first_sliding_layer = fields.OptionalSize("max_window_layers").value_or(28);
  }
  if (m.sliding_layers == SlidingLayers::kListed) {  // Gemma 3, gpt-oss
    ReadLayerTypes(fields, family.default_window_pattern, m);
  }
  if (absl::string_view(family.model_type) == "gemma3_text") {
    m.query_pre_attn_scalar = fields.OptionalNumber("query_pre_attn_scalar").value_or(256);
    if (!(m.query_pre_attn_scalar > 0)) fields.Fail("query_pre_attn_scalar", "must be positive");
    m.attn_logit_softcapping = fields.OptionalNumber("attn_logit_softcapping").value_or(0);
    m.final_logit_softcapping = fields.OptionalNumber("final_logit_softcapping").value_or(0);
    if (m.attn_logit_softcapping < 0) fields.Fail("attn_logit_softcapping", "is negative");
    if (m.final_logit_softcapping < 0) fields.Fail("final_logit_softcapping", "is negative");
    m.rope_local_theta = fields.OptionalNumber("rope_local_base_freq").value_or(10000);
    if (!(m.rope_local_theta > 0)) fields.Fail("rope_local_base_freq", "must be positive");
  }
  if (absl::string_view(family.model_type) == "gemma2") {
    m.query_pre_attn_scalar = fields.OptionalNumber("query_pre_attn_scalar").value_or(224);
    if (!(m.query_pre_attn_scalar > 0)) fields.Fail("query_pre_attn_scalar", "must be positive");
    m.attn_logit_softcapping =
        fields.Has("attn_logit_softcapping")
            ? fields.OptionalNumber("attn_logit_softcapping").value_or(0)
            : 50.0;
    m.final_logit_softcapping =
        fields.Has("final_logit_softcapping")
            ? fields.OptionalNumber("final_logit_softcapping").value_or(0)
            : 30.0;
    if (m.attn_logit_softcapping < 0) fields.Fail("attn_logit_softcapping", "is negative");
    if (m.final_logit_softcapping < 0) fields.Fail("final_logit_softcapping", "is negative");
  }
  if (absl::string_view(family.model_type) == "gpt_oss") {
    m.attention_sinks = true;
    m.routing = Routing::kTopKSoftmax;
    m.router_bias = true;
    m.expert_bias = true;
    m.swiglu_limit = fields.OptionalNumber("swiglu_limit").value_or(7.0);
    if (!(m.swiglu_limit > 0)) fields.Fail("swiglu_limit", "must be positive");
    m.swiglu_alpha = fields.OptionalNumber("swiglu_alpha").value_or(1.702);
  }
  if (absl::string_view(family.model_type) == "phi3") {
    m.fused_projections = true;
    const double partial = fields.OptionalNumber("partial_rotary_factor").value_or(1.0);
    if (!(partial > 0) || partial > 1) {
      fields.Fail("partial_rotary_factor", "must be in (0, 1]");
    } else {
      // Phi3Config: int(head_dim * partial_rotary_factor)
      m.rotary_dim = static_cast<int64_t>(static_cast<double>(m.head_dim) * partial);
    }
  }
  if (const std::optional<double> bos = fields.OptionalNumber("bos_token_id"); bos.has_value()) {
    if (*bos < 0 || *bos != std::floor(*bos) || *bos > 1e12) {
      fields.Fail("bos_token_id", "is not a token id");
    } else {
      m.bos_token_id = static_cast<int64_t>(*bos);
    }
  }
}

std::string SupportedModelTypes() {
  std::vector<std::string> names;
  for (const Family& f : kFamilies) names.push_back(f.model_type);
  return absl::StrJoin(names, ", ");
}

absl::StatusOr<ModelConfig> ReadFields(FieldReader& fields, absl::string_view source) {
  const std::optional<std::string> model_type = fields.OptionalString("model_type");
  if (!fields.status().ok()) return fields.status();
  if (!model_type.has_value()) {
    fields.Fail("model_type", absl::StrCat("is missing (supported: ", SupportedModelTypes(), ")"));
    return fields.status();
  }
  const Family* family = nullptr;
  for (const Family& f : kFamilies) {
    if (*model_type == f.model_type) family = &f;
  }
  if (family == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat(source, ": model_type \"", *model_type,
                     "\" is not supported (supported: ", SupportedModelTypes(), ")"));
  }

  ModelConfig m;
  m.name = std::string(source);
  m.model_type = *model_type;
  m.hidden_size = fields.Size("hidden_size");
  m.intermediate_size = fields.Size("intermediate_size");
  m.num_layers = fields.Size("num_hidden_layers");
  m.num_heads = fields.Size("num_attention_heads");
  m.vocab_size = fields.Size("vocab_size");
  // Without grouped-query attention the key is absent (Llama 1) or null.
  const std::optional<int64_t> kv_heads = fields.OptionalSize("num_key_value_heads");
  const std::optional<int64_t> head_dim = fields.OptionalSize("head_dim");
  m.max_position_embeddings = fields.OptionalSize("max_position_embeddings").value_or(0);
  m.tie_word_embeddings = fields.Bool("tie_word_embeddings", family->tie_default);
  m.attention_bias =
      family->reads_attention_bias ? fields.Bool("attention_bias", family->attention_bias)
                                   : family->attention_bias;
  // Where the config has the field, Hugging Face biases o_proj with q, k, v
  // (Qwen2's fixed biases leave it out).
  m.output_bias = family->reads_attention_bias && m.attention_bias;
  if (absl::string_view(family->model_type) == "llama") m.mlp_bias = fields.Bool("mlp_bias", false);
  if (family->qwen_moe) {
    // Qwen3MoeConfig's and Qwen2MoeConfig's defaults where a key is absent.
    const bool qwen2 = absl::string_view(family->model_type) == "qwen2_moe";
    m.num_experts = fields.OptionalSize("num_experts").value_or(qwen2 ? 60 : 128);
    m.experts_per_token = fields.OptionalSize("num_experts_per_tok").value_or(qwen2 ? 4 : 8);
    m.moe_intermediate_size =
        fields.OptionalSize("moe_intermediate_size").value_or(qwen2 ? 1408 : 768);
    if (qwen2) {
      m.shared_expert_intermediate_size =
          fields.OptionalSize("shared_expert_intermediate_size").value_or(5632);
    }
    m.norm_topk_prob = fields.Bool("norm_topk_prob", false);
    m.decoder_sparse_step = fields.OptionalSize("decoder_sparse_step").value_or(1);
    m.mlp_only_layers = fields.LayerList("mlp_only_layers");
  } else if (absl::string_view(family->model_type) == "deepseek_v3") {
    ReadDeepSeekFields(fields, m);
  } else if (absl::string_view(family->model_type) == "gpt_oss") {  // GptOssConfig's defaults
    m.num_experts = fields.OptionalSize("num_local_experts").value_or(128);
    m.experts_per_token = fields.OptionalSize("num_experts_per_tok").value_or(4);
  } else if (family->mixture_of_experts) {
    m.num_experts = fields.Size("num_local_experts");
    m.experts_per_token = fields.Size("num_experts_per_tok");
  }
  if (!fields.status().ok()) return fields.status();

  m.num_kv_heads = kv_heads.value_or(m.num_heads);
  if (m.kv_lora_rank > 0) {
    // DeepseekV3Config's head_dim is the rotated part; a key here is the
    // whole of it (KeyHeadDim).
    m.head_dim = m.qk_nope_head_dim + m.qk_rope_head_dim;
  } else if (head_dim.has_value()) {
    m.head_dim = *head_dim;
  } else if (family->requires_head_dim) {
    return FieldError(
        source, "head_dim",
        absl::StrCat("is missing (", m.model_type, " does not derive it from hidden_size)"));
  } else if (m.hidden_size % m.num_heads != 0) {
    return FieldError(
        source, "hidden_size",
        absl::StrCat("is ", m.hidden_size, ", not a multiple of num_attention_heads (", m.num_heads,
                     "), and there is no head_dim"));
  } else {
    m.head_dim = m.hidden_size / m.num_heads;
  }
  m.qk_norm = family->qk_norm;
  m.norms_per_layer = family->norms_per_layer;
  ReadForwardFields(fields, *family, std::string(source), m);
  if (!fields.status().ok()) return fields.status();
  if (absl::Status s = ValidateModel(m); !s.ok()) return s;  // m.name is `source`
  return m;
}

}  // namespace

absl::StatusOr<ModelConfig> ParseModelConfig(absl::string_view json, absl::string_view source) {
  if (static_cast<int64_t>(json.size()) > kMaxConfigBytes) {
    return absl::InvalidArgumentError(absl::StrCat(source, ": ", json.size(),
                                                   " bytes, above the limit of ", kMaxConfigBytes,
                                                   " for a config.json"));
  }
  absl::StatusOr<Json> parsed = ParseStrictJson(json, source);
  if (!parsed.ok()) return parsed.status();
  if (!parsed->is_object()) {
    return absl::InvalidArgumentError(
        absl::StrCat(source, ": the JSON is ", Described(*parsed), ", not an object"));
  }
  const Json* text = nullptr;
  if (auto it = parsed->find("text_config"); it != parsed->end() && !it->is_null()) {
    if (!it->is_object()) {
      return FieldError(source, "text_config",
                        absl::StrCat("is ", Described(*it), ", not an object"));
    }
    text = &*it;
  }
  FieldReader fields(*parsed, text, source);
  return ReadFields(fields, source);
}

absl::StatusOr<ModelConfig> ReadModelConfig(const std::string& path) {
  std::error_code error;
  const std::filesystem::file_status status = std::filesystem::status(path, error);
  if (status.type() == std::filesystem::file_type::not_found) {
    return absl::NotFoundError(absl::StrCat(path, ": no such file"));
  }
  if (error) return absl::UnknownError(absl::StrCat(path, ": ", error.message()));
  if (status.type() != std::filesystem::file_type::regular) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": not a regular file"));
  }
  const uintmax_t size = std::filesystem::file_size(path, error);
  if (error) return absl::UnknownError(absl::StrCat(path, ": ", error.message()));
  if (size > static_cast<uintmax_t>(kMaxConfigBytes)) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": ", size, " bytes, above the limit of ",
                                                   kMaxConfigBytes, " for a config.json"));
  }
  // Opened without blocking and checked again: the path may have changed.
  absl::StatusOr<std::string> text = ReadRegularFile(path, kMaxConfigBytes);
  if (!text.ok()) return text.status();
  return ParseModelConfig(*text, path);
}

}  // namespace lowp
