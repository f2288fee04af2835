// Writes a checkpoint of a deployed model's shape with random weights
// (tests/random_checkpoint.h) and a file of token ids, for bench/eval_scale.sh:
//
//   write_checkpoint --shape llama-3.2-1b|llama-3.1-8b|llama:H:I:L:HEADS:KV:VOCAB --out DIR
//                    [--layers N] [--dtype bf16|f32] [--tokens S:L] [--seed K]
//
// DIR gets config.json, model.safetensors and, with --tokens, tokens.npy
// ([S, L] int32, BOS first, the rest uniform over the vocabulary).
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "tests/random_checkpoint.h"

namespace {

int Usage(const char* why) {
  std::fprintf(stderr,
               "write_checkpoint: %s\nusage: write_checkpoint --shape llama-3.2-1b|llama-3.1-8b "
               "--out DIR [--layers N] [--dtype bf16|f32] [--tokens S:L] [--seed K]\n",
               why);
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  std::string shape, out, dtype = "bf16", tokens;
  int64_t layers = 0;
  uint32_t seed = 1;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i], value = argv[i + 1];
    if (flag == "--shape") {
      shape = value;
    } else if (flag == "--out") {
      out = value;
    } else if (flag == "--dtype") {
      dtype = value;
    } else if (flag == "--tokens") {
      tokens = value;
    } else if (flag == "--layers") {
      if (!absl::SimpleAtoi(value, &layers) || layers < 1) return Usage("bad --layers");
    } else if (flag == "--seed") {
      if (!absl::SimpleAtoi(value, &seed)) return Usage("bad --seed");
    } else {
      return Usage("unknown flag");
    }
  }
  if (argc % 2 != 1 || out.empty()) return Usage("--shape and --out are required");
  lowp::ModelConfig c;
  if (shape == "llama-3.2-1b") {
    c = lowp::testing::Llama32_1B(layers);
  } else if (shape == "llama-3.1-8b") {
    c = lowp::testing::Llama31_8B(layers);
  } else if (shape.starts_with("llama:")) {
    // llama:HIDDEN:INTERMEDIATE:LAYERS:HEADS:KV_HEADS:VOCAB, untied.
    std::vector<std::string> f = absl::StrSplit(shape.substr(6), ':');
    int64_t v[6];
    if (f.size() != 6)
      return Usage("--shape llama:HIDDEN:INTERMEDIATE:LAYERS:HEADS:KV_HEADS:VOCAB");
    for (int i = 0; i < 6; ++i) {
      if (!absl::SimpleAtoi(f[i], &v[i]) || v[i] < 1) return Usage("bad --shape number");
    }
    c = lowp::testing::LlamaShape("llama-shape", v[0], v[1], v[2], v[3], v[4], v[5], false);
  } else {
    return Usage("unknown --shape");
  }
  if (dtype != "bf16" && dtype != "f32") return Usage("--dtype is bf16 or f32");
  const absl::Status s = lowp::testing::WriteRandomCheckpoint(
      out, c, dtype == "bf16" ? lowp::DType::kBF16 : lowp::DType::kF32, seed);
  if (!s.ok()) {
    std::fprintf(stderr, "write_checkpoint: %s\n", std::string(s.message()).c_str());
    return 1;
  }
  if (!tokens.empty()) {
    std::pair<std::string, std::string> parts = absl::StrSplit(tokens, ':');
    int64_t sequences = 0, length = 0;
    if (!absl::SimpleAtoi(parts.first, &sequences) || !absl::SimpleAtoi(parts.second, &length) ||
        sequences < 1 || length < 2) {
      return Usage("--tokens is S:L");
    }
    // BOS first, the rest uniform over the vocabulary.
    std::vector<int32_t> ids(static_cast<size_t>(sequences * length));
    for (int64_t s = 0; s < sequences; ++s) {
      for (int64_t t = 0; t < length; ++t) {
        ids[s * length + t] =
            t == 0 ? static_cast<int32_t>(c.bos_token_id)
                   : static_cast<int32_t>(lowp::RandomBits(seed + 1, s * length + t) %
                                          static_cast<uint64_t>(c.vocab_size));
      }
    }
    if (!lowp::testing::WriteTokensNpy(out + "/tokens.npy", {sequences, length}, ids)) {
      return Usage("cannot write tokens.npy");
    }
  }
  return 0;
}
