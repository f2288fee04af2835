// Numbers as the reports write them for people: the terminal tables and the
// HTML report share these, so that both show the same digits.
#ifndef LOWP_API_TEXT_H_
#define LOWP_API_TEXT_H_

#include <cstdint>
#include <string>

namespace lowp::api {

std::string Grouped(int64_t v);          // 1234567 -> "1,234,567"
std::string Gb(int64_t bytes);           // "%.2f" of bytes / 10^9
std::string Gib(int64_t bytes);          // "%.2f" of bytes / 2^30
std::string TbPerS(double bytes_per_s);  // "%.4g" TB/s, "-" when unknown

// A fraction as a percentage ("0.181%"), a level in dB ("54.84"); "inf",
// "-inf" when infinite, "-" when unknown (NaN).
std::string PercentText(double fraction);
std::string SqnrText(double db);

}  // namespace lowp::api

#endif  // LOWP_API_TEXT_H_
