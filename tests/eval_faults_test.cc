// The evaluator on bad inputs and faults: a checkpoint truncated, modified or
// replaced while it is read, a signal in the middle of a run, token files the
// model cannot take, a large vocabulary; and its memory bound on a checkpoint
// larger than the bound (label slow).
#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "eval/evaluate.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "io/tensor_set.h"
#include "model/checkpoint.h"
#include "tests/cli_run.h"
#include "tests/random_checkpoint.h"

namespace lowp {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

// A random llama of 4 layers whose products split across threads (bf16,
// 34 MB on disk).
ModelConfig Shape() { return testing::LlamaShape("faults", 512, 4096, 4, 8, 2, 3000, false); }

class EvalFaults : public ScratchDir {
 protected:
  void SetUp() override {
    ScratchDir::SetUp();
    ASSERT_TRUE(testing::WriteRandomCheckpoint(Path("model"), Shape(), DType::kBF16, 4).ok());
    tokens_.resize(2 * 48);
    for (size_t i = 0; i < tokens_.size(); ++i) tokens_[i] = static_cast<int32_t>((i * 613) % 3000);
    testing::WriteTokensNpy(Path("tokens.npy"), {2, 48}, tokens_);
  }

  std::vector<EvalCandidate> Candidates() const {
    EvalCandidate c;
    c.label = c.weights = "int8-channel";
    c.weight_rules.push_back({"", std::shared_ptr<const Scheme>(*ParseScheme("int8-channel")), {}});
    return {c};
  }

  // Evaluate `candidates` (default Candidates()) on the model directory,
  // `fault` called when layer 2's first step begins.
  absl::StatusOr<EvalReport> EvaluateWith(const std::function<void()>& fault,
                                          std::vector<EvalCandidate> candidates = {}) {
    if (candidates.empty()) candidates = Candidates();
    absl::StatusOr<Checkpoint> model = Checkpoint::OpenModel(Path("model"), {});
    if (!model.ok()) return model.status();
    EvalRun run;
    run.threads = 2;
    bool done = false;
    run.progress = [&](int64_t, int64_t, const std::string& what) {
      if (!done && what.starts_with("layer 3/")) {
        done = true;
        if (fault) fault();
      }
    };
    return Evaluate(*model, tokens_, 48, candidates, run);
  }

  std::string Safetensors() const { return Path("model/model.safetensors"); }
  std::vector<int32_t> tokens_;
};

TEST_F(EvalFaults, ACheckpointTruncatedDuringTheRunIsAnError) {
  absl::StatusOr<EvalReport> r =
      EvaluateWith([&] { fs::resize_file(Safetensors(), fs::file_size(Safetensors()) / 2); });
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kDataLoss) << r.status();
  EXPECT_THAT(r.status().message(), HasSubstr("model.safetensors"));
}

TEST_F(EvalFaults, ACheckpointModifiedInPlaceDuringTheRunIsAnError) {
  absl::StatusOr<EvalReport> r = EvaluateWith([&] {
    const int fd = open(Safetensors().c_str(), O_WRONLY);
    ASSERT_GE(fd, 0);
    const char zeros[64] = {};
    // Past the header, inside the last layer's tensors.
    ASSERT_EQ(
        pwrite(fd, zeros, sizeof(zeros), static_cast<off_t>(fs::file_size(Safetensors()) - 4096)),
        64);
    close(fd);
  });
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kDataLoss) << r.status();
  EXPECT_THAT(r.status().message(), HasSubstr("modified while being read"));
}

TEST_F(EvalFaults, ACandidatesFileTruncatedDuringTheRunIsAnError) {
  // The checkpoint's own copy as a candidate's file, cut short mid-run.
  fs::copy_file(Safetensors(), Path("copy.safetensors"));
  EvalCandidate file;
  file.label = file.weights = file.weights_file = Path("copy.safetensors");
  absl::StatusOr<EvalReport> r = EvaluateWith(
      [&] {
        fs::resize_file(Path("copy.safetensors"), fs::file_size(Path("copy.safetensors")) / 3);
      },
      {file});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kDataLoss) << r.status();
  EXPECT_THAT(r.status().message(), HasSubstr("copy.safetensors"));
}

