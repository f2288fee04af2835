// What the commands share: the sizing options from the command line, byte
// and bandwidth text, the JSON of sizing results and of error reports
// (`lowp plan` prints what `lowp size` and `lowp quant-error` print).
#ifndef LOWP_CLI_SHARED_H_
#define LOWP_CLI_SHARED_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "cli/commands.h"
#include "nlohmann/json.hpp"
#include "quant/measure.h"
#include "sizing/devices.h"
#include "sizing/memory.h"

namespace lowp::cli {

// The value options of the memory model (--model, --mode, --weights, ...,
// --headroom); the flags are --sequence-parallel and --no-flash-attention.
const std::vector<std::string>& SizingValueOptions();
// Reads them into `o` (--mode required); InvalidArgument naming the option.
absl::Status ReadSizingOptions(const Args& args, SizingOptions* o);

std::string Grouped(int64_t v);          // 1234567 -> "1,234,567"
std::string Gb(int64_t bytes);           // "%.2f" of bytes / 10^9
std::string Gib(int64_t bytes);          // "%.2f" of bytes / 2^30
std::string TbPerS(double bytes_per_s);  // "%.4g" TB/s, "-" when unknown

nlohmann::json DeviceJson(const Device& d);
nlohmann::json BytesJson(const Bytes& b);
nlohmann::json OptionsJson(const SizingOptions& o);
nlohmann::json SizingReportJson(const SizingReport& r);

// One row of `lowp quant-error --json` (its "results" and "aggregates").
nlohmann::json QuantReportJson(const QuantReport& r, float relative_floor, bool histogram);

}  // namespace lowp::cli

#endif  // LOWP_CLI_SHARED_H_
