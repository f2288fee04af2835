// Issue 42's class 1 in the tokenizers: every byte lowp hands to a
// third-party parser (libsentencepiece, PCRE2, a normalizer) is bounded and
// validated first, so a hostile tokenizer file or text is an error naming
// the file, never a crash, a hang or an allocation without bound.
//   - tokenizer.model: lowp's own reading of the protobuf and of the charsmap
//     (tokenizer/sentencepiece_model.h, tokenizer/charsmap.h), checked
//     against libsentencepiece reading the original file: the ids are the
//     same on every model it accepts; the hostile models of the fuzz seeds
//     (make_tokenizer_seeds.py: cycles, 33 matches at once, replacements
//     outside the blob, NUL pieces, ...) are refused.
//   - tokenizer.json: the normalizers' growth and the patterns' work are
//     bounded per text.
//   - BOS: a config asking for one the tokenizer lacks.
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tokenizer/sentencepiece_bridge.h"
#include "tokenizer/sentencepiece_model.h"
#include "tokenizer/tokenizer.h"

namespace lowp {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

const std::string kData = LOWP_TEST_DATA_DIR;
const std::string kSeeds = LOWP_TEST_DATA_DIR "/../fuzz/corpus/sentencepiece";

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

std::string TempDir(const std::string& name) {
  const std::string dir = ::testing::TempDir() + "/tokenizer_hostile_" + name;
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

void Write(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

// Protobuf, as much as the tests need: a length-delimited field.
std::string Varint(uint64_t v) {
  std::string out;
  for (; v >= 0x80; v >>= 7) out.push_back(static_cast<char>(v | 0x80));
  out.push_back(static_cast<char>(v));
  return out;
}
std::string Field(uint32_t number, const std::string& bytes) {
  return Varint(uint64_t{number} << 3 | 2) + Varint(bytes.size()) + bytes;
}
// A normalizer_spec holding `charsmap`: merged into a model's own by
// protobuf's rules (and lowp's), it replaces the model's charsmap.
std::string Normalizer(const std::string& charsmap) { return Field(3, Field(2, charsmap)); }

// The model and the text of a seed (four bytes of length, the model, the text).
struct Seed {
  std::string name, model, text;
};
std::vector<Seed> Seeds() {
  std::vector<Seed> seeds;
  for (const auto& e : fs::directory_iterator(kSeeds)) {
    const std::string bytes = ReadAll(e.path());
    if (bytes.size() < 4) continue;
    const uint32_t n = static_cast<uint8_t>(bytes[0]) | static_cast<uint8_t>(bytes[1]) << 8 |
                       static_cast<uint8_t>(bytes[2]) << 16 |
                       uint32_t{static_cast<uint8_t>(bytes[3])} << 24;
    const std::string rest = bytes.substr(4);
    seeds.push_back({e.path().filename(), rest.substr(0, n), rest.size() > n ? rest.substr(n) : ""});
  }
  return seeds;
}

absl::StatusOr<std::unique_ptr<Tokenizer>> LoadModelBytes(const std::string& dir,
                                                          const std::string& bytes) {
  Write(dir + "/tokenizer.model", bytes);
  return LoadTokenizer(dir + "/tokenizer.model");
}

// ---------------------------------------------------------------- tokenizer.model

TEST(SentencePieceModel, Llama2WithAGarbageCharsmapMergedInIsRefusedNotCrashed) {
  const std::string llama2 = ReadAll(kData + "/llama2-tokenizer/tokenizer.model");
  const std::string dir = TempDir("llama2_garbage");
  // Garbage units behind a well-formed header (it crashed libsentencepiece
  // in Normalizer::NormalizePrefix on the first encode), and with a
  // self-test sample (libsentencepiece encodes those inside its load).
  std::string units;
  for (int i = 0; i < 4096; ++i) units.push_back(static_cast<char>((i * 151 + 7) & 0xFF));
  const std::string charsmap = std::string("\x00\x10\x00\x00", 4) + units + std::string("zz\0", 3);
  const std::string self_test = Field(4, Field(1, Field(1, "Hello") + Field(2, "x")));
  for (const std::string& extra : {Normalizer(charsmap), Normalizer(charsmap) + self_test}) {
    absl::StatusOr<std::unique_ptr<Tokenizer>> t = LoadModelBytes(dir, llama2 + extra);
    ASSERT_FALSE(t.ok());
    EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(t.status().message(), HasSubstr(dir + "/tokenizer.model"));
    EXPECT_THAT(t.status().message(), HasSubstr("precompiled_charsmap"));
  }
  // The file itself, and with an empty charsmap merged in (identity).
  for (const std::string& extra : {std::string(), Normalizer("")}) {
    absl::StatusOr<std::unique_ptr<Tokenizer>> t = LoadModelBytes(dir, llama2 + extra);
    ASSERT_TRUE(t.ok()) << t.status();
    EXPECT_THAT(*(*t)->Tokenize("Once upon a time"), ::testing::ElementsAre(1, 9038, 2501, 263, 931));
  }
}

// What lowp hands libsentencepiece (its canonical re-serialization) encodes
// every text exactly as libsentencepiece encodes it from the original file:
// on every seed trained by SentencePiece (charsmaps of rules, identity,
// unigram and BPE, byte fallback, user-defined pieces) and Llama 2's model,
// on their texts and on real text.
TEST(SentencePieceModel, CanonicalModelEncodesAsTheOriginalFile) {
  std::vector<std::pair<std::string, std::string>> models = {
      {"llama2", ReadAll(kData + "/llama2-tokenizer/tokenizer.model")}};
  std::vector<std::string> texts = {
      ReadAll(kData + "/stories260K-hf/PROVENANCE.md"),
      "Hello ＡＢＣ １２３, café ① ﬁ  spaces\tand\nlines 日本語 <tool>x</tool>",
      "", " ", "A B", std::string("\0a\xff\xfe", 4)};
  int trained = 0;
  for (const Seed& s : Seeds()) {
    if (s.name.rfind("seed_", 0) != 0 && s.name.rfind("valid_", 0) != 0) continue;
    models.emplace_back(s.name, s.model);
    texts.push_back(s.text);
    trained += s.name.rfind("seed_", 0) == 0;
  }
  EXPECT_GE(trained, 4);
  for (const auto& [name, bytes] : models) {
    SCOPED_TRACE(name);
    SentencePieceModel original;
    ASSERT_EQ(original.Load(bytes), "");
    absl::StatusOr<std::string> canonical = CheckedSentencePieceModel(bytes, name);
    ASSERT_TRUE(canonical.ok()) << canonical.status();
    SentencePieceModel checked;
    ASSERT_EQ(checked.Load(*canonical), "");
    EXPECT_EQ(checked.size(), original.size());
    EXPECT_EQ(checked.bos(), original.bos());
    EXPECT_EQ(checked.eos(), original.eos());
    for (const std::string& text : texts) {
      std::vector<int> a, b;
      EXPECT_EQ(original.Encode(text, &a), "");
      EXPECT_EQ(checked.Encode(text, &b), "");
      EXPECT_EQ(a, b) << text;
    }
  }
}

// The hostile seeds: each is refused by lowp with the file's name and what
// is wrong, before libsentencepiece reads it.
TEST(SentencePieceModel, HostileModelsAreRefusedByName) {
  const std::string dir = TempDir("seeds");
  int refused = 0;
  for (const Seed& s : Seeds()) {
    if (s.name.rfind("bad_", 0) != 0) continue;
    SCOPED_TRACE(s.name);
    absl::StatusOr<std::unique_ptr<Tokenizer>> t = LoadModelBytes(dir, s.model);
    ASSERT_FALSE(t.ok());
    EXPECT_THAT(t.status().message(), HasSubstr(dir + "/tokenizer.model: not a SentencePiece model"));
    ++refused;
  }
  EXPECT_GE(refused, 19);
  // What each limit says, on a few.
  const std::vector<std::pair<std::string, std::string>> why = {
      {"bad_chain33", "match more than 32 of its keys"},
      {"bad_cycle_without_match", "its trie has a cycle"},
      {"bad_replacement_outside", "replacement starts outside the charsmap"},
      {"bad_replacement_too_long", "longer than 64 bytes"},
      {"bad_replacement_grows_19_times", "turns 1 bytes into 19"},
      {"bad_trie_size_past_end", "does not fit"},
      {"bad_nul_piece", "holds a NUL byte"},
      {"bad_user_defined_chain", "more than 64 user-defined pieces"},
      {"bad_model_type_cut_to_int32", "model_type -2"},
      {"bad_piece_type", "has type 99"},
      {"bad_repeated_piece", "repeats an earlier piece"},
      {"bad_long_piece", "above the limit of 512"},
  };
  for (const auto& [name, message] : why) {
    SCOPED_TRACE(name);
    const std::string bytes = ReadAll(kSeeds + "/" + name);
    ASSERT_GE(bytes.size(), 4u);
    const uint32_t n = static_cast<uint8_t>(bytes[0]) | static_cast<uint8_t>(bytes[1]) << 8 |
                       static_cast<uint8_t>(bytes[2]) << 16 |
                       uint32_t{static_cast<uint8_t>(bytes[3])} << 24;
    absl::StatusOr<std::string> checked = CheckedSentencePieceModel(bytes.substr(4, n), name);
    ASSERT_FALSE(checked.ok());
    EXPECT_THAT(checked.status().message(), HasSubstr(message));
  }
}

TEST(SentencePieceModel, MalformedProtobufIsRefused) {
  const std::string piece = Field(1, Field(1, "a"));
  for (const std::string& bytes :
       {std::string("\x0a\x05\x0a\x03", 4),               // a length past the end
        std::string("\x0b\x00", 2),                        // a group
        std::string("\x00\x01", 2),                        // field number 0
        std::string(11, '\xff'),                           // an overlong varint
        piece + std::string("\x0d\x01\x02", 3),            // fixed32 cut short
        Field(2, std::string("\x18\xff\xff\xff\xff\xff\xff\xff\xff\xff\x7f", 11))}) {
    EXPECT_FALSE(CheckedSentencePieceModel(bytes, "m").ok()) << bytes.size();
  }
}

// ---------------------------------------------------------------- tokenizer.json

std::string Json(const std::string& normalizer, const std::string& pre_tokenizer) {
  return absl::StrCat(R"({"normalizer": )", normalizer, R"(, "pre_tokenizer": )", pre_tokenizer,
                      R"(, "model": {"type": "BPE", "unk_token": "<unk>", "vocab": {"<unk>": 0,
                      "a": 1, "b": 2, "\u2581": 3}, "merges": []}})");
}

