// The bad-input catalogue: the `lowp` command as a careless or hostile user
// runs it. One case per class of bad input (malformed files, FIFOs and
// devices, outputs that are devices, directories or inputs, signals during a
// write, hostile names, absurd numbers, repeated options), each asserting the
// exit status, that the message names the problem, that nothing hangs
// (every run is under `timeout`) and that no file is left behind.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "formats/format.h"
#include "formats/packing.h"
#include "formats/reference.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/cli_run.h"

namespace lowp {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ::testing::Not;

class BadInput : public ScratchDir {
 protected:
  // A safetensors file from its header text and data.
  void WriteSafetensors(const std::string& name, const std::string& header,
                        const std::string& data) const {
    std::string bytes(8, '\0');
    for (int i = 0; i < 8; ++i) bytes[i] = static_cast<char>(uint64_t{header.size()} >> (8 * i));
    Write(name, bytes + header + data);
  }
  // One F32 tensor per name, rows x cols of value v.
  void WriteF32(const std::string& name, const std::vector<std::string>& tensors, int rows,
                int cols, float v) const {
    nlohmann::ordered_json header;
    std::string data;
    for (const std::string& t : tensors) {
      const uint64_t begin = data.size();
      for (int i = 0; i < rows * cols; ++i) {
        char b[4];
        std::memcpy(b, &v, 4);
        data.append(b, 4);
      }
      header[t] = {
          {"dtype", "F32"}, {"shape", {rows, cols}}, {"data_offsets", {begin, data.size()}}};
    }
    WriteSafetensors(name, header.dump(), data);
  }
};

// Every run under a time limit: a hang fails as exit 124.
Result RunLimited(const std::string& args, const std::string& environment = "") {
  return RunLowp(args, 30, environment);
}

// ---------------------------------------------------------------- inputs

TEST_F(BadInput, NonRegularInputsAreRefusedBeforeAnythingBlocks) {
  ASSERT_EQ(mkfifo(Path("pipe.safetensors").c_str(), 0600), 0);
  ASSERT_EQ(mkfifo(Path("pipe.npy").c_str(), 0600), 0);
  ASSERT_EQ(mkfifo(Path("pipe.bin").c_str(), 0600), 0);
  ASSERT_EQ(mkfifo(Path("config.json").c_str(), 0600), 0);
  ASSERT_EQ(mkfifo(Path("shard.safetensors").c_str(), 0600), 0);
  Write("m.safetensors.index.json", R"({"weight_map": {"w": "shard.safetensors"}})");
  fs::create_directory(Path("dir.safetensors"));
  fs::create_symlink("/dev/zero", Path("zero.safetensors"));
  const std::string fifo = "is a named pipe (FIFO), not a regular file";
  struct Case {
    std::string args, message;
  } const cases[] = {
      {"quant-error " + Path("pipe.safetensors") + " --scheme bf16", fifo},
      {"quant-error " + Path("pipe.npy") + " --scheme bf16", fifo},
      {"quantize " + Path("pipe.safetensors") + " --scheme bf16 --out " + Path("o.safetensors"),
       fifo},
      {"range " + Path("pipe.safetensors"), fifo},
      {"plan --model llama-3.1-8b --mode inference --tensors " + Path("pipe.safetensors"), fifo},
      {"quant-error " + Path("m.safetensors.index.json") + " --scheme bf16", fifo},
      {"convert --from fp32 --to bf16 " + Path("pipe.bin") + " " + Path("o.bin"), fifo},
      {"size --model " + Path("config.json") + " --mode inference", "not a regular file"},
      {"quant-error " + Path("zero.safetensors") + " --scheme bf16", "is a character device"},
      {"convert --from fp32 --to bf16 /dev/zero " + Path("o.bin"), "is a character device"},
      {"quant-error " + Path("dir.safetensors") + " --scheme bf16", "is a directory"},
  };
  for (const Case& c : cases) {
    const Result r = RunLimited(c.args);
    EXPECT_EQ(r.exit_code, 1) << c.args << "\n" << r.output;  // 124: it hung
    EXPECT_THAT(r.output, HasSubstr(c.message)) << c.args;
  }
  EXPECT_EQ(Files(), (std::vector<std::string>{"config.json", "dir.safetensors",
                                               "m.safetensors.index.json", "pipe.bin", "pipe.npy",
                                               "pipe.safetensors", "shard.safetensors",
                                               "zero.safetensors"}));
}

TEST_F(BadInput, MalformedFilesNameTheFileAndTheFault) {
  const std::string f32 = R"({"dtype":"F32","shape":[1],"data_offsets":[0,4]})";
  WriteSafetensors("short_header.safetensors", "{", "");
  Write("tiny.safetensors", "abc");
  Write("beyond.safetensors", std::string("\xff\x00\x00\x00\x00\x00\x00\x00{}", 10));
  Write("huge_header.safetensors", std::string("\xff\xff\xff\xff\xff\xff\xff\x7f", 8));
  WriteSafetensors("not_object.safetensors", "[1]", "");
  WriteSafetensors("duplicate.safetensors", R"({"a":)" + f32 + R"(,"a":)" + f32 + "}",
                   std::string(4, '\0'));
  WriteSafetensors("dtype.safetensors",
                   R"({"a":{"dtype":"F99","shape":[1],"data_offsets":[0,4]}})",
                   std::string(4, '\0'));
  WriteSafetensors("out_of_bounds.safetensors",
                   R"({"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})",
                   std::string(4, '\0'));
  WriteSafetensors("shape.safetensors", R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,4]}})",
                   std::string(4, '\0'));
  WriteSafetensors("gap.safetensors", R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
                   std::string(8, '\0'));
  WriteSafetensors("overflow.safetensors",
                   R"({"a":{"dtype":"F32","shape":[4294967296,4294967296,4294967296],)"
                   R"("data_offsets":[0,4]}})",
                   std::string(4, '\0'));
  WriteSafetensors("empty.safetensors", "{}", "");
  Write("bad.npy", "\x93NUMPY\x01\x00\x10\x00{'descr': '<f4'}");
  Write("empty.safetensors.index.json", R"({"weight_map": {}})");
  Write("escape.safetensors.index.json", R"({"weight_map": {"w": "../x.safetensors"}})");
  Write("nul.safetensors.index.json", R"({"weight_map": {"w": "a\u0000b.safetensors"}})");
  Write("missing.safetensors.index.json", R"({"weight_map": {"w": "m.safetensors"}})");
  Write("config.json", R"({"model_type": "llama", "hidden_size": -1})");
  struct Case {
    std::string file, message;
  } const cases[] = {
      {"short_header.safetensors", "header"},
      {"tiny.safetensors", "too short for a safetensors header length"},
      {"beyond.safetensors", "beyond the end of the file"},
      {"huge_header.safetensors", "above the limit"},
      {"not_object.safetensors", "not a JSON object"},
      {"duplicate.safetensors", "duplicate"},
      {"dtype.safetensors", "F99"},
      {"out_of_bounds.safetensors", "out of bounds"},
      {"shape.safetensors", "hold 4 bytes"},
      {"gap.safetensors", "gap"},
      {"overflow.safetensors", "overflow"},
      {"empty.safetensors", "no tensors in " + Path("empty.safetensors")},
      {"bad.npy", "bad.npy"},
      {"empty.safetensors.index.json", "no tensors in " + Path("empty.safetensors.index.json")},
      {"escape.safetensors.index.json", "not a plain file name"},
      {"nul.safetensors.index.json", "a\\x00b.safetensors\" is not a plain file name"},
      {"missing.safetensors.index.json", "m.safetensors"},
  };
  for (const Case& c : cases) {
    const Result r = RunLimited("quant-error " + Path(c.file) + " --scheme bf16");
    EXPECT_EQ(r.exit_code, 1) << c.file << "\n" << r.output;
    EXPECT_THAT(r.output, HasSubstr(c.message)) << c.file;
    if (c.file != "empty.safetensors" && c.file != "empty.safetensors.index.json") {
      EXPECT_THAT(r.output, HasSubstr(c.file.substr(0, c.file.find('.')))) << c.file;
    }
  }
  const Result config = RunLimited("size --model " + Path("config.json") + " --mode inference");
  EXPECT_EQ(config.exit_code, 1);
  EXPECT_THAT(config.output, HasSubstr("hidden_size"));
  // A shard name holding ".." inside a plain name is a plain name.
  WriteF32("m..safetensors", {"w"}, 1, 4, 1.0f);
  Write("dots.safetensors.index.json", R"({"weight_map": {"w": "m..safetensors"}})");
  const Result dots = RunLimited("quant-error " + Path("dots.safetensors.index.json") +
                                 " --scheme bf16 --json");
  EXPECT_EQ(dots.exit_code, 0) << dots.output;
}

