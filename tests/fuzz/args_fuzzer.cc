// libFuzzer target: the argument parsing of every `lowp` command (cli/),
// run as `lowp <command> WORDS...` would run it, on a fixed set of small files.
//
// Input: byte 0 picks the command (its value modulo the number of commands,
// in the order of kCommands below); the other bytes are the words of argv,
// separated by NUL bytes (nothing after byte 0: no words; "a\0" is the words
// "a" and ""). Inputs of more than kMaxWords words or with a word longer than
// kMaxWordBytes are skipped. make_seed_corpus.py writes inputs this way.
//
// Confinement, so that a run is safe and the same input always runs the same:
// at the first input the harness makes a fresh directory (mkdtemp in $TMPDIR
// or /tmp) and writes the fixture files there (Fixtures() below); each input
// runs with that directory as the working directory, every '/' of a word made
// '_' (but that of "B/s", as in a bandwidth of 4TB/s) and every ".." made
// "._", so that a word can name no file outside it. Afterwards every file the
// command left there is removed and every fixture it replaced or changed is
// written again; the directory goes at exit (a crash leaves it). LOWP_DATA_DIR
// points there too: plan's bundled checkpoint is the small fixture
// stories260K.f32.safetensors (a plan takes under 0.1 s with the sanitizers).
// While a command runs, the C streams stdout and stderr are memory streams;
// libFuzzer and the sanitizers keep writing to the real ones. No command
// reads stdin. A relative -artifact_prefix puts crash inputs in the directory.
//
// Invariants: the exit code is 0 or 1 (2 for usage); an exit code other than
// 0 comes with a "lowp: <message>" line on stderr; a successful output that
// starts like JSON ('{' or '[', as --json prints) is one valid JSON document.
// Anything else wrong is a crash, a leak or undefined behaviour the sanitizers
// report, or a hang the fuzzer's -timeout reports.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <system_error>
#include <vector>

#include "absl/strings/str_cat.h"
#include "io/input_files.h"
#include "absl/strings/string_view.h"
#include "cli/commands.h"
#include "nlohmann/json.hpp"
#include "tests/fuzz/fuzz_check.h"