TEST(HfPipelineBounds, NormalizersCannotGrowTheTextWithoutBound) {
  const std::string dir = TempDir("growth");
  // `n` Replace steps, each doubling every "a".
  auto doubling = [](int n) {
    std::string steps;
    for (int i = 0; i < n; ++i) {
      steps += std::string(i ? ", " : "") +
               R"({"type": "Replace", "pattern": {"String": "a"}, "content": "aa"})";
    }
    return R"({"type": "Sequence", "normalizers": [)" + steps + "]}";
  };
  const std::string long_replacement(3000 * 3, 'b');
  struct Case {
    std::string json, text, step;
  };
  const std::vector<Case> cases = {
      // 40 Replace steps doubling "a": 2^40 bytes of one.
      {Json(doubling(40), "null"), "a", "Replace"},
      {Json(R"({"type": "Prepend", "prepend": ")" + std::string(2 << 20, 'a') + R"("})", "null"),
       "a", "Prepend"},
      {Json("null", R"({"type": "Metaspace", "replacement": ")" + long_replacement +
                        R"(", "split": false})"),
       std::string(1000, ' '), "Metaspace"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.step);
    Write(dir + "/tokenizer.json", c.json);
    absl::StatusOr<std::unique_ptr<Tokenizer>> t = LoadTokenizer(dir);
    ASSERT_TRUE(t.ok()) << t.status();
    absl::StatusOr<std::vector<int32_t>> ids = (*t)->Encode(c.text);
    ASSERT_FALSE(ids.ok());
    EXPECT_THAT(ids.status().message(), HasSubstr(dir + "/tokenizer.json: the " + c.step +
                                                  " step would grow the text"));
  }
  // Growth within the bound: 4 doublings of 1 KB.
  Write(dir + "/tokenizer.json", Json(doubling(4), "null"));
  absl::StatusOr<std::unique_ptr<Tokenizer>> t = LoadTokenizer(dir);
  ASSERT_TRUE(t.ok()) << t.status();
  absl::StatusOr<std::vector<int32_t>> ids = (*t)->Encode(std::string(1024, 'a'));
  ASSERT_TRUE(ids.ok()) << ids.status();
  EXPECT_EQ(ids->size(), 16u * 1024);
}