// A hostile tensor name reaches no terminal raw; the machine formats keep it.
TEST_F(BadInput, ControlCharactersInNamesAreEscapedInTables) {
  const std::string evil = "evil\x1b]0;pwned\x07\x1b[2J\xc2\x9b" "31m";
  nlohmann::ordered_json header;
  header[evil] = {{"dtype", "F32"}, {"shape", {1, 4}}, {"data_offsets", {0, 16}}};
  WriteSafetensors("evil.safetensors", header.dump(), std::string(16, '\x01'));
  for (const std::string& command :
       {"quant-error " + Path("evil.safetensors") + " --scheme bf16",
        "range " + Path("evil.safetensors"),
        "plan --model llama-3.1-8b --mode inference --tensors " + Path("evil.safetensors"),
        "quant-error " + Path("evil.safetensors") + " --scheme bf16 --tensors nothing"}) {
    const Result r = RunLimited(command);
    EXPECT_THAT(r.output, Not(HasSubstr("\x1b"))) << command;
    EXPECT_THAT(r.output, Not(HasSubstr("\x07"))) << command;
    EXPECT_THAT(r.output, Not(HasSubstr("\xc2\x9b"))) << command;
  }
  const Result table = RunLimited("quant-error " + Path("evil.safetensors") + " --scheme bf16");
  EXPECT_THAT(table.output, HasSubstr("evil\\x1b]0;pwned\\x07\\x1b[2J\\xc2\\x9b31m"));
  const Result json =
      RunLimited("quant-error " + Path("evil.safetensors") + " --scheme bf16 --json");
  ASSERT_EQ(json.exit_code, 0);
  EXPECT_EQ(nlohmann::json::parse(json.output)["results"][0]["tensor"], evil);
}

