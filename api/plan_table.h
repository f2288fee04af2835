// The plan as table cells: what the terminal table (cli/plan_command.cc),
// the HTML report (api/plan_html.h) and the JSON share.
#ifndef LOWP_API_PLAN_TABLE_H_
#define LOWP_API_PLAN_TABLE_H_

#include <string>
#include <utility>
#include <vector>

#include "sizing/plan.h"

namespace lowp::api {

// Whether some candidate turned weights into inf or NaN (the tables then
// have an overflow column).
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
// The KV study's table on device d (plan.kv_study): a header, then a row
// per pair of weights and KV cache formats (the terminal's and the HTML's).
std::vector<std::vector<std::string>> KvStudyRows(const Plan& plan, size_t d,
                                                  std::string (*count)(int64_t));

}  // namespace lowp::api

#endif  // LOWP_API_PLAN_TABLE_H_