// A pattern that backtracks exponentially: under PCRE2's per-call limit at
// every position, it took 203 s on 10 KB of "a" (hours on 1 MB); the budget
// per text stops it at its first positions. Unanchored, one call could also
// try every start position under its limit: positions are tried one by one.
TEST(HfPipelineBounds, PatternWorkIsBoundedPerText) {
  const std::string dir = TempDir("backtracking");
  for (const std::string& pattern : {std::string("(?:a|a){0,21}b|."), std::string("(?:a|a){0,21}b")}) {
    SCOPED_TRACE(pattern);
    Write(dir + "/tokenizer.json",
          Json("null", R"({"type": "Split", "pattern": {"Regex": ")" + pattern +
                           R"("}, "behavior": "Isolated"})"));
    absl::StatusOr<std::unique_ptr<Tokenizer>> t = LoadTokenizer(dir);
    ASSERT_TRUE(t.ok()) << t.status();
    // (A "b" at the end: without one PCRE2 knows at once there is no match.)
    absl::StatusOr<std::vector<int32_t>> ids = (*t)->Encode(std::string(10000, 'a') + "b");
    ASSERT_FALSE(ids.ok());
    EXPECT_THAT(ids.status().message(), HasSubstr(dir + "/tokenizer.json"));
    EXPECT_THAT(ids.status().message(), HasSubstr("backtracks too much"));
  }
  // A pattern that matches in a few steps per position is not stopped on a
  // long text: 1 MB of alternating runs.
  Write(dir + "/tokenizer.json",
        Json("null", R"({"type": "Split", "pattern": {"Regex": "a+|b+"}, "behavior": "Isolated"})"));
  absl::StatusOr<std::unique_ptr<Tokenizer>> t = LoadTokenizer(dir);
  ASSERT_TRUE(t.ok()) << t.status();
  std::string text;
  while (text.size() < (1u << 20)) text += "aaab";
  absl::StatusOr<std::vector<int32_t>> ids = (*t)->Encode(text);
  ASSERT_TRUE(ids.ok()) << ids.status();
  EXPECT_EQ(ids->size(), text.size());
}

