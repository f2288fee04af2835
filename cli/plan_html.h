// lowp plan --html: the plan as one self-contained HTML file (no JavaScript,
// no network): a heading saying what was planned and where the accuracy was
// measured, the table for each device, and two inline SVG charts: memory per
// device by component for each candidate (stacked bars, each device's
// capacity drawn as a line), and error versus bits per weight with the
// Pareto front.
#ifndef LOWP_CLI_PLAN_HTML_H_
#define LOWP_CLI_PLAN_HTML_H_

#include <string>

#include "sizing/plan.h"

namespace lowp::cli {

// The document. `command` is the command line shown in the report. The
// output is well-formed XML (XHTML-compatible HTML5: every element closed,
// attributes quoted, text escaped); each candidate is one
// <g class="bar" data-format="F"> in the memory chart, in the candidates'
// order, and one <g class="point" data-format="F"> in the error chart.
std::string PlanHtml(const Plan& plan, const std::string& command);

}  // namespace lowp::cli

#endif  // LOWP_CLI_PLAN_HTML_H_