// ---------------------------------------------------------------- outputs

TEST_F(BadInput, OutputsThatAreDevicesAreWrittenInPlaceNeverReplaced) {
  Write("in.f32", std::string(4096, '\0'));
  WriteF32("m.safetensors", {"w"}, 4, 8, 0.5f);
  // The null and full devices made again in the scratch directory (as root),
  // so that a regression replaces these, never the system's /dev/null.
  const bool root = mknod(Path("null").c_str(), S_IFCHR | 0666, makedev(1, 3)) == 0 &&
                    mknod(Path("full").c_str(), S_IFCHR | 0666, makedev(1, 7)) == 0;
  const std::string null_device = root ? Path("null") : "/dev/null";
  const Result null =
      RunLimited("convert --from fp32 --to bf16 " + Path("in.f32") + " " + null_device);
  EXPECT_EQ(null.exit_code, 0) << null.output;
  if (root) {
    const Result full =
        RunLimited("quantize " + Path("m.safetensors") + " --scheme int8 --out " + Path("full"));
    EXPECT_EQ(full.exit_code, 1);
    EXPECT_THAT(full.output, HasSubstr("output " + Path("full")));
    EXPECT_THAT(full.output, HasSubstr("No space left on device"));
    for (const char* device : {"null", "full"}) {
      struct stat st;
      ASSERT_EQ(stat(Path(device).c_str(), &st), 0);
      EXPECT_TRUE(S_ISCHR(st.st_mode)) << device << " was replaced";
    }
    fs::remove(Path("null"));
    fs::remove(Path("full"));
  }
  // A FIFO with a reader gets the bytes.
  ASSERT_EQ(mkfifo(Path("out.pipe").c_str(), 0600), 0);
  std::string got;
  std::thread reader([&] {
    // Without blocking: if the FIFO is replaced instead of written, no
    // writer ever comes and the reader gives up after 20 s.
    const int fd = open(Path("out.pipe").c_str(), O_RDONLY | O_NONBLOCK);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    for (bool done = fd < 0; !done && std::chrono::steady_clock::now() < deadline;) {
      pollfd p{fd, POLLIN, 0};
      if (poll(&p, 1, 100) <= 0) continue;
      char buffer[4096];
      const ssize_t n = read(fd, buffer, sizeof(buffer));
      if (n > 0) got.append(buffer, static_cast<size_t>(n));
      done = n == 0 && (p.revents & POLLHUP) != 0;  // the writer came and went
    }
    if (fd >= 0) close(fd);
  });
  const Result fifo =
      RunLimited("convert --from fp32 --to bf16 " + Path("in.f32") + " " + Path("out.pipe"));
  reader.join();
  EXPECT_EQ(fifo.exit_code, 0) << fifo.output;
  EXPECT_EQ(got, std::string(2048, '\0'));
  struct stat st;
  ASSERT_EQ(stat(Path("out.pipe").c_str(), &st), 0);
  EXPECT_TRUE(S_ISFIFO(st.st_mode));
  // A directory is an error; an input is never replaced by the report.
  fs::create_directory(Path("dir"));
  const Result dir =
      RunLimited("convert --from fp32 --to bf16 " + Path("in.f32") + " " + Path("dir"));
  EXPECT_EQ(dir.exit_code, 1);
  EXPECT_THAT(dir.output, HasSubstr("is a directory"));
  const std::string before = Read("m.safetensors");
  const Result html =
      RunLimited("plan --model llama-3.1-8b --mode inference --select w --tensors " +
                 Path("m.safetensors") + " --html " + Path("m.safetensors"));
  EXPECT_EQ(html.exit_code, 1);
  EXPECT_THAT(html.output,
              HasSubstr("--html " + Path("m.safetensors") + ": is an input of this run"));
  EXPECT_EQ(Read("m.safetensors"), before);
  // Nor the bundled checkpoint plan measures by default (a copy of it here,
  // through LOWP_DATA_DIR, so that a regression replaces the copy).
  fs::create_directory(Path("data"));
  fs::copy_file(LOWP_TEST_DATA_DIR "/stories260K/stories260K.f32.safetensors",
                Path("data/stories260K.f32.safetensors"));
  const Result default_input =
      RunLimited("plan --model llama-3.1-8b --mode inference --html " +
                 Path("data/stories260K.f32.safetensors"),
                 "LOWP_DATA_DIR=" + Path("data"));
  EXPECT_EQ(default_input.exit_code, 1);
  EXPECT_THAT(default_input.output, HasSubstr("is an input of this run"));
  EXPECT_EQ(fs::file_size(Path("data/stories260K.f32.safetensors")),
            fs::file_size(LOWP_TEST_DATA_DIR "/stories260K/stories260K.f32.safetensors"));
  fs::remove_all(Path("data"));
  EXPECT_EQ(Files(), (std::vector<std::string>{"dir", "in.f32", "m.safetensors", "out.pipe"}));
}

