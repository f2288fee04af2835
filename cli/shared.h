// What the commands share: the sizing options from the command line, byte
// and bandwidth text, the JSON of sizing results and of error reports
// (`lowp plan` prints what `lowp size` and `lowp quant-error` print).
#ifndef LOWP_CLI_SHARED_H_
#define LOWP_CLI_SHARED_H_


#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "cli/commands.h"
#include "nlohmann/json.hpp"
#include "quant/measure.h"
#include "sizing/devices.h"
#include "sizing/memory.h"
#include "sizing/plan.h"

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

// A fraction as a percentage ("0.181%"), a level in dB ("54.84"); "inf",
// "-inf" when infinite, "-" when unknown (NaN).
std::string PercentText(double fraction);
std::string SqnrText(double db);

// One row of `lowp quant-error --json` (its "results" and "aggregates").
nlohmann::json QuantReportJson(const QuantReport& r, float relative_floor, bool histogram);

// What the plan's terminal table and its HTML report share.
// Whether some candidate turned weights into inf or NaN (the tables then have
// an overflow column).
bool PlanAnyOverflow(const Plan& plan);
// The decode bound shown for a fit: only for inference that fits, else 0.
double PlanDecode(const Plan& plan, const PlanFit& f);
// Candidate c's cells on device d, without the Pareto mark: format, bits/w,
// weights GB, GB per device, fits, devices, max seq, max batch (written by
// `count`), tok/s, SQNR, rel RMSE, max error, clipped, and overflow when
// PlanAnyOverflow.
std::vector<std::string> PlanCells(const Plan& plan, const PlanCandidate& c, size_t d,
                                   std::string (*count)(int64_t));
// The candidates that cannot fit device d, grouped by reason, in order.
std::vector<std::pair<std::string, std::vector<std::string>>> NoFitReasons(const Plan& plan,
                                                                           size_t d);

// --threads: 0 (every core, the default) to 1024.
absl::StatusOr<int> ParseThreads(const Args& args);

// "A,B,C" split at the commas outside parentheses, so that user-defined
// formats keep theirs ("float(e=4,m=3,bias=7,inf=fn),bf16" is two names).
std::vector<std::string> SplitNames(absl::string_view text);

// --NAME A,B,C as a list (empty when absent); an empty or repeated item is an
// error naming the option.
absl::StatusOr<std::vector<std::string>> SplitList(const Args& args, absl::string_view name);

}  // namespace lowp::cli

#endif  // LOWP_CLI_SHARED_H_