// Added tokens are found once per token over the text: with 256 of them
// (Llama 3 reserves as many) and a text of many added tokens, each stretch
// between two scanned the whole rest of the text for every token (200 KB
// took more than ten minutes; now a fraction of a second).
TEST(HfPipelineBounds, ManyAddedTokensOverALongTextAreLinear) {
  const std::string dir = TempDir("added");
  std::string added, vocab = R"("a": 0, "b": 1)";
  for (int i = 0; i < 256; ++i) {
    added += absl::StrCat(i ? ", " : "", R"({"id": )", 2 + i, R"(, "content": "<|reserved_)", i,
                          R"(|>", "special": true})");
    vocab += absl::StrCat(R"(, "<|reserved_)", i, R"(|>": )", 2 + i);
  }
  added += R"(, {"id": 300, "content": "<x>", "special": false}, {"id": 301, "content": "ab",
              "special": false, "single_word": true})";
  vocab += R"(, "<x>": 300, "ab": 301, "<unk>": 302, " ": 303)";
  Write(dir + "/tokenizer.json",
        absl::StrCat(R"({"added_tokens": [)", added,
                     R"(], "model": {"type": "BPE", "unk_token": "<unk>", "vocab": {)", vocab,
                     R"(}, "merges": []}})"));
  absl::StatusOr<std::unique_ptr<Tokenizer>> t = LoadTokenizer(dir);
  ASSERT_TRUE(t.ok()) << t.status();
  std::string text;
  for (int i = 0; i < 100000; ++i) text += i % 7 == 0 ? "<|reserved_255|>ab " : "ab<x>";
  for (bool special : {false, true}) {
    absl::StatusOr<std::vector<int32_t>> ids = (*t)->Encode(text, special);
    ASSERT_TRUE(ids.ok()) << ids.status();
    // "ab" between non-word bytes is a single word; the reserved token is
    // text (unknown characters) unless special tokens are parsed.
    int64_t x = 0, ab = 0, reserved = 0;
    for (int32_t id : *ids) x += id == 300, ab += id == 301, reserved += id == 257;
    EXPECT_EQ(x, 100000 - 14286);
    EXPECT_EQ(ab, 100000);
    EXPECT_EQ(reserved, special ? 14286 : 0);
  }
}