TEST_F(EvalFaults, ACheckpointReplacedDuringTheRunIsReadAsOpened) {
  absl::StatusOr<EvalReport> undisturbed = EvaluateWith({});
  ASSERT_TRUE(undisturbed.ok()) << undisturbed.status();
  absl::StatusOr<EvalReport> r = EvaluateWith([&] {
    // Another checkpoint renamed over it: the open file is still the old one.
    ASSERT_TRUE(testing::WriteRandomCheckpoint(Path("other"), Shape(), DType::kBF16, 5).ok());
    fs::rename(Path("other/model.safetensors"), Safetensors());
  });
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->candidates[0].kl.mean, undisturbed->candidates[0].kl.mean);
  EXPECT_EQ(r->reference_perplexity, undisturbed->reference_perplexity);
}

TEST_F(EvalFaults, SignalsDuringARunEndItWithNoOutputAndNothingLeft) {
  for (int sig : {SIGINT, SIGTERM}) {
    const pid_t pid = fork();
    if (pid == 0) {
      const int out = open(Path("stdout").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      dup2(out, 1);
      const int null = open("/dev/null", O_WRONLY);
      dup2(null, 2);
      const std::string cli = CliPath(), model = Path("model");
      execl(cli.c_str(), cli.c_str(), "eval", "--model", model.c_str(), "--sample", "4:256",
            "--weights", "q4_0,int8-channel", "--json", static_cast<char*>(nullptr));
      _exit(127);
    }
    // Signal once the run reads the checkpoint (it is mapped).
    bool mapped = false;
    for (int i = 0; i < 20000 && !mapped; ++i) {
      std::ifstream maps(absl::StrCat("/proc/", pid, "/maps"));
      const std::string text{std::istreambuf_iterator<char>(maps), {}};
      mapped = text.find("model.safetensors") != std::string::npos;
      if (!mapped) std::this_thread::sleep_for(std::chrono::microseconds(500));
    }
    EXPECT_TRUE(mapped) << "the checkpoint was never mapped";
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    kill(pid, sig);
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    ASSERT_TRUE(WIFEXITED(status)) << "signal " << sig;
    EXPECT_EQ(WEXITSTATUS(status), 128 + sig);
    EXPECT_EQ(Read("stdout"), "") << "signal " << sig;
    EXPECT_EQ(Files(), (std::vector<std::string>{"model", "stdout", "tokens.npy"}));
  }
}

TEST_F(EvalFaults, TokenFilesTheModelCannotTakeAreRefused) {
  // 789,146 ids in one dimension: one sequence, far longer than the bundled
  // model's 512 positions (it aborted with std::bad_alloc before).
  std::vector<int32_t> ids(789146);
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int32_t>(i % 512);
  testing::WriteTokensNpy(Path("long.npy"), {static_cast<int64_t>(ids.size())}, ids);
  Result r = RunLowp("eval --tokens " + Path("long.npy"), 60);
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_THAT(r.output, HasSubstr("--tokens: sequences of 789146 tokens are longer than"));
  EXPECT_THAT(r.output, HasSubstr("max_position_embeddings (512)"));
  // 300 positions where the model has 256.
  std::ofstream(Path("config.json")) << testing::ConfigJson([] {
    ModelConfig c = Shape();
    c.max_position_embeddings = 256;
    return c;
  }());
  fs::copy_file(Safetensors(), Path("model.safetensors"));
  std::vector<int32_t> three(300, 7);
  testing::WriteTokensNpy(Path("300.npy"), {1, 300}, three);
  r = RunLowp("eval --model " + Path("") + " --tokens " + Path("300.npy"), 60);
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_THAT(r.output, HasSubstr("sequences of 300 tokens are longer than"));
  r = RunLowp("eval --model " + Path("") + " --sample 1:300", 60);
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_THAT(r.output, HasSubstr("--sample: sequences of 300 tokens are longer than"));
}

TEST(EvalLargeVocabulary, AVocabularyOf256KRunsInChunks) {
  // Gemma's 256K vocabulary on a tiny model: the logits are taken a chunk
  // of the vocabulary at a time, the results are those of one chunk.
  const ModelConfig c = testing::LlamaShape("vocab", 64, 128, 1, 4, 2, 262144, true);
  const testing::MemoryCheckpoint tensors = testing::RandomTensors(c, 3);
  absl::StatusOr<TensorSet> set = TensorSet::FromViews(tensors.views);
  ASSERT_TRUE(set.ok());
  absl::StatusOr<Checkpoint> model = Checkpoint::Open(c, *std::move(set));
  ASSERT_TRUE(model.ok()) << model.status();
  std::vector<int32_t> tokens(2 * 16);
  for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = static_cast<int32_t>(i * 8191 % 262144);
  EvalCandidate c8;
  c8.label = c8.weights = "*=q8_0";
  c8.weight_rules.push_back({"*", std::shared_ptr<const Scheme>(*ParseScheme("q8_0")), {}});
  EvalRun run;
  run.threads = 2;
  absl::StatusOr<EvalReport> whole = Evaluate(*model, tokens, 16, {c8}, run);
  run.head_rows = 4096;
  absl::StatusOr<EvalReport> chunks = Evaluate(*model, tokens, 16, {c8}, run);
  ASSERT_TRUE(whole.ok()) << whole.status();
  ASSERT_TRUE(chunks.ok()) << chunks.status();
  EXPECT_GT(whole->candidates[0].kl.mean, 0.0);
  EXPECT_NEAR(whole->candidates[0].kl.mean, chunks->candidates[0].kl.mean,
              1e-14 + 1e-12 * whole->candidates[0].kl.mean);
  EXPECT_EQ(whole->candidates[0].top1_agreement, chunks->candidates[0].top1_agreement);
  EXPECT_EQ(whole->candidates[0].weights.total.stats.sum_squared_error,
            chunks->candidates[0].weights.total.stats.sum_squared_error);
}

// Peak memory: a checkpoint whose float32 weights are 1.6 GB (20 layers of
// 61 MB), evaluated with two weight candidates, must stay within a bound that
// holds a few layers, far below the model (label slow).
TEST_F(EvalFaults, MemoryStaysBoundedByALayerNotTheModel) {
#ifdef LOWP_SANITIZE
  GTEST_SKIP() << "AddressSanitizer's shadow memory and quarantine are not the evaluator's";
#endif
  const ModelConfig c = testing::LlamaShape("bound", 1024, 4096, 20, 8, 2, 32000, false);
  ASSERT_TRUE(testing::WriteRandomCheckpoint(Path("big"), c, DType::kBF16, 6).ok());
  const uint64_t file = fs::file_size(Path("big/model.safetensors"));
  const pid_t pid = fork();
  if (pid == 0) {
    const int null = open("/dev/null", O_WRONLY);
    dup2(null, 1);
    dup2(null, 2);
    const std::string cli = CliPath(), model = Path("big"), tokens = Path("tokens.npy");
    execl(cli.c_str(), cli.c_str(), "eval", "--model", model.c_str(), "--tokens", tokens.c_str(),
          "--weights", "int8-channel,q4_0", static_cast<char*>(nullptr));
    _exit(127);
  }
  int status = 0;
  struct rusage usage;
  ASSERT_EQ(wait4(pid, &status, 0, &usage), pid);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
  const uint64_t peak = static_cast<uint64_t>(usage.ru_maxrss) * 1024;
  const uint64_t layer = 4 * (2 * 1024 * 1024 + 2 * 256 * 1024 + 3 * 4096 * 1024);  // float32
  std::printf("peak RSS %.1f MB; file %.1f MB; float32 model %.1f MB; a layer %.1f MB\n",
              peak / 1e6, file / 1e6, 2.0 * file / 1e6, layer / 1e6);
  EXPECT_LT(peak, file / 2);
  EXPECT_LT(peak, 5 * layer);
}

}  // namespace
}  // namespace lowp