TEST_F(BadInput, OutputsGetTheUmasksModeOrKeepTheirOwn) {
  Write("in.f32", std::string(64, '\0'));
  WriteF32("m.safetensors", {"model.layers.0.mlp.down_proj.weight"}, 2, 4, 0.25f);
  const mode_t old = umask(022);
  auto mode = [&](const std::string& name) {
    struct stat st;
    EXPECT_EQ(stat(Path(name).c_str(), &st), 0) << name;
    return st.st_mode & 07777;
  };
  EXPECT_EQ(RunLimited("convert --from fp32 --to bf16 " + Path("in.f32") + " " + Path("a.bf16"))
                .exit_code,
            0);
  EXPECT_EQ(mode("a.bf16"), 0644u);
  EXPECT_EQ(RunLimited("quantize " + Path("m.safetensors") + " --scheme int8 --out " +
                       Path("q.safetensors"))
                .exit_code,
            0);
  EXPECT_EQ(mode("q.safetensors"), 0644u);
  EXPECT_EQ(RunLimited("plan --model llama-3.1-8b --mode inference --tensors " +
                       Path("m.safetensors") + " --html " + Path("p.html"))
                .exit_code,
            0);
  EXPECT_EQ(mode("p.html"), 0644u);
  // An existing file keeps its mode.
  chmod(Path("a.bf16").c_str(), 0640);
  EXPECT_EQ(RunLimited("convert --from fp32 --to bf16 " + Path("in.f32") + " " + Path("a.bf16"))
                .exit_code,
            0);
  EXPECT_EQ(mode("a.bf16"), 0640u);
  // An input is never an output, not even converted to itself.
  const Result in_place =
      RunLimited("convert --from fp32 --to fp32 " + Path("in.f32") + " " + Path("in.f32"));
  EXPECT_EQ(in_place.exit_code, 1);
  EXPECT_THAT(in_place.output, HasSubstr(Path("in.f32") + ": is an input of this run"));
  EXPECT_EQ(Read("in.f32"), std::string(64, '\0'));
  umask(old);
  EXPECT_EQ(Files(), (std::vector<std::string>{"a.bf16", "in.f32", "m.safetensors", "p.html",
                                               "q.safetensors"}));
}

