#include "cli/table.h"

#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"


namespace lowp::cli {

std::string Printable(absl::string_view text) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(text.size());
  auto escape = [&](unsigned char c) {
    out += "\\x";
    out += kHex[c >> 4];
    out += kHex[c & 15];
  };
  for (size_t i = 0; i < text.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    if (c < 0x20 || c == 0x7F) {
      escape(c);
    } else if (c == 0xC2 && i + 1 < text.size() &&
               static_cast<unsigned char>(text[i + 1]) >= 0x80 &&
               static_cast<unsigned char>(text[i + 1]) <= 0x9F) {
      escape(c);  // U+0080..U+009F: C1 controls (CSI, OSC, ...)
      escape(static_cast<unsigned char>(text[++i]));
    } else {
      out += static_cast<char>(c);
    }
  }
  return out;
}

void PrintTable(const std::vector<Row>& rows, const std::vector<size_t>& left) {
  if (rows.empty()) return;
  std::vector<size_t> width(rows[0].size(), 0);
  for (const Row& row : rows) {
    for (size_t c = 0; c < row.size() && c < width.size(); ++c) {
      width[c] = std::max(width[c], Printable(row[c]).size());
    }
  }
  for (const Row& row : rows) {
    std::string line;
    for (size_t c = 0; c < row.size() && c < width.size(); ++c) {
      const std::string cell = Printable(row[c]);
      const std::string pad(width[c] - cell.size(), ' ');
      const bool is_left = std::find(left.begin(), left.end(), c) != left.end();
      line += is_left ? cell + pad : pad + cell;
      if (c + 1 < row.size()) line += "  ";
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    std::printf("%s\n", line.c_str());
  }
}

void PrintCsv(const std::vector<Row>& rows) {
  for (const Row& row : rows) {
    std::string line;
    for (size_t c = 0; c < row.size(); ++c) {
      const std::string& field = row[c];
      if (field.find_first_of(",\"\n") == std::string::npos) {
        line += field;
      } else {
        line += '"';
        for (char ch : field) {
          if (ch == '"') line += '"';
          line += ch;
        }
        line += '"';
      }
      if (c + 1 < row.size()) line += ',';
    }
    std::printf("%s\n", line.c_str());
  }
}

std::string Duration(double seconds) {
  const int64_t s = static_cast<int64_t>(std::llround(std::max(seconds, 0.0)));
  if (s < 3600) return absl::StrFormat("%d:%02d", s / 60, s % 60);
  return absl::StrFormat("%d:%02d:%02d", s / 3600, s / 60 % 60, s % 60);
}

Progress::Progress(size_t total, bool quiet)
    : total_(total),
      on_(!quiet && total > 1 && isatty(STDERR_FILENO)),
      start_(std::chrono::steady_clock::now()) {}

Progress::~Progress() {
  if (!on_ || !shown_) return;
  std::fprintf(stderr, "\r\033[K");
  if (done_ >= total_) {
    const std::chrono::duration<double> elapsed = std::chrono::steady_clock::now() - start_;
    std::fprintf(stderr, "%zu steps in %s\n", total_, Duration(elapsed.count()).c_str());
  }
}

void Progress::Step(const std::string& what) {
  if (!on_) return;
  shown_ = true;
  ++done_;
  const double elapsed =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  std::string timing = absl::StrCat("  ", Duration(elapsed), " elapsed");
  // The steps before this one are done: their rate gives the rest's time.
  const double finished = static_cast<double>(done_ - 1);
  if (finished > 0 && elapsed > 0 && done_ <= total_) {
    const double rate = finished / elapsed;
    absl::StrAppend(&timing, absl::StrFormat(", %.3g steps/s, ETA ", rate),
                    Duration(static_cast<double>(total_ - done_ + 1) / rate));
  }
  // One line: the name shortened to what the terminal's width leaves (a
  // wrapped line would not be erased by the next).
  std::string line = absl::StrFormat("[%zu/%zu] %s", done_, total_, Printable(what));
  struct winsize size {};
  const size_t width = ioctl(STDERR_FILENO, TIOCGWINSZ, &size) == 0 && size.ws_col > 0
                           ? static_cast<size_t>(size.ws_col) - 1
                           : 0;
  if (width > 0 && line.size() + timing.size() > width) {
    line.resize(width > timing.size() ? width - timing.size() : 0);
  }
  std::fprintf(stderr, "\r\033[K%s%s", line.c_str(), timing.c_str());
  std::fflush(stderr);
}

}  // namespace lowp::cli