namespace lowp::fuzz {
namespace {

constexpr size_t kMaxWords = 40;
constexpr size_t kMaxWordBytes = 256;
// What a command's output is kept of (the rest is counted, not kept).
constexpr size_t kMaxOutputBytes = size_t{4} << 20;

struct Command {
  const char* name;
  int (*run)(const std::vector<std::string>&);
};
constexpr Command kCommands[] = {
    {"formats", cli::FormatsCommand},   {"convert", cli::ConvertCommand},
    {"schemes", cli::SchemesCommand},   {"quant-error", cli::QuantErrorCommand},
    {"quantize", cli::QuantizeCommand}, {"range", cli::RangeCommand},
    {"size", cli::SizeCommand},         {"devices", cli::DevicesCommand},
    {"plan", cli::PlanCommand},
};
constexpr size_t kCommandCount = sizeof(kCommands) / sizeof(kCommands[0]);

// ---- The fixture files.

// float32 values of every sign and a wide range of magnitudes, one zero.
float Value(size_t i) {
  const float sign = i % 3 == 1 ? -1.0f : 1.0f;
  return i == 0 ? 0.0f
                : sign * (1.0f + static_cast<float>(i % 7) / 8) *
                      static_cast<float>(1 << (i % 13)) / 64;
}

void AppendF32(std::string& out, float v) {
  char b[4];
  std::memcpy(b, &v, 4);
  out.append(b, 4);
}

struct FixtureTensor {
  const char* name;
  const char* dtype;
  std::vector<int64_t> shape;
};

// A safetensors file of a tiny llama-like checkpoint: linear weights (F32,
// BF16), an F16 embedding, a 1-D norm and an integer scalar.
std::string Checkpoint() {
  const FixtureTensor tensors[] = {
      {"layers.0.attention.wq.weight", "F32", {4, 64}},
      {"layers.0.feed_forward.w1.weight", "BF16", {2, 48}},
      {"tok_embeddings.weight", "F16", {8, 16}},
      {"norm.weight", "F32", {16}},
      {"step", "I64", {}},
  };
  std::string header = "{\"__metadata__\":{\"format\":\"pt\"}";
  std::string data;
  for (const FixtureTensor& t : tensors) {
    int64_t n = 1;
    for (int64_t d : t.shape) n *= d;
    const size_t begin = data.size();
    for (int64_t i = 0; i < n; ++i) {
      const float v = Value(static_cast<size_t>(i));
      if (absl::string_view(t.dtype) == "F32") {
        AppendF32(data, v);
      } else if (absl::string_view(t.dtype) == "BF16") {
        uint32_t bits;
        std::memcpy(&bits, &v, 4);
        data.push_back(static_cast<char>(bits >> 16));
        data.push_back(static_cast<char>(bits >> 24));
      } else if (absl::string_view(t.dtype) == "F16") {
        // Halves in [1, 2) of both signs: 0x3C00 plus a 10-bit fraction.
        const uint32_t code =
            0x3C00u | ((static_cast<uint32_t>(i) * 37u) & 0x3FFu) | (i % 2 == 1 ? 0x8000u : 0u);
        data.push_back(static_cast<char>(code));
        data.push_back(static_cast<char>(code >> 8));
      } else {  // I64
        const int64_t step = 1000;
        data.append(reinterpret_cast<const char*>(&step), 8);
      }
    }
    std::string shape;
    for (int64_t d : t.shape) absl::StrAppend(&shape, shape.empty() ? "" : ",", d);
    absl::StrAppend(&header, ",\"", t.name, "\":{\"dtype\":\"", t.dtype, "\",\"shape\":[", shape,
                    "],\"data_offsets\":[", begin, ",", data.size(), "]}");
  }
  header += "}";
  header.append((8 - header.size() % 8) % 8, ' ');
  std::string file(8, '\0');
  const uint64_t length = header.size();
  std::memcpy(file.data(), &length, 8);
  return file + header + data;
}

std::string Index() {
  return "{\"metadata\":{\"total_size\":1824},\"weight_map\":{"
         "\"layers.0.attention.wq.weight\":\"a.safetensors\","
         "\"layers.0.feed_forward.w1.weight\":\"a.safetensors\","
         "\"tok_embeddings.weight\":\"a.safetensors\","
         "\"norm.weight\":\"a.safetensors\",\"step\":\"a.safetensors\"}}";
}

// A version 1 .npy of float32 [3, 40].
std::string Npy() {
  std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': (3, 40), }";
  header.append((64 - (10 + header.size() + 1) % 64) % 64, ' ');
  header += '\n';
  std::string file = "\x93NUMPY\x01";
  file += '\0';
  file += static_cast<char>(header.size() & 0xFF);
  file += static_cast<char>(header.size() >> 8);
  file += header;
  for (size_t i = 0; i < 120; ++i) AppendF32(file, Value(i));
  return file;
}

std::string Config() {
  return "{\"model_type\":\"llama\",\"hidden_size\":64,\"intermediate_size\":128,"
         "\"num_hidden_layers\":2,\"num_attention_heads\":4,\"num_key_value_heads\":2,"
         "\"vocab_size\":100,\"max_position_embeddings\":256}";
}

// 64 codes for convert: every byte pattern of a stride through 0..255.
std::string Codes() {
  std::string codes;
  for (int i = 0; i < 64; ++i) codes.push_back(static_cast<char>(i * 53 + 7));
  return codes;
}

struct Fixture {
  std::string name;
  std::string bytes;
  struct stat written = {};
};

std::vector<Fixture> Fixtures() {
  const std::string checkpoint = Checkpoint();
  return {{"a.safetensors", checkpoint},
          {"c.safetensors.index.json", Index()},
          {"b.npy", Npy()},
          // A tensor named after its file's stem, not UTF-8 (nor JSON).
          {"t\xFF.npy", Npy()},
          {"config.json", Config()},
          {"codes.bin", Codes()},
          {"stories260K.f32.safetensors", checkpoint}};
}

// ---- The scratch directory and the output streams.

struct Output {
  std::string text;
  size_t bytes = 0;  // written, kept or not
};

ssize_t WriteOutput(void* cookie, const char* buf, size_t size) {
  Output& out = *static_cast<Output*>(cookie);
  out.bytes += size;
  if (out.text.size() < kMaxOutputBytes) {
    out.text.append(buf, std::min(size, kMaxOutputBytes - out.text.size()));
  }
  return static_cast<ssize_t>(size);
}

FILE* OpenOutput(Output* out) {
  cookie_io_functions_t io = {};
  io.write = WriteOutput;
  FILE* f = fopencookie(out, "w", io);
  Check(f != nullptr, "fopencookie failed");
  return f;
}

class Scratch {
 public:
  Scratch() {
    const char* tmp = std::getenv("TMPDIR");
    std::string templ =
        absl::StrCat(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp", "/lowp-fuzz-args-XXXXXX");
    Check(mkdtemp(templ.data()) != nullptr, "mkdtemp failed");
    dir_ = templ;
    dir_fd_ = open(dir_.c_str(), O_RDONLY | O_DIRECTORY);
    Check(dir_fd_ >= 0, "cannot open the scratch directory");
    Check(setenv("LOWP_DATA_DIR", dir_.c_str(), 1) == 0, "setenv failed");
    fixtures_ = Fixtures();
    for (Fixture& f : fixtures_) Write(f);
    out_ = OpenOutput(&stdout_);
    err_ = OpenOutput(&stderr_);
#ifndef LOWP_FUZZ_REPLAY
    std::fprintf(stderr, "args_fuzzer: the commands run in %s\n", dir_.c_str());
#endif
  }

  // Runs `command` inside the directory with stdout and stderr captured;
  // then puts the directory back as it was.
  int Run(const Command& command, const std::vector<std::string>& argv) {
    const int cwd = open(".", O_RDONLY | O_DIRECTORY);
    Check(cwd >= 0 && fchdir(dir_fd_) == 0, "cannot enter the scratch directory");
    stdout_ = {};
    stderr_ = {};
    std::fflush(stdout);
    std::fflush(stderr);
    FILE* const real_out = stdout;
    FILE* const real_err = stderr;
    stdout = out_;
    stderr = err_;
    int code;
    {
      InputScope scope;  // one run, as one process: its inputs only
      code = command.run(argv);
    }
    std::fflush(out_);
    std::fflush(err_);
    stdout = real_out;
    stderr = real_err;
    Check(fchdir(cwd) == 0, "cannot leave the scratch directory");
    close(cwd);
    Restore();
    return code;
  }

  // Removes the directory (at exit; a crash leaves it for inspection).
  void Remove() {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }

  const Output& out() const { return stdout_; }
  const Output& err() const { return stderr_; }

 private:
  void Write(Fixture& f) {
    const std::string path = dir_ + "/" + f.name;
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
    const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    Check(fd >= 0, "cannot write a fixture");
    Check(write(fd, f.bytes.data(), f.bytes.size()) == static_cast<ssize_t>(f.bytes.size()),
          "short write of a fixture");
    close(fd);
    Check(stat(path.c_str(), &f.written) == 0, "cannot stat a fixture");
  }

  static bool Same(const struct stat& a, const struct stat& b) {
    return a.st_ino == b.st_ino && a.st_size == b.st_size && a.st_mode == b.st_mode &&
           a.st_mtim.tv_sec == b.st_mtim.tv_sec && a.st_mtim.tv_nsec == b.st_mtim.tv_nsec;
  }

  // Removes what is not a fixture, writes again the fixtures that changed.
  void Restore() {
    std::error_code ec;
    for (const auto& entry : std::filesystem::directory_iterator(dir_, ec)) {
      const std::string name = entry.path().filename().string();
      bool fixture = false;
      for (const Fixture& f : fixtures_) fixture = fixture || f.name == name;
      if (!fixture) std::filesystem::remove_all(entry.path(), ec);
    }
    for (Fixture& f : fixtures_) {
      struct stat now;
      if (stat((dir_ + "/" + f.name).c_str(), &now) != 0 || !Same(now, f.written)) Write(f);
    }
  }

  std::string dir_;
  int dir_fd_ = -1;
  std::vector<Fixture> fixtures_;
  Output stdout_, stderr_;
  FILE* out_ = nullptr;
  FILE* err_ = nullptr;
};

Scratch& TheScratch() {
  static Scratch* const scratch = [] {
    auto* s = new Scratch;
    std::atexit([] { TheScratch().Remove(); });
    return s;
  }();
  return *scratch;
}

// The command and words of an input; false if it is to be skipped.
bool Decode(const uint8_t* data, size_t size, const Command** command,
            std::vector<std::string>* argv) {
  if (size == 0) return false;
  *command = &kCommands[data[0] % kCommandCount];
  argv->clear();
  if (size == 1) return true;
  const absl::string_view rest(reinterpret_cast<const char*>(data) + 1, size - 1);
  size_t start = 0;
  while (true) {
    const size_t end = std::min(rest.find('\0', start), rest.size());
    if (argv->size() == kMaxWords || end - start > kMaxWordBytes) return false;
    std::string word(rest.substr(start, end - start));
    for (size_t i = 0; i < word.size(); ++i) {
      const bool per_second = i > 0 && word[i - 1] == 'B' && i + 1 < word.size() &&
                              word[i + 1] == 's';  // "4TB/s": never a path's first '/'
      if (word[i] == '/' && !per_second) word[i] = '_';
      if (i > 0 && word[i - 1] == '.' && word[i] == '.') word[i] = '_';
    }
    argv->push_back(std::move(word));
    if (end == rest.size()) return true;
    start = end + 1;
  }
}

}  // namespace

// The exit code of the command an input runs; -1 for a skipped input. With
// LOWP_FUZZ_ARGS_SHOW set, shows the command line, the exit code and what
// the command printed (to reproduce a finding: ./args_fuzzer CRASH_FILE).
int ArgsExitCode(const uint8_t* data, size_t size) {
  const Command* command = nullptr;
  std::vector<std::string> argv;
  if (!Decode(data, size, &command, &argv)) return -1;
  Scratch& scratch = TheScratch();
  const int code = scratch.Run(*command, argv);
  if (std::getenv("LOWP_FUZZ_ARGS_SHOW") != nullptr) {
    std::string line = absl::StrCat("lowp ", command->name);
    for (const std::string& word : argv) absl::StrAppend(&line, " '", word, "'");
    std::fprintf(stderr, "%s\nexit %d\n--- stdout (%zu bytes):\n%.4000s\n--- stderr:\n%.4000s\n",
                 line.c_str(), code, scratch.out().bytes, scratch.out().text.c_str(),
                 scratch.err().text.c_str());
  }
  return code;
}

int FuzzArgs(const uint8_t* data, size_t size) {
  const int code = ArgsExitCode(data, size);
  if (code == -1) return 0;
  const Scratch& s = TheScratch();
  Check(code == 0 || code == 1 || code == 2, "exit code is not 0, 1 or 2");
  if (code != 0) {
    // Fail's "lowp: <message>": a message that is not empty (it may start
    // with a newline, a word it quotes).
    const size_t at = s.err().text.find("lowp: ");
    Check(at != std::string::npos &&
              s.err().text.find_first_not_of(" \t\r\n", at + 6) != std::string::npos,
          "an error exit without a \"lowp: <message>\" line on stderr");
  } else if (s.out().bytes == s.out().text.size() && !s.out().text.empty() &&
             (s.out().text[0] == '{' || s.out().text[0] == '[')) {
    Check(nlohmann::json::accept(s.out().text), "a JSON output that does not parse");
  }
  return 0;
}

}  // namespace lowp::fuzz

#ifndef LOWP_FUZZ_REPLAY
extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return lowp::fuzz::FuzzArgs(data, size);
}
#endif