// Starts `lowp ARGS...` (no shell) and returns its pid.
pid_t Spawn(const std::vector<std::string>& args) {
  const pid_t pid = fork();
  if (pid == 0) {
    const int null = open("/dev/null", O_WRONLY);
    dup2(null, 1);
    dup2(null, 2);
    const std::string cli = CliPath();
    std::vector<char*> argv = {const_cast<char*>(cli.c_str())};
    for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    execv(cli.c_str(), argv.data());
    _exit(127);
  }
  return pid;
}

TEST_F(BadInput, SignalsDuringAWriteLeaveNoTemporaryAndTheOldOutput) {
  // 64 MiB of float32: long enough to be caught in the middle.
  {
    std::ofstream out(Path("big.f32"), std::ios::binary);
    const std::string block(1 << 20, '\x3f');
    for (int i = 0; i < 64; ++i) out << block;
  }
  WriteF32("m.safetensors", {"a", "b", "c", "d"}, 2048, 2048, 0.125f);
  const std::vector<std::vector<std::string>> commands = {
      {"convert", "--from", "fp32", "--to", "fp8_e4m3fn", "--rounding", "stochastic",
       Path("big.f32"), Path("out")},
      {"quantize", Path("m.safetensors"), "--scheme", "nf4", "--threads", "1", "--out",
       Path("out")}};
  for (const auto& command : commands) {
    for (int sig : {SIGINT, SIGTERM, SIGHUP}) {
      Write("out", "the old output");
      const pid_t pid = Spawn(command);
      // Wait for its temporary to appear, then signal.
      bool seen = false;
      for (int i = 0; i < 20000 && !seen; ++i) {
        for (const auto& entry : fs::directory_iterator(dir_)) {
          seen = seen || entry.path().filename().string().starts_with("out.lowp-");
        }
        if (!seen) std::this_thread::sleep_for(std::chrono::microseconds(200));
      }
      EXPECT_TRUE(seen) << command[0] << ": no temporary seen";
      kill(pid, sig);
      int status = 0;
      ASSERT_EQ(waitpid(pid, &status, 0), pid);
      ASSERT_TRUE(WIFEXITED(status)) << command[0] << " signal " << sig;
      EXPECT_EQ(WEXITSTATUS(status), 128 + sig) << command[0];
      EXPECT_EQ(Read("out"), "the old output") << command[0] << " signal " << sig;
      EXPECT_EQ(Files(), (std::vector<std::string>{"big.f32", "m.safetensors", "out"}))
          << command[0] << " signal " << sig;
    }
  }
}

// A GGUF model file and a compressed-tensors model directory interrupted
// while GPTQ calibrates their layers: no temporary, no output, the exit
// status the signal's.
TEST_F(BadInput, SignalsDuringAModelWriteLeaveNothing) {
  const std::vector<std::pair<std::string, std::vector<std::string>>> outputs = {
      {"m.gguf", {"--weights", "q4_K:gptq"}},
      {"m-ct", {"--weights", "int4-g128:gptq", "--format", "compressed-tensors"}}};
  for (const auto& [out, options] : outputs) {
    for (int sig : {SIGINT, SIGTERM}) {
      std::vector<std::string> command = {"quantize", "--model",
                                          LOWP_TEST_DATA_DIR "/stories3M-hf", "--calib-chunks",
                                          "8", "--threads", "1", "--out", Path(out)};
      command.insert(command.end(), options.begin(), options.end());
      const pid_t pid = Spawn(command);
      bool seen = false;
      for (int i = 0; i < 50000 && !seen; ++i) {
        for (const auto& entry : fs::directory_iterator(dir_)) {
          seen = seen || entry.path().filename().string().starts_with(out + ".lowp-");
        }
        if (!seen) std::this_thread::sleep_for(std::chrono::microseconds(200));
      }
      EXPECT_TRUE(seen) << out << ": no temporary seen";
      kill(pid, sig);
      int status = 0;
      ASSERT_EQ(waitpid(pid, &status, 0), pid);
      ASSERT_TRUE(WIFEXITED(status)) << out << " signal " << sig;
      EXPECT_EQ(WEXITSTATUS(status), 128 + sig);
      EXPECT_EQ(Files(), std::vector<std::string>{}) << out << " signal " << sig;
    }
  }
}

