#include "api/json.h"

#include <climits>
#include <cmath>
#include <cstdint>
#include <string>

namespace lowp::api {
namespace {

// Bandwidth as an exact integer when it is one (every catalog device).
nlohmann::json JsonBandwidth(double v) {
  if (v >= 0 && v < 9.2e18 && v == std::floor(v)) return static_cast<int64_t>(v);
  return JsonNumber(v);
}

nlohmann::json JsonFormat(const std::string& name) {
  return name.empty() ? nlohmann::json(nullptr) : nlohmann::json(name);
}

}  // namespace

nlohmann::json JsonNumber(double v) {
  return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(nullptr);
}

nlohmann::json DeviceJson(const Device& d) {
  nlohmann::json j;
  j["name"] = d.name;
  j["description"] = d.description;
  j["memory_bytes"] = d.memory_bytes;
  j["bandwidth_bytes_per_s"] = JsonBandwidth(d.bandwidth_bytes_per_s);
  j["source"] = d.source;
  return j;
}

nlohmann::json BytesJson(const Bytes& b) {
  nlohmann::json j;
  j["weights"] = b.weights;
  j["gradients"] = b.gradients;
  j["master"] = b.master;
  j["optimizer"] = b.optimizer;
  j["activations"] = b.activations;
  j["kv_cache"] = b.kv_cache;
  j["workspace"] = b.workspace;
  j["buffers"] = b.buffers;
  j["model_states"] = b.model_states();
  j["total"] = b.total();
  return j;
}

nlohmann::json ModelJson(const ModelConfig& m) {
  nlohmann::json j;
  j["name"] = m.name;
  j["model_type"] = m.model_type;
  j["hidden_size"] = m.hidden_size;
  j["intermediate_size"] = m.intermediate_size;
  j["num_layers"] = m.num_layers;
  j["num_heads"] = m.num_heads;
  j["num_kv_heads"] = m.num_kv_heads;
  j["head_dim"] = m.head_dim;
  j["vocab_size"] = m.vocab_size;
  j["max_position_embeddings"] = m.max_position_embeddings;
  j["tie_word_embeddings"] = m.tie_word_embeddings;
  j["num_experts"] = m.num_experts;
  j["experts_per_token"] = m.experts_per_token;
  j["gated_mlp"] = m.gated_mlp;
  j["attention_bias"] = m.attention_bias;
  j["output_bias"] = m.output_bias;
  j["mlp_bias"] = m.mlp_bias;
  j["qk_norm"] = m.qk_norm;
  j["norms_per_layer"] = m.norms_per_layer;
  j["norm_bias"] = m.norm_bias;
  j["linear_bias"] = m.linear_bias;
  j["learned_positions"] = m.learned_positions;
  j["dropout"] = m.dropout;
  return j;
}

nlohmann::json SizingOptionsJson(const SizingOptions& o) {
  nlohmann::json j;
  j["mode"] = std::string(ModeName(o.mode));
  j["weights"] = JsonFormat(o.weights);
  j["embed"] = JsonFormat(o.embed);
  j["grads"] = JsonFormat(o.grads);
  j["master"] = JsonFormat(o.master);
  j["optimizer"] = std::string(OptimizerName(o.optimizer));
  j["opt_state"] = JsonFormat(o.opt_state);
  j["kv"] = JsonFormat(o.kv);
  j["activation_bytes"] = o.activation_bytes;
  j["seq"] = o.seq;
  j["batch"] = o.batch;
  j["dp"] = o.dp;
  j["tp"] = o.tp;
  j["pp"] = o.pp;
  j["zero"] = o.zero;
  j["sequence_parallel"] = o.sequence_parallel;
  j["recompute"] = std::string(RecomputeName(o.recompute));
  j["flash_attention"] = o.flash_attention;
  j["offload_optimizer"] = o.offload_optimizer;
  j["lora_rank"] = o.lora_rank;
  j["lora_targets"] = o.lora_targets;
  j["prefill_tokens"] = o.prefill_tokens;
  j["buffers_bytes"] = o.buffers_bytes;
  j["headroom"] = o.headroom;
  return j;
}

nlohmann::json QuantReportJson(const QuantReport& r, float relative_floor, bool histogram) {
  nlohmann::json j;
  j["tensor"] = r.tensor;
  j["scheme"] = r.scheme;
  if (!r.applied.empty()) j["applied"] = r.applied;
  if (!r.applied_reason.empty()) j["applied_reason"] = r.applied_reason;
  if (!r.dtype.empty()) j["dtype"] = r.dtype;
  if (r.tensor != "(all)") j["shape"] = r.shape;
  j["elements"] = r.elements;
  j["bits_per_weight"] = r.bits_per_weight();
  j["bytes"] = r.storage_bytes();
  j["mse"] = r.mse();
  j["rmse"] = r.rmse();
  j["sqnr_db"] = JsonNumber(r.sqnr_db());
  j["max_abs_error"] = r.max_abs_error();
  j["mean_abs_error"] = r.mean_abs_error();
  j["max_relative_error"] = r.max_relative_error();
  j["mean_relative_error"] = r.mean_relative_error();
  j["rms_relative_error"] = r.rms_relative_error();
  j["relative_floor"] = relative_floor;
  j["relative_count"] = r.stats.relative_count;
  j["cosine"] = r.cosine();
  j["measured"] = r.stats.measured;
  j["nan_inputs"] = r.stats.nan_inputs;
  j["inf_inputs"] = r.stats.inf_inputs;
  j["overflow"] = r.stats.nonfinite_outputs;
  j["clipped"] = r.counts.clipped;
  j["zeroed"] = r.stats.zeroed;
  j["subnormal"] = r.counts.subnormal;
  if (r.weighted) j["weighted_relative_rmse"] = JsonNumber(r.weighted_relative_rmse());
  if (histogram) {
    nlohmann::json h = nlohmann::json::object();
    for (const auto& [key, n] : r.histogram) {
      h[key == INT_MIN ? std::string("exact") : std::to_string(key)] = n;
    }
    j["abs_error_log2_histogram"] = h;
  }
  return j;
}

}  // namespace lowp::api
