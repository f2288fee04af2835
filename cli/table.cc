#include "cli/table.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>


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

Progress::Progress(size_t total, bool quiet)
    : total_(total), on_(!quiet && total > 1 && isatty(STDERR_FILENO)) {}

Progress::~Progress() {
  if (on_ && shown_) std::fprintf(stderr, "\r\033[K");
}

void Progress::Step(const std::string& what) {
  if (!on_) return;
  shown_ = true;
  std::fprintf(stderr, "\r\033[K[%zu/%zu] %s", ++done_, total_, Printable(what).c_str());
  std::fflush(stderr);
}

}  // namespace lowp::cli
