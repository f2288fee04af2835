#include "cli/plan_html.h"

namespace lowp::cli {

// Placeholder until the report lands (issue 6, in progress).
std::string PlanHtml(const Plan&, const std::string&) { return std::string(); }

}  // namespace lowp::cli
