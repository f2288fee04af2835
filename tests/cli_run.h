// Runs the built `lowp` command for the CLI tests.
#ifndef LOWP_TESTS_CLI_RUN_H_
#define LOWP_TESTS_CLI_RUN_H_

#include <sys/wait.h>

#include <cstdio>
#include <string>

namespace lowp {

struct Result {
  int exit_code;
  std::string output;  // stdout and stderr together
};

// `lowp ARGS` through the shell (ARGS are shell words), as a user would.
inline Result RunLowp(const std::string& args) {
  const std::string command = std::string(LOWP_CLI_PATH) + " " + args + " 2>&1";
  FILE* pipe = popen(command.c_str(), "r");
  std::string output;
  char buffer[4096];
  for (size_t n; (n = fread(buffer, 1, sizeof(buffer), pipe)) > 0;) output.append(buffer, n);
  const int status = pclose(pipe);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, output};
}

}  // namespace lowp

#endif  // LOWP_TESTS_CLI_RUN_H_
