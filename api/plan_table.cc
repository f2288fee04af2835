#include "api/plan_table.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "api/text.h"

namespace lowp::api {

bool PlanAnyOverflow(const Plan& plan) {
  for (const PlanCandidate& c : plan.candidates) {
    if (c.error.stats.nonfinite_outputs > 0) return true;
  }
  return false;
}

double PlanDecode(const Plan& plan, const PlanFit& f) {
  return plan.options.sizing.mode == Mode::kInference && f.report.fits
             ? f.report.decode_tokens_per_s_per_sequence
             : 0;
}

std::vector<std::string> PlanCells(const Plan& plan, const PlanCandidate& c, size_t d,
                                   std::string (*count)(int64_t)) {
  const PlanFit& f = c.fits[d];
  const SizingReport& r = f.report;
  const double decode = PlanDecode(plan, f);
  std::vector<std::string> cells = {
      c.format,
      absl::StrFormat("%.4g", c.linear_bits_per_parameter),
      Gb(c.weight_bytes),
      r.capacity_bytes > 0 ? Gb(r.per_device.total()) : "-",  // "-": no room to size
      r.fits ? "yes" : "no",
      f.possible ? absl::StrCat(r.devices_needed) : "never",
      r.max_seq > 0 ? count(r.max_seq) : "none",
      r.max_batch > 0 ? count(r.max_batch) : "none",
      decode > 0 ? absl::StrFormat("%.1f", decode) : "-",
      SqnrText(c.sqnr_db()),
      PercentText(c.relative_rmse()),
      c.error.stats.measured > 0 ? absl::StrFormat("%.3g", c.error.max_abs_error()) : "-",
      PercentText(c.clipped_fraction())};
  if (PlanAnyOverflow(plan)) cells.push_back(PercentText(c.overflow_fraction()));
  if (plan.eval) {
    const PlanCandidate::EndToEnd& x = *c.end_to_end;
    cells.push_back(std::isfinite(x.kl_mean) ? absl::StrFormat("%.3g", x.kl_mean) : "inf");
    cells.push_back(PercentText(x.top1_agreement));
    cells.push_back(std::isfinite(x.perplexity_ratio)
                        ? absl::StrFormat("%+.2f%%", 100 * (x.perplexity_ratio - 1))
                        : "inf");
  }
  return cells;
}

std::vector<std::pair<std::string, std::vector<std::string>>> NoFitReasons(const Plan& plan,
                                                                           size_t d) {
  std::vector<std::pair<std::string, std::vector<std::string>>> reasons;
  for (const PlanCandidate& c : plan.candidates) {
    const PlanFit& f = c.fits[d];
    if (f.possible) continue;
    auto it = std::find_if(reasons.begin(), reasons.end(),
                           [&](const auto& r) { return r.first == f.reason; });
    if (it == reasons.end()) it = reasons.insert(reasons.end(), {f.reason, {}});
    it->second.push_back(c.format);
  }
  return reasons;
}

std::vector<std::vector<std::string>> KvStudyRows(const Plan& plan, size_t d,
                                                  std::string (*count)(int64_t)) {
  const PlanKvStudy& k = *plan.kv_study;
  auto kl = [](const std::optional<PlanCandidate::EndToEnd>& x) -> std::string {
    if (!x) return "-";
    return std::isfinite(x->kl_mean) ? absl::StrFormat("%.3g", x->kl_mean) : "inf";
  };
  std::vector<std::vector<std::string>> rows = {
      {"weights", "KV cache", "weights GB", "KV GB", "GB/device", "fits", "max ctx", "max seqs",
       "KL mean", "KV alone", "top-1", "Pareto"}};
  const size_t K = k.formats.size();
  for (size_t p = 0; p < k.pairs.size(); ++p) {
    const PlanCandidate& c = k.pairs[p];
    const PlanFit& f = c.fits[d];
    const SizingReport& r = f.report;
    rows.push_back({c.format, c.kv, Gb(c.weight_bytes), Gb(c.kv_cache_bytes),
                    r.capacity_bytes > 0 ? Gb(r.per_device.total()) : "-",
                    r.fits ? "yes" : "no",
                    r.max_seq > 0 ? count(r.max_seq) : "none",
                    r.max_batch > 0 ? count(r.max_batch) : "none", kl(c.end_to_end),
                    kl(k.formats[p % K].end_to_end),
                    c.end_to_end ? PercentText(c.end_to_end->top1_agreement) : "-",
                    c.pareto ? "*" : ""});
  }
  return rows;
}

}  // namespace lowp::api