// ---------------------------------------------------------------- numbers

TEST_F(BadInput, ConvertAtEveryChunkBoundaryEqualsTheReference) {
  // Each route (float32, fp16/bf16, decoded first, element by element
  // under daz) around the 2^21-element chunk; the first case overflowed its
  // buffer from 2^21 + 1 codes.
  struct Route {
    std::string from, to, options;
  } const routes[] = {{"fp8_e4m3fn", "bf16", ""},
                      {"fp4_e2m1fn", "fp16", ""},
                      {"int8", "fp8_e5m2", ""},
                      {"fp6_e3m2fn", "bf16", "--subnormals daz"},
                      {"bf16", "fp8_e4m3fn", ""},
                      {"fp32", "int4", ""}};
  const size_t kChunk = size_t{1} << 21;
  for (const Route& route : routes) {
    const Format from = *FindFormat(route.from), to = *FindFormat(route.to);
    ConvertOptions options;
    if (!route.options.empty()) options.subnormals = Subnormals::kInputsAreZero;
    for (size_t n : {kChunk - 1, kChunk, kChunk + 1, 3 * kChunk / 2 + 1}) {
      // A file of 4-bit codes holds an even count (a zero high nibble last).
      if (from.storage_bits() == 4) n += n % 2;
      // Codes spread over the format's width.
      std::vector<uint32_t> codes(n);
      for (size_t i = 0; i < n; ++i) {
        codes[i] = static_cast<uint32_t>(i * 2654435761u) & from.code_mask();
      }
      std::vector<uint8_t> bytes;
      PackCodes(from, codes, &bytes);
      Write("in", std::string(bytes.begin(), bytes.end()));
      const Result r = RunLimited(absl::StrCat("convert --from ", route.from, " --to ", route.to,
                                               " ", route.options, " ", Path("in"), " ",
                                               Path("out")));
      ASSERT_EQ(r.exit_code, 0) << route.from << " " << n << "\n" << r.output;
      std::vector<uint32_t> want(n);
      for (size_t i = 0; i < n; ++i) want[i] = ConvertCode(from, codes[i], to, options, i);
      std::vector<uint8_t> want_bytes;
      PackCodes(to, want, &want_bytes);
      const std::string got = Read("out");
      ASSERT_EQ(got.size(), want_bytes.size()) << route.from << " -> " << route.to << " " << n;
      EXPECT_TRUE(std::equal(got.begin(), got.end(), want_bytes.begin(),
                             [](char a, uint8_t b) { return static_cast<uint8_t>(a) == b; }))
          << route.from << " -> " << route.to << " " << n;
    }
  }
}

