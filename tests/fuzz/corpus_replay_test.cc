// Replays every seed-corpus file and every regression input of the fuzz
// targets (tests/fuzz/corpus/<target>/, tests/fuzz/regressions/<target>/)
// through the same target functions the fuzzers run, in the ordinary build:
// a crash the fuzzers once found stays fixed everywhere, clang or not.
#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "formats/format.h"
#include "io/gguf.h"
#include "io/imatrix.h"
#include "gtest/gtest.h"
#include "io/npy.h"
#include "io/packed_tensors.h"
#include "io/safetensors.h"
#include "quant/scheme.h"
#include "model/config.h"
#include "model/checkpoint.h"
#include "io/tensor_set.h"
#include "tokenizer/sentencepiece_model.h"

namespace lowp::fuzz {
int FuzzSafetensors(const uint8_t* data, size_t size);
int FuzzNpy(const uint8_t* data, size_t size);
int FuzzIndex(const uint8_t* data, size_t size);
int FuzzConfig(const uint8_t* data, size_t size);
int FuzzNames(const uint8_t* data, size_t size);
int FuzzArgs(const uint8_t* data, size_t size);
int ArgsExitCode(const uint8_t* data, size_t size);
int FuzzModel(const uint8_t* data, size_t size);
int FuzzGguf(const uint8_t* data, size_t size);
int FuzzTokenizer(const uint8_t* data, size_t size);
int FuzzTokenizerJson(const uint8_t* data, size_t size);
int FuzzSentencePiece(const uint8_t* data, size_t size);
int FuzzImatrix(const uint8_t* data, size_t size);
int FuzzPacked(const uint8_t* data, size_t size);
int FuzzMixTable(const uint8_t* data, size_t size);
namespace {

// Whether a model fuzz input (4-byte config length, config.json,
// safetensors) loads for the forward pass.
bool ModelLoads(const std::vector<uint8_t>& bytes) {
  if (bytes.size() < 4) return false;
  const uint32_t n = bytes[0] | bytes[1] << 8 | bytes[2] << 16 | uint32_t{bytes[3]} << 24;
  if (n > bytes.size() - 4) return false;
  absl::StatusOr<ModelConfig> config = ParseModelConfig(
      absl::string_view(reinterpret_cast<const char*>(bytes.data() + 4), n), "seed");
  if (!config.ok()) return false;
  absl::StatusOr<ParsedSafetensors> parsed =
      ParseSafetensors(std::span<const uint8_t>(bytes).subspan(4 + n), "seed");
  if (!parsed.ok()) return false;
  absl::StatusOr<TensorSet> set = TensorSet::FromViews(parsed->tensors);
  return set.ok() && Checkpoint::Open(*config, *std::move(set)).ok();
}

// Whether a packed fuzz input (4-byte config length, config.json,
// safetensors) composes its packed weights.
bool PackedComposes(const std::vector<uint8_t>& bytes) {
  if (bytes.size() < 4) return false;
  const uint32_t n = bytes[0] | bytes[1] << 8 | bytes[2] << 16 | uint32_t{bytes[3]} << 24;
  if (n > bytes.size() - 4) return false;
  absl::StatusOr<CheckpointQuantization> q = ParseCheckpointQuantization(
      absl::string_view(reinterpret_cast<const char*>(bytes.data() + 4), n), "seed");
  if (!q.ok()) return false;
  absl::StatusOr<ParsedSafetensors> parsed =
      ParseSafetensors(std::span<const uint8_t>(bytes).subspan(4 + n), "seed");
  if (!parsed.ok()) return false;
  return AttachQuantizedParts(parsed->tensors, *q).ok() &&
         std::any_of(parsed->tensors.begin(), parsed->tensors.end(),
                     [](const TensorView& t) { return t.packed != nullptr; });
}

// Whether the parser of `target` accepts `bytes`: for names, as a format or
// a scheme; for args, whether the command exits with 0.
bool Accepts(const std::string& target, const std::vector<uint8_t>& bytes) {
  const absl::string_view text(reinterpret_cast<const char*>(bytes.data()), bytes.size());
  if (target == "safetensors") return ParseSafetensors(bytes, "seed").ok();
  if (target == "npy") return ParseNpy(bytes, "seed.npy").ok();
  if (target == "config") return ParseModelConfig(text, "seed").ok();
  if (target == "names") return FindFormat(text).ok() || ParseScheme(text).ok();
  if (target == "args") return ArgsExitCode(bytes.data(), bytes.size()) == 0;
  if (target == "model") return ModelLoads(bytes);
  if (target == "gguf") return ParseGguf(bytes, "seed.gguf").ok();
  if (target == "imatrix") return ParseImatrix(bytes, "seed.imatrix").ok();
  if (target == "packed") return PackedComposes(bytes);
  if (target == "sentencepiece") {  // the model: four bytes of length, then it
    if (bytes.size() < 4) return false;
    const uint32_t n = bytes[0] | bytes[1] << 8 | bytes[2] << 16 | uint32_t{bytes[3]} << 24;
    return CheckedSentencePieceModel(text.substr(4, n), "seed").ok();
  }
  return ParseSafetensorsIndex(bytes, "seed").ok();
}

// Feeds every file under tests/fuzz/{corpus,regressions}/<target>; returns
// how many there were. Seeds named valid_* must be accepted, bad_* must not.
int Replay(const std::string& target, int (*fuzz)(const uint8_t*, size_t)) {
  int count = 0;
  for (const char* kind : {"corpus", "regressions"}) {
    const std::filesystem::path dir = std::filesystem::path(LOWP_FUZZ_DIR) / kind / target;
    if (!std::filesystem::exists(dir)) continue;
    for (const auto& entry : std::filesystem::directory_iterator(dir)) {
      if (!entry.is_regular_file()) continue;
      std::ifstream in(entry.path(), std::ios::binary);
      const std::vector<uint8_t> bytes{std::istreambuf_iterator<char>(in),
                                       std::istreambuf_iterator<char>()};
      SCOPED_TRACE(entry.path().string());
      // A copy of exactly the file's size, so reads past it are caught by
      // sanitizers where the build has them.
      std::vector<uint8_t> exact(bytes);
      fuzz(exact.data(), exact.size());
      const std::string name = entry.path().filename().string();
      if (name.rfind("valid", 0) == 0) {
        EXPECT_TRUE(Accepts(target, bytes));
      }
      if (name.rfind("bad_", 0) == 0) {
        EXPECT_FALSE(Accepts(target, bytes));
      }
      ++count;
    }
  }
  return count;
}

TEST(FuzzCorpusReplayTest, Safetensors) { EXPECT_GE(Replay("safetensors", FuzzSafetensors), 10); }
TEST(FuzzCorpusReplayTest, Npy) { EXPECT_GE(Replay("npy", FuzzNpy), 8); }
TEST(FuzzCorpusReplayTest, Index) { EXPECT_GE(Replay("index", FuzzIndex), 5); }
TEST(FuzzCorpusReplayTest, Config) { EXPECT_GE(Replay("config", FuzzConfig), 20); }
TEST(FuzzCorpusReplayTest, Names) { EXPECT_GE(Replay("names", FuzzNames), 40); }
TEST(FuzzCorpusReplayTest, Args) { EXPECT_GE(Replay("args", FuzzArgs), 40); }
TEST(FuzzCorpusReplayTest, Model) { EXPECT_GE(Replay("model", FuzzModel), 6); }
TEST(FuzzCorpusReplayTest, Gguf) { EXPECT_GE(Replay("gguf", FuzzGguf), 20); }
TEST(FuzzCorpusReplayTest, Tokenizer) { EXPECT_GE(Replay("tokenizer", FuzzTokenizer), 6); }
TEST(FuzzCorpusReplayTest, TokenizerJson) {
  EXPECT_GE(Replay("tokenizer_json", FuzzTokenizerJson), 10);
}
TEST(FuzzCorpusReplayTest, SentencePiece) {
  EXPECT_GE(Replay("sentencepiece", FuzzSentencePiece), 10);
}
TEST(FuzzCorpusReplayTest, Imatrix) { EXPECT_GE(Replay("imatrix", FuzzImatrix), 20); }
TEST(FuzzCorpusReplayTest, Packed) { EXPECT_GE(Replay("packed", FuzzPacked), 6); }
TEST(FuzzCorpusReplayTest, MixTable) { EXPECT_GE(Replay("mix_table", FuzzMixTable), 7); }

}  // namespace
}  // namespace lowp::fuzz
