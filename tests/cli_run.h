// Runs the built `lowp` command for the CLI tests, each in a scratch directory.
#ifndef LOWP_TESTS_CLI_RUN_H_
#define LOWP_TESTS_CLI_RUN_H_

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace lowp {

struct Result {
  int exit_code;
  std::string output;  // stdout and stderr together
};

// The command under test: the build's, or $LOWP_CLI (to run the tests
// against another build, e.g. to see a regression test fail before a fix).
inline std::string CliPath() {
  const char* other = std::getenv("LOWP_CLI");
  return other != nullptr && *other != '\0' ? other : LOWP_CLI_PATH;
}

// `lowp ARGS` through the shell (ARGS are shell words), as a user would,
// with no standard input; under `timeout` when `timeout_s` > 0, so that a
// hang is exit 124 instead of a stuck test; `environment` ("NAME=VALUE ...")
// set for it alone.
inline Result RunLowp(const std::string& args, int timeout_s = 0,
                      const std::string& environment = "") {
  const std::string command =
      (environment.empty() ? std::string() : "env " + environment + " ") +
      (timeout_s > 0 ? "timeout " + std::to_string(timeout_s) + " " : std::string()) + CliPath() +
      " " + args + " 2>&1 < /dev/null";
  FILE* pipe = popen(command.c_str(), "r");
  std::string output;
  char buffer[4096];
  for (size_t n; (n = fread(buffer, 1, sizeof(buffer), pipe)) > 0;) output.append(buffer, n);
  const int status = pclose(pipe);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, output};
}

// A fresh directory per test, removed with everything in it; Files() lists
// what is in it, to check that nothing (no temporary, no partial output)
// was left behind.
class ScratchDir : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("lowp_" + std::to_string(getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->test_suite_name() + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string Path(const std::string& name) const { return (dir_ / name).string(); }
  void Write(const std::string& name, const std::string& bytes) const {
    std::ofstream(Path(name), std::ios::binary) << bytes;
  }
  std::string Read(const std::string& name) const {
    std::ifstream in(Path(name), std::ios::binary);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  }
  std::vector<std::string> Files() const {
    std::vector<std::string> names;
    for (const auto& entry : std::filesystem::directory_iterator(dir_)) {
      names.push_back(entry.path().filename());
    }
    std::sort(names.begin(), names.end());
    return names;
  }
  std::filesystem::path dir_;
};

}  // namespace lowp

#endif  // LOWP_TESTS_CLI_RUN_H_
