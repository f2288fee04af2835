// Checkpoints of real models' shapes with random weights, written to disk:
// for the tests of the evaluator's bounded memory and for the benchmarks at
// the size of deployed models (bench/eval_scale.sh), never committed.
// Matrices are N(0, 0.02^2) (Box-Muller on RandomBits(seed, index): the same
// file on any machine and any thread count), norms are 1; a Hugging Face
// config.json of model_type llama goes beside model.safetensors.
#ifndef LOWP_TESTS_RANDOM_CHECKPOINT_H_
#define LOWP_TESTS_RANDOM_CHECKPOINT_H_

#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "formats/reference.h"
#include "io/safetensors.h"
#include "kernels/thread_pool.h"
#include "model/config.h"
#include "nlohmann/json.hpp"

namespace lowp::testing {

// A llama-family config of the given shape (Llama 3's rope and norms).
inline ModelConfig LlamaShape(std::string name, int64_t hidden, int64_t intermediate,
                              int64_t layers, int64_t heads, int64_t kv_heads, int64_t vocab,
                              bool tied) {
  ModelConfig c = lowp::LlamaShape(std::move(name), hidden, intermediate, layers, heads, kv_heads,
                                   vocab, 131072);
  c.tie_word_embeddings = tied;
  c.rms_norm_eps = 1e-5;
  c.rope_theta = 500000;
  c.rope_scaling = {"llama3", 32, 1, 4, 8192};
  c.bos_token_id = 128000 < vocab ? 128000 : 1;
  return c;
}

// Llama 3.2 1B (16 layers, tied) and Llama 3.1 8B (32 layers), their
// config.json values (rope factor 8 for 8B); `layers` > 0 overrides.
inline ModelConfig Llama32_1B(int64_t layers = 0) {
  return LlamaShape("llama-3.2-1b-shape", 2048, 8192, layers > 0 ? layers : 16, 32, 8, 128256,
                    true);
}
inline ModelConfig Llama31_8B(int64_t layers = 0) {
  ModelConfig c =
      LlamaShape("llama-3.1-8b-shape", 4096, 14336, layers > 0 ? layers : 32, 32, 8, 128256, false);
  c.rope_scaling.factor = 8;
  return c;
}

inline std::string ConfigJson(const ModelConfig& c) {
  nlohmann::ordered_json j;
  j["architectures"] = {"LlamaForCausalLM"};
  j["model_type"] = c.model_type;
  j["hidden_size"] = c.hidden_size;
  j["intermediate_size"] = c.intermediate_size;
  j["num_hidden_layers"] = c.num_layers;
  j["num_attention_heads"] = c.num_heads;
  j["num_key_value_heads"] = c.num_kv_heads;
  j["head_dim"] = c.head_dim;
  j["vocab_size"] = c.vocab_size;
  j["max_position_embeddings"] = c.max_position_embeddings;
  j["tie_word_embeddings"] = c.tie_word_embeddings;
  j["rms_norm_eps"] = c.rms_norm_eps;
  j["rope_theta"] = c.rope_theta;
  if (!c.rope_scaling.type.empty()) {
    j["rope_scaling"] = {
        {"rope_type", c.rope_scaling.type},
        {"factor", c.rope_scaling.factor},
        {"low_freq_factor", c.rope_scaling.low_freq_factor},
        {"high_freq_factor", c.rope_scaling.high_freq_factor},
        {"original_max_position_embeddings", c.rope_scaling.original_max_position_embeddings}};
  }
  j["bos_token_id"] = c.bos_token_id;
  j["hidden_act"] = "silu";
  j["torch_dtype"] = "bfloat16";
  return j.dump(2) + "\n";
}

// Values `index` and `index` + 1 (index even) of a random matrix: a pair of
// N(0, 0.02^2) values by Box-Muller.
inline void RandomPair(uint32_t seed, uint64_t index, float* out) {
  const double u1 = (RandomBits(seed, index) + 1.0) * 0x1.0p-32;  // (0, 1]
  const double u2 = RandomBits(seed, index + 1) * 0x1.0p-32;
  const double r = 0.02 * std::sqrt(-2 * std::log(u1));
  out[0] = static_cast<float>(r * std::cos(2 * M_PI * u2));
  out[1] = static_cast<float>(r * std::sin(2 * M_PI * u2));
}
inline float RandomWeight(uint32_t seed, uint64_t index) {
  float pair[2];
  RandomPair(seed, index & ~uint64_t{1}, pair);
  return pair[index & 1];
}

// The tensors of a dense llama config in checkpoint order: name, shape,
// whether a norm (all 1).
struct TensorEntry {
  std::string name;
  std::vector<int64_t> shape;
  bool norm = false;
  int64_t elements() const {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    return n;
  }
};
inline std::vector<TensorEntry> LlamaTensors(const ModelConfig& c) {
  const int64_t D = c.hidden_size, I = c.intermediate_size;
  const int64_t q = c.num_heads * c.head_dim, kv = c.num_kv_heads * c.head_dim;
  std::vector<TensorEntry> out;
  out.push_back({"model.embed_tokens.weight", {c.vocab_size, D}});
  for (int64_t i = 0; i < c.num_layers; ++i) {
    const std::string p = absl::StrCat("model.layers.", i, ".");
    out.push_back({p + "input_layernorm.weight", {D}, true});
    out.push_back({p + "post_attention_layernorm.weight", {D}, true});
    out.push_back({p + "self_attn.q_proj.weight", {q, D}});
    out.push_back({p + "self_attn.k_proj.weight", {kv, D}});
    out.push_back({p + "self_attn.v_proj.weight", {kv, D}});
    out.push_back({p + "self_attn.o_proj.weight", {D, q}});
    out.push_back({p + "mlp.gate_proj.weight", {I, D}});
    out.push_back({p + "mlp.up_proj.weight", {I, D}});
    out.push_back({p + "mlp.down_proj.weight", {D, I}});
  }
  out.push_back({"model.norm.weight", {D}, true});
  if (!c.tie_word_embeddings) out.push_back({"lm_head.weight", {c.vocab_size, D}});
  return out;
}

// A random llama checkpoint in memory, float32: `views` over `data`, for
// TensorSet::FromViews (keep this alive as long as the set).
struct MemoryCheckpoint {
  std::vector<std::vector<float>> data;
  std::vector<TensorView> views;
};
inline MemoryCheckpoint RandomTensors(const ModelConfig& c, uint32_t seed) {
  MemoryCheckpoint m;
  uint64_t index = 0;
  for (const TensorEntry& e : LlamaTensors(c)) {
    std::vector<float> v(static_cast<size_t>(e.elements()));
    for (size_t i = 0; i < v.size(); ++i) v[i] = e.norm ? 1.0f : RandomWeight(seed, index + i);
    index += v.size();
    m.data.push_back(std::move(v));
  }
  size_t i = 0;
  for (const TensorEntry& e : LlamaTensors(c)) {
    TensorView t;
    t.name = e.name;
    t.dtype = DType::kF32;
    t.shape = e.shape;
    t.bytes = {reinterpret_cast<const uint8_t*>(m.data[i].data()), m.data[i].size() * 4};
    t.file = "memory";
    m.views.push_back(std::move(t));
    ++i;
  }
  return m;
}

// Writes DIR/config.json and DIR/model.safetensors (F32 or BF16) for a dense
// llama config: the embedding, each layer's norms and linear layers, the
// final norm, lm_head unless tied.
inline absl::Status WriteRandomCheckpoint(const std::string& dir, const ModelConfig& c, DType dtype,
                                          uint32_t seed) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  {
    std::ofstream config(dir + "/config.json");
    config << ConfigJson(c);
    if (!config) return absl::InternalError(absl::StrCat(dir, "/config.json: cannot write"));
  }
  std::vector<SafetensorsWriter::Entry> entries;
  std::vector<bool> ones;  // a norm: all 1
  for (const TensorEntry& e : LlamaTensors(c)) {
    entries.push_back({e.name, dtype, e.shape});
    ones.push_back(e.norm);
  }
  absl::StatusOr<std::unique_ptr<SafetensorsWriter>> writer =
      SafetensorsWriter::Create(dir + "/model.safetensors", entries);
  if (!writer.ok()) return writer.status();
  constexpr int64_t kPiece = int64_t{1} << 22;
  const size_t width = dtype == DType::kBF16 ? 2 : 4;
  std::vector<uint8_t> bytes(static_cast<size_t>(kPiece) * width);
  uint64_t index = 0;  // over every matrix element of the file
  for (size_t t = 0; t < entries.size(); ++t) {
    int64_t n = 1;
    for (int64_t d : entries[t].shape) n *= d;
    for (int64_t first = 0; first < n; first += kPiece) {
      const int64_t count = std::min(kPiece, n - first);
      ParallelFor(static_cast<size_t>((count + 65535) / 65536), 0, [&](size_t part) {
        const int64_t begin = static_cast<int64_t>(part) * 65536;
        const int64_t end = std::min(count, begin + 65536);
        float pair[2] = {1.0f, 1.0f};
        for (int64_t i = begin; i < end; ++i) {
          const uint64_t at = index + static_cast<uint64_t>(i);
          if (!ones[t] && (i == begin || at % 2 == 0)) RandomPair(seed, at & ~uint64_t{1}, pair);
          const float v = pair[at & 1];
          uint32_t bits;
          std::memcpy(&bits, &v, 4);
          if (width == 2) {
            const uint16_t h = static_cast<uint16_t>((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16);
            std::memcpy(bytes.data() + i * 2, &h, 2);
          } else {
            std::memcpy(bytes.data() + i * 4, &bits, 4);
          }
        }
      });
      index += static_cast<uint64_t>(count);
      if (absl::Status s = (*writer)->Write({bytes.data(), static_cast<size_t>(count) * width});
          !s.ok()) {
        return s;
      }
    }
  }
  return (*writer)->Finish();
}

// Token ids as a NumPy .npy file (int32, C order) of `shape`.
inline bool WriteTokensNpy(const std::string& path, const std::vector<int64_t>& shape,
                           const std::vector<int32_t>& ids) {
  std::string header = "{'descr': '<i4', 'fortran_order': False, 'shape': (";
  for (int64_t d : shape) absl::StrAppend(&header, d, ", ");
  header += "), }";
  while ((10 + header.size() + 1) % 64 != 0) header += ' ';
  header += '\n';
  std::ofstream out(path, std::ios::binary);
  out.write("\x93NUMPY\x01\x00", 8);
  const uint16_t n = static_cast<uint16_t>(header.size());
  out.write(reinterpret_cast<const char*>(&n), 2);
  out << header;
  out.write(reinterpret_cast<const char*>(ids.data()),
            static_cast<std::streamsize>(ids.size() * sizeof(int32_t)));
  return static_cast<bool>(out);
}

}  // namespace lowp::testing

#endif  // LOWP_TESTS_RANDOM_CHECKPOINT_H_