TEST_F(BadInput, NumbersAreNeverSilentlyWrong) {
  // Zero-element tensors store nothing: bits per weight of the rest only.
  WriteSafetensors("empty_rows.safetensors",
                   R"({"e":{"dtype":"BF16","shape":[4,0],"data_offsets":[0,0]},)"
                   R"("z":{"dtype":"BF16","shape":[1099511627776,1099511627776,0],)"
                   R"("data_offsets":[0,0]},)"
                   R"("w":{"dtype":"BF16","shape":[2,4],"data_offsets":[0,16]}})",
                   std::string(16, '\x10'));
  Result r = RunLimited("quant-error " + Path("empty_rows.safetensors") +
                        " --scheme bf16,int8-channel --json --summary");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  nlohmann::json j = nlohmann::json::parse(r.output);
  EXPECT_EQ(j["aggregates"][0]["bits_per_weight"], 16.0);
  EXPECT_EQ(j["aggregates"][0]["bytes"], 16.0);
  // F64 values beyond float32's range are finite inputs the format cannot
  // hold: overflow, an infinite error, not a perfect score.
  {
    const double values[4] = {1e300, 1e40, -1e40, 0.5};
    std::string npy("\x93NUMPY\x01\x00", 8);
    std::string dict = "{'descr': '<f8', 'fortran_order': False, 'shape': (4,), }";
    dict.append(128 - 10 - dict.size() - 1, ' ');
    dict += '\n';
    npy += static_cast<char>(dict.size());
    npy += '\0';
    npy += dict;
    npy.append(reinterpret_cast<const char*>(values), sizeof(values));
    Write("big.npy", npy);
  }
  r = RunLimited("quant-error " + Path("big.npy") + " --scheme bf16 --json --summary");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  j = nlohmann::json::parse(r.output)["aggregates"][0];
  EXPECT_EQ(j["overflow"], 3);
  EXPECT_EQ(j["inf_inputs"], 0);
  EXPECT_TRUE(j["sqnr_db"].is_null());
  EXPECT_TRUE(j["rmse"].is_null());
  r = RunLimited("quant-error " + Path("big.npy") + " --scheme bf16 --summary");
  EXPECT_THAT(r.output, HasSubstr("-inf"));
  // A scheme that turns every element into inf: infinite error in
  // quant-error as in plan.
  WriteF32("max.safetensors", {"w"}, 1, 32, 3.4e38f);
  r = RunLimited("quant-error " + Path("max.safetensors") + " --scheme q8_0 --json --summary");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  j = nlohmann::json::parse(r.output)["aggregates"][0];
  EXPECT_GT(j["overflow"].get<int>(), 0);
  EXPECT_TRUE(j["rmse"].is_null()) << j;
  EXPECT_TRUE(j["sqnr_db"].is_null()) << j;
  EXPECT_TRUE(j["cosine"].is_null()) << j;
  r = RunLimited("quant-error " + Path("max.safetensors") + " --scheme q8_0 --summary");
  EXPECT_THAT(r.output, HasSubstr("-inf"));
  EXPECT_THAT(r.output, Not(HasSubstr("1.000000")));
}

// ---------------------------------------------------------------- options

TEST_F(BadInput, OptionsAreCheckedAndNamed) {
  WriteF32("m.safetensors", {"w"}, 2, 16, 0.5f);
  const std::string m = Path("m.safetensors");
  struct Case {
    std::string args, message;
  } const cases[] = {
      {"quant-error " + m + " --scheme bf16 --scheme int8",
       "--scheme is given twice ('bf16', then 'int8')"},
      {"quant-error " + m + " --scheme bf16 --json --json", "--json is given twice"},
      {"size --model llama-3.1-8b --mode inference --seq 1 --seq 2", "--seq is given twice"},
      {"quant-error " + m + " --scheme bf16 --relative-floor 1e300", "above float32's largest"},
      {"quant-error " + m + " --scheme bf16 --relative-floor -1", "want a number >= 0"},
      {"quant-error " + m + " --scheme 'float(e=4,m=3,bias=7,inf=fnx)'", "float(e=4,m=3"},
      {"quant-error " + m + " --scheme no-such-scheme", "no-such-scheme"},
      {"convert --from fp32 --to 'float(e=99,m=3)' a b", "float(e=99,m=3)"},
      {"quant-error " + m + " --scheme bf16 --threads 99999", "--threads"},
      {"size --model llama-3.1-8b --mode inference --seq 99999999999999999999", "--seq"},
      {"size --model no-such-model --mode inference", "no-such-model"},
      {"quant-error --scheme bf16", "needs input files"},
      {"quant-error " + Path("missing.safetensors") + " --scheme bf16", "missing.safetensors"},
      {"quant-error " + Path("x.txt") + " --scheme bf16", "unknown kind of tensor file"},
  };
  for (const Case& c : cases) {
    const Result r = RunLimited(c.args);
    EXPECT_EQ(r.exit_code, 1) << c.args << "\n" << r.output;
    EXPECT_THAT(r.output, HasSubstr(c.message)) << c.args;
  }
  // User-defined formats keep their parentheses in comma lists.
  Result r = RunLimited("quant-error " + m +
                        " --scheme 'float(e=4,m=3,bias=7,inf=fn),bf16' --json --summary");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(nlohmann::json::parse(r.output)["aggregates"].size(), 2u);
  r = RunLimited("range " + m + " --formats 'float(e=4,m=3,bias=7,inf=fn),bf16' --json");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(nlohmann::json::parse(r.output)["results"].size(), 2u);
  EXPECT_EQ(Files(), (std::vector<std::string>{"m.safetensors"}));
}

}  // namespace
}  // namespace lowp
