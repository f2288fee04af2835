// What `lowp mix` assigns types to: every matrix of a model (the embedding,
// each decoder layer's linear layers, lm_head unless tied to the
// embedding), one group each, with the bytes a type stores it in and the
// forms a user acts on: lowp's weight rules and llama-quantize's arguments.
#ifndef LOWP_MIX_GROUPS_H_
#define LOWP_MIX_GROUPS_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "model/checkpoint.h"
#include "quant/scheme.h"

namespace lowp {

struct MixGroup {
  std::string name;       // Hugging Face's: the pattern of the group's rule
  std::string llama_cpp;  // llama.cpp's ("blk.3.attn_q.weight"; "token_embd.weight")
  int64_t rows = 0, cols = 0;
  int64_t layer = -1;  // the decoder layer; -1 for the embedding and lm_head
  bool tied = false;   // the embedding that also serves as lm_head
  int64_t count = 1;   // matrices of that shape (a layer's routed experts of one kind)
  // The matrices of a fused tensor (Phi-3's q, k, v of "...qkv_proj.weight"
  // and gate, up of "...gate_up_proj.weight", which llama.cpp stores as one
  // tensor of one type), their rows one after another; empty for others.
  std::vector<std::string> members{};

  int64_t weights() const { return rows * cols * count; }
  // What a weight rule for the group matches: its name, or its members.
  std::string pattern() const;
};

// How a layer's routed experts are grouped: each kind (gate, up, down) of
// all of them one group, as llama.cpp stores them merged
// ("model.layers.3.mlp.experts.*.gate_proj.weight", "blk.3.ffn_gate_exps.weight"),
// or each expert's matrix its own group.
enum class ExpertGroups { kLayer, kEach };

// The groups of `model` in checkpoint order (a merged group where its first
// expert's matrix is). Routers, shared experts and attention matrices are
// groups of their own; Phi-3's fused q, k, v and gate, up are a group each.
std::vector<MixGroup> MixGroups(const Checkpoint& model, ExpertGroups experts = ExpertGroups::kLayer);

// The bytes `scheme` stores `group` in (its storage bits rounded up to a
// byte); InvalidArgument when the scheme does not apply to the group's rows
// as named (a llama.cpp super-block type on rows 256 does not divide falls
// back to another type: the message says which).
absl::StatusOr<uint64_t> GroupBytes(const Scheme& scheme, const MixGroup& group);

// An assignment: one scheme name per group.
using MixAssignment = std::vector<std::string>;

// "NAME=SCHEME" per group, as --weights takes them (and eval's rules).
std::vector<std::string> MixRules(const std::vector<MixGroup>& groups,
                                  const MixAssignment& schemes);

// llama-quantize's command that builds the assignment from a GGUF of the
// model: --token-embedding-type and --output-tensor-type for the tables,
// one --tensor-type REGEX=TYPE per (tensor kind, type) over the layers that
// take it (llama-quantize lowers the pattern and regex_searches llama.cpp's
// names; the last match wins), and the base type (the layers' most common;
// the overrides apply to a quantized base type, as llama-quantize does).
struct LlamaQuantizeCommand {
  std::vector<std::string> options;  // argv items before the files
  std::string type;                  // the positional type after them

  // "llama-quantize OPTIONS INPUT OUTPUT TYPE", each item quoted for a POSIX
  // shell where it needs to be.
  std::string Line(const std::string& input, const std::string& output) const;
};

// InvalidArgument naming a scheme llama.cpp has no type for.
absl::StatusOr<LlamaQuantizeCommand> LlamaQuantizeArguments(const std::vector<MixGroup>& groups,
                                                            const MixAssignment& schemes);

}  // namespace lowp

#endif  // LOWP_MIX_GROUPS_H_