// ---------------------------------------------------------------- BOS

TEST(TokenizerBos, AskedForButMissingIsAnErrorNamingTheFiles) {
  const std::string dir = TempDir("bos");
  Write(dir + "/tokenizer_config.json", R"({"add_bos_token": true})");
  // tokenizer.json with no BOS anywhere.
  Write(dir + "/tokenizer.json", Json("null", "null"));
  absl::StatusOr<std::unique_ptr<Tokenizer>> json = LoadTokenizer(dir + "/tokenizer.json");
  ASSERT_FALSE(json.ok());
  EXPECT_THAT(json.status().message(),
              HasSubstr(dir + "/tokenizer_config.json asks for BOS (add_bos_token true), but " +
                        dir + "/tokenizer.json has no BOS token"));
  // llama2.c's tok*.bin of one token (BOS is token 1 there).
  std::string tok = std::string("\x04\x00\x00\x00", 4);
  tok += std::string("\x00\x00\x00\x00\x01\x00\x00\x00", 8) + "a";
  Write(dir + "/tok1.bin", tok);
  absl::StatusOr<std::unique_ptr<Tokenizer>> bin = LoadTokenizer(dir + "/tok1.bin");
  ASSERT_FALSE(bin.ok());
  EXPECT_THAT(bin.status().message(), HasSubstr("tok1.bin has no BOS token"));
  // config.json's bos_token_id outside the vocabulary: an error, not token 1.
  fs::remove(dir + "/tokenizer_config.json");
  Write(dir + "/config.json", R"({"bos_token_id": 600})");
  absl::StatusOr<std::unique_ptr<Tokenizer>> far =
      LoadTokenizer(kData + "/stories260K-hf/tok512.bin");
  ASSERT_TRUE(far.ok());  // its own config.json is fine
  fs::copy_file(kData + "/stories260K-hf/tok512.bin", dir + "/tok512.bin");
  absl::StatusOr<std::unique_ptr<Tokenizer>> bad = LoadTokenizer(dir + "/tok512.bin");
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr("bos_token_id 600 is not one of its 512"));
}

}  // namespace
}  // namespace lowp
