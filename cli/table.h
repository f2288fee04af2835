// Plain-text tables, CSV and progress lines for the commands'
// output.
#ifndef LOWP_CLI_TABLE_H_
#define LOWP_CLI_TABLE_H_

#include <chrono>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"

namespace lowp::cli {

using Row = std::vector<std::string>;

// `text` safe to show on a terminal: control characters (C0, DEL and the
// UTF-8 encoded C1 range, which carry ESC and OSC sequences) written as
// \xNN, so a hostile tensor or file name cannot move the cursor, retitle the
// window or hide text. Every human-readable output goes through it; CSV,
// JSON and HTML have their own escaping.
std::string Printable(absl::string_view text);

// Prints rows[0] as the header and the rest aligned in columns: a column is
// left-aligned when its index is in `left`, right-aligned otherwise.
void PrintTable(const std::vector<Row>& rows, const std::vector<size_t>& left);

// Prints rows as CSV (RFC 4180 quoting where a field needs it).
void PrintCsv(const std::vector<Row>& rows);

// A "\r[i/n] what  1:23 elapsed, 0.52 steps/s, ETA 4:10" line on stderr
// while work goes on (step i begun, i - 1 done: the rate and ETA from
// those), only when stderr is a terminal and `quiet` is false; erased when
// done, and when all n steps were begun, a last line "n steps in 5:33".
class Progress {
 public:
  explicit Progress(size_t total, bool quiet = false);
  ~Progress();
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;
  void Step(const std::string& what);

 private:
  size_t total_;
  size_t done_ = 0;
  bool on_;
  bool shown_ = false;
  std::chrono::steady_clock::time_point start_;
};

// Seconds as "m:ss" ("h:mm:ss" from an hour on).
std::string Duration(double seconds);

}  // namespace lowp::cli

#endif  // LOWP_CLI_TABLE_H_
