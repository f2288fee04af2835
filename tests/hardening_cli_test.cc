// Issue 42's classes at the command line, each on every command it applies to:
//   (2) a candidate file is checked against the model before its layout is
//       trusted (a GGUF's architecture and hyperparameters);
//   (3) no command writes over a file it reads (one guard in OutputFile: every
//       name that reaches the file, every command that writes);
//   (4) an option that changes nothing is refused;
//   (5) every error names the option the user typed.
// The tokenizers' own hostile files (class 1) are tokenizer_hostile_test.cc's;
// the Python front end's are python/tests/test_arguments.py's.
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "io/gguf_names.h"
#include "io/gguf_writer.h"
#include "io/output_file.h"
#include "io/tensor_set.h"
#include "model/checkpoint.h"
#include "nlohmann/json.hpp"
#include "tests/cli_run.h"

namespace lowp {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

const std::string kData = LOWP_TEST_DATA_DIR;
const std::string kModel = kData + "/stories260K-hf";

class Hardening : public ScratchDir {
 protected:
  Result Run(const std::string& args) { return RunLowp(args, 300); }
  // A copy of the bundled model directory, so that a regression replaces the copy.
  std::string CopyModel(const std::string& name) const {
    fs::copy(kModel, Path(name), fs::copy_options::recursive);
    return Path(name);
  }
  void WriteText(const std::string& name, const std::string& text) const { Write(name, text); }
};

// ---------------------------------------------------------------- (3) outputs

TEST_F(Hardening, NoCommandWritesOverAFileItReads) {
  const std::string model = CopyModel("m");
  const std::string weights = model + "/model.safetensors";
  const std::string before = Read("m/model.safetensors");
  Write("codes.bin", std::string(64, '\x11'));
  Write("story.txt", "Once upon a time there was a little girl named Lily. She liked to play.\n");
  const std::string story = Read("story.txt");
  struct Case {
    std::string what, args, output, kept;  // kept: the input that must be unchanged
  };
  const std::vector<Case> cases = {
      {"convert in place", "convert --from fp16 --to bf16 " + Path("codes.bin") + " " +
                               Path("codes.bin"),
       Path("codes.bin"), "codes.bin"},
      {"quantize over its input",
       "quantize " + weights + " --scheme int8-channel --out " + weights, weights,
       "m/model.safetensors"},
      {"imatrix over the model", "imatrix --model " + model + " --sample 1:16 --out " + weights,
       weights, "m/model.safetensors"},
      {"imatrix over its text",
       "imatrix --model " + model + " --text " + Path("story.txt") + " --ctx 8 --out " +
           Path("story.txt"),
       Path("story.txt"), "story.txt"},
      {"plan --html over its tensors",
       "plan --model llama-3.1-8b --mode inference --tensors " + weights + " --html " + weights,
       weights, "m/model.safetensors"},
      {"plan --html over the evaluated model",
       "plan --model llama-3.1-8b --mode inference --tensors " + kData +
           "/stories260K/stories260K.f32.safetensors --eval --eval-model " + model +
           " --eval-sample 1:16 --html " + weights,
       weights, "m/model.safetensors"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    const Result r = Run(c.args);
    EXPECT_EQ(r.exit_code, 1) << r.output;
    EXPECT_THAT(r.output, HasSubstr(c.output + ": is an input of this run"));
    EXPECT_THAT(r.output, HasSubstr("lowp never writes over a file it reads"));
  }
  EXPECT_EQ(Read("m/model.safetensors"), before);
  EXPECT_EQ(Read("story.txt"), story);
  EXPECT_EQ(Read("codes.bin"), std::string(64, '\x11'));
  // Whatever name reaches the file: a symbolic link, a hard link, "./".
  fs::create_symlink(weights, Path("link.safetensors"));
  fs::create_hard_link(weights, Path("hard.safetensors"));
  for (const std::string& name :
       {Path("link.safetensors"), Path("hard.safetensors"), model + "/./model.safetensors"}) {
    SCOPED_TRACE(name);
    const Result r = Run("imatrix --model " + model + " --sample 1:16 --out " + name);
    EXPECT_EQ(r.exit_code, 1) << r.output;
    EXPECT_THAT(r.output, HasSubstr(name + ": is an input of this run (as "));
  }
  EXPECT_EQ(Read("m/model.safetensors"), before);
  // No temporary left anywhere.
  for (const auto& e : fs::recursive_directory_iterator(dir_)) {
    EXPECT_THAT(e.path().filename().string(), ::testing::Not(HasSubstr(".lowp-")));
  }
  // A file that is not read is written as ever.
  const Result ok = Run("imatrix --model " + model + " --sample 1:16 --out " + Path("im.gguf"));
  EXPECT_EQ(ok.exit_code, 0) << ok.output;
}

// --------------------------------------------------- (2) a GGUF against the model

// The bundled model as a float32 GGUF the way llama.cpp's converter lays it
// out (its names; q and k rows permuted for architecture "llama"), with the
// metadata `edit` leaves.
void WriteModelGguf(const std::string& path,
                    const std::function<void(GgufWriter&, const ModelConfig&)>& edit) {
  absl::StatusOr<Checkpoint> model = Checkpoint::OpenModel(kModel, {});
  ASSERT_TRUE(model.ok()) << model.status();
  const ModelConfig& c = model->config();
  GgufWriter w;
  edit(w, c);
  std::vector<std::vector<float>> keep;
  for (const TensorView& t : model->set().tensors()) {
    std::optional<std::string> name = LlamaCppName(t.name);
    ASSERT_TRUE(name.has_value()) << t.name;
    std::vector<float> values(static_cast<size_t>(t.elements()));
    ASSERT_TRUE(ReadAsFloat32(t, 0, values).ok());
    const bool q = absl::EndsWith(t.name, "q_proj.weight"), k = absl::EndsWith(t.name, "k_proj.weight");
    if (q || k) {
      const std::vector<int64_t> row_of = LlamaRopeRowOrder(t.rows(), q ? c.num_heads : c.num_kv_heads);
      std::vector<float> stored(values.size());
      for (int64_t r = 0; r < t.rows(); ++r) {
        std::copy_n(values.begin() + row_of[r] * t.cols(), t.cols(), stored.begin() + r * t.cols());
      }
      values = std::move(stored);
    }
    keep.push_back(std::move(values));
    std::vector<int64_t> ne(t.shape.rbegin(), t.shape.rend());
    w.AddF32Tensor(*name, ne, keep.back());
  }
  absl::StatusOr<std::unique_ptr<OutputFile>> out = OutputFile::Create(path);
  ASSERT_TRUE(out.ok()) << out.status();
  ASSERT_TRUE(w.Write(**out).ok());
  ASSERT_TRUE((*out)->Commit().ok());
}

void LlamaKeys(GgufWriter& w, const ModelConfig& c, int64_t heads) {
  w.AddU32("llama.block_count", static_cast<uint32_t>(c.num_layers));
  w.AddU32("llama.embedding_length", static_cast<uint32_t>(c.hidden_size));
  w.AddU32("llama.attention.head_count", static_cast<uint32_t>(heads));
  w.AddU32("llama.attention.head_count_kv", static_cast<uint32_t>(c.num_kv_heads));
}

TEST_F(Hardening, AGgufIsCheckedAgainstTheModelBeforeItsLayoutIsTrusted) {
  WriteModelGguf(Path("good.gguf"), [](GgufWriter& w, const ModelConfig& c) {
    w.AddString("general.architecture", "llama");
    LlamaKeys(w, c, c.num_heads);
  });
  const std::string eval = "eval --model " + kModel + " --sample 2:16 --json --weights-file ";
  const Result good = Run(eval + Path("good.gguf"));
  ASSERT_EQ(good.exit_code, 0) << good.output;
  const nlohmann::json j = nlohmann::json::parse(good.output);
  // The same float32 values in llama.cpp's layout: the reference's outputs.
  EXPECT_EQ(j["candidates"][0]["kl_max"].get<double>(), 0.0);
  EXPECT_EQ(j["candidates"][0]["top1_agreement"].get<double>(), 1.0);

  struct Case {
    std::string name, message;
    std::function<void(GgufWriter&, const ModelConfig&)> edit;
  };
  const std::vector<Case> cases = {
      {"no_architecture.gguf", "general.architecture is missing",
       [](GgufWriter& w, const ModelConfig& c) { LlamaKeys(w, c, c.num_heads); }},
      {"architecture_u32.gguf", "general.architecture is a u32, not a string",
       [](GgufWriter& w, const ModelConfig& c) {
         w.AddU32("general.architecture", 1);
         LlamaKeys(w, c, c.num_heads);
       }},
      // The same tensors labelled qwen2 (whose q and k llama.cpp does not
      // permute) read as KL 1.67 before the check.
      {"qwen2.gguf", "a GGUF of architecture \"qwen2\", but",
       [](GgufWriter& w, const ModelConfig&) { w.AddString("general.architecture", "qwen2"); }},
      {"heads.gguf", "llama.attention.head_count is 4, but",
       [](GgufWriter& w, const ModelConfig& c) {
         w.AddString("general.architecture", "llama");
         LlamaKeys(w, c, 4);
       }},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    WriteModelGguf(Path(c.name), c.edit);
    const Result r = Run(eval + Path(c.name));
    EXPECT_EQ(r.exit_code, 1) << r.output;
    EXPECT_THAT(r.output, HasSubstr(Path(c.name)));
    EXPECT_THAT(r.output, HasSubstr(c.message));
    // quant-error --reference reads the same file through the same check
    // only where it has a model: its own pairing is by name (not here).
  }
}

// ------------------------------------------- (4) options that change nothing

TEST_F(Hardening, AnImatrixNothingUsesIsRefused) {
  const Result made = Run("imatrix --model " + kModel + " --sample 1:16 --out " + Path("im.gguf"));
  ASSERT_EQ(made.exit_code, 0) << made.output;
  const std::string im = " --imatrix " + Path("im.gguf");
  const std::string eval = "eval --model " + kModel + " --sample 1:16" + im;
  const std::string weights = kData + "/stories260K/stories260K.f32.safetensors";
  struct Case {
    std::string args, message;
  };
  const std::vector<Case> cases = {
      {eval + " --weights-file " + kData + "/ggml/stories260K-Q4_K_M.gguf",
       "nothing here is quantized"},
      {eval + " --weights q8_0,mxfp4", "no scheme here uses importance weights"},
      {eval + " --weights int4-g128", "no scheme here uses importance weights"},
      {eval + " --weights q4_0:rotate=hadamard", "no scheme here uses importance weights"},
      {eval + " --activations q8_0", "nothing here is quantized"},
      {"quant-error " + weights + " --scheme q8_0,bf16" + im,
       "no scheme here uses importance weights"},
      {"quantize " + weights + " --scheme nf4 --out " + Path("q.safetensors") + im,
       "no scheme here uses importance weights"},
      // Entries of another model: none names a tensor quantized here.
      {"quant-error " + kData + "/stories3M-hf/model.safetensors --scheme q4_0" + im,
       "columns but its imatrix entry in"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.args);
    const Result r = Run(c.args);
    EXPECT_EQ(r.exit_code, 1) << r.output;
    EXPECT_THAT(r.output, HasSubstr("lowp: --imatrix: "));
    EXPECT_THAT(r.output, HasSubstr(c.message));
  }
  // Used: accepted.
  EXPECT_EQ(Run(eval + " --weights q4_0").exit_code, 0);
  EXPECT_EQ(Run(eval + " --weights Q4_K_M,q8_0").exit_code, 0);
  EXPECT_EQ(Run("quant-error " + weights + " --scheme q4_K,q8_0" + im).exit_code, 0);
  EXPECT_FALSE(fs::exists(Path("q.safetensors")));
}

TEST_F(Hardening, TokenizeOptionsThatChangeNothingOrLie) {
  WriteText("t.txt", "Once upon a time");
  // A typo in --model: not the parent directory's tokenizer.
  const Result typo = Run("tokenize " + Path("t.txt") + " --model " + kModel + "/typo");
  EXPECT_EQ(typo.exit_code, 1);
  EXPECT_THAT(typo.output, HasSubstr("--model: " + kModel + "/typo: no such file or directory"));
  // --no-bos says what it did.
  const Result no_bos = Run("tokenize " + Path("t.txt") + " --no-bos");
  ASSERT_EQ(no_bos.exit_code, 0) << no_bos.output;
  EXPECT_THAT(no_bos.output, HasSubstr("BOS 1 not added"));
  EXPECT_THAT(Run("tokenize " + Path("t.txt")).output, HasSubstr("BOS 1 added"));
  // --parse-special on SentencePiece, which never reads special tokens.
  const Result special = Run("tokenize " + Path("t.txt") + " --tokenizer " + kData +
                             "/llama2-tokenizer/tokenizer.model --parse-special");
  EXPECT_EQ(special.exit_code, 1);
  EXPECT_THAT(special.output, HasSubstr("--parse-special: changes nothing"));
  // --bos with a tokenizer that has no BOS.
  fs::create_directory(Path("nobos"));
  Write("nobos/tokenizer.json",
        R"({"model": {"type": "BPE", "vocab": {"O": 0, "n": 1, "c": 2, "e": 3}, "merges": []}})");
  const Result bos = Run("tokenize " + Path("t.txt") + " --tokenizer " + Path("nobos") + " --bos");
  EXPECT_EQ(bos.exit_code, 1);
  EXPECT_THAT(bos.output, HasSubstr("--bos: the tokenizer " + Path("nobos/tokenizer.json") +
                                    " has no BOS token to add"));
}

TEST_F(Hardening, UpdateErrorWithNothingFloatingIsRefused) {
  // One int64 tensor: nothing to measure (it printed an "(all)" row of
  // "0% lost, ratio 1" over 0 elements).
  std::string header = R"({"ids":{"dtype":"I64","shape":[4],"data_offsets":[0,32]}})";
  std::string bytes(8, '\0');
  for (int i = 0; i < 8; ++i) bytes[i] = static_cast<char>(uint64_t{header.size()} >> (8 * i));
  Write("ints.safetensors", bytes + header + std::string(32, '\0'));
  for (const char* command : {"update-error", "quant-error --scheme int8", "range"}) {
    SCOPED_TRACE(command);
    const Result r = Run(absl::StrCat(command, " ", Path("ints.safetensors")));
    EXPECT_EQ(r.exit_code, 1) << r.output;
    EXPECT_THAT(r.output, HasSubstr("no floating tensor"));
    EXPECT_THAT(r.output, HasSubstr("ids (I64)"));
  }
  const Result selected =
      Run("update-error " + kData + "/stories260K/stories260K.f32.safetensors --tensors '*norm*' --steps 2");
  EXPECT_EQ(selected.exit_code, 0) << selected.output;
}

// ------------------------------------------- (5) errors name the option typed

TEST_F(Hardening, ErrorsNameTheOptionTheUserTyped) {
  WriteText("t.txt", std::string(2000, 'a') + " Once upon a time.\n");
  Write("bad.txt", "abc\xff\xfe def");
  fs::create_directory(Path("json"));
  Write("json/tokenizer.json", R"({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": []}})");
  struct Case {
    std::string args, message;
  };
  const std::string text = " --text " + Path("t.txt");
  const std::vector<Case> cases = {
      // --ctx beyond the model's positions (it was a --tokens error).
      {"eval --model " + kModel + text + " --ctx 100000", "lowp: --ctx: sequences of 100000"},
      {"imatrix --model " + kModel + text + " --ctx 100000 --out " + Path("i.gguf"),
       "lowp: --ctx: sequences of 100000"},
      // A tokenizer whose ids the model does not have (it was --tokens).
      {"eval --model " + kModel + text + " --ctx 8 --tokenizer " + kData +
           "/llama2-tokenizer/tokenizer.model",
       "lowp: --tokenizer: the tokenizer " + kData + "/llama2-tokenizer/tokenizer.model gives token"},
      // mix's tuning tokens (they named --ctx, --text, --sample).
      {"mix --bits-per-weight 4.5 --tune-text " + Path("t.txt") + " --tune-ctx 100000",
       "lowp: --tune-ctx: sequences of 100000"},
      {"mix --bits-per-weight 4.5 --tune-sample 0:5", "lowp: --tune-sample: '0:5'"},
      // Text that is not UTF-8 names its file (and the option).
      {"mix --bits-per-weight 4.5 --tune-text " + Path("bad.txt") + " --tune-tokenizer " +
           Path("json") + " --tune-ctx 8",
       "lowp: --tune-text: " + Path("bad.txt") + ": the text is not valid UTF-8 at byte 3"},
      {"eval --model " + kModel + " --text " + Path("bad.txt") + " --tokenizer " + Path("json") +
           " --ctx 8",
       "lowp: --text: " + Path("bad.txt") + ": the text is not valid UTF-8 at byte 3"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.args);
    const Result r = Run(c.args);
    EXPECT_EQ(r.exit_code, 1) << r.output;
    EXPECT_THAT(r.output, HasSubstr(c.message));
    EXPECT_THAT(r.output, ::testing::Not(HasSubstr("--tokens")));
  }
  EXPECT_FALSE(fs::exists(Path("i.gguf")));
}

// A tokenizer that lacks the BOS its tokenizer_config.json asks for: an
// error naming both files, not "token -1" at the model.
TEST_F(Hardening, ABosAskedForButMissingNamesTheFiles) {
  fs::create_directory(Path("tok"));
  Write("tok/tokenizer.json",
        R"({"model": {"type": "BPE", "vocab": {"a": 0, "b": 1}, "merges": []}})");
  Write("tok/tokenizer_config.json", R"({"add_bos_token": true, "bos_token": "<s>"})");
  WriteText("t.txt", "abab");
  const Result r = Run("tokenize " + Path("t.txt") + " --tokenizer " + Path("tok"));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.output, HasSubstr(Path("tok/tokenizer_config.json") +
                                  " asks for BOS (add_bos_token true), but " +
                                  Path("tok/tokenizer.json") + " has no BOS token"));
  const Result e = Run("eval --model " + kModel + " --text " + Path("t.txt") + " --ctx 4 --tokenizer " +
                       Path("tok"));
  EXPECT_EQ(e.exit_code, 1);
  EXPECT_THAT(e.output, HasSubstr("has no BOS token"));
  EXPECT_THAT(e.output, ::testing::Not(HasSubstr("token -1")));
}

}  // namespace
}  // namespace lowp
