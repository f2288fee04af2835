// The plan's HTML report (lowp plan --html, lowp.plan(html=...)): one
// self-contained file (no JavaScript, no network): a heading saying what was planned and where the accuracy was
// measured, the table for each device, and two inline SVG charts: memory per
// device by component for each candidate (stacked bars, each device's
// capacity drawn as a line), and error versus bits per weight with the
// Pareto front.
#ifndef LOWP_API_PLAN_HTML_H_
#define LOWP_API_PLAN_HTML_H_

#include <string>

#include "sizing/plan.h"

namespace lowp::api {

// The document. `command` is the command line shown in the report. The
// output is well-formed XML (XHTML-compatible HTML5: every element closed,
// attributes quoted, text escaped); each candidate is one
// <g class="bar" data-format="F"> in the memory chart, in the candidates'
// order, and one <g class="point" data-format="F"> in the error chart.
std::string PlanHtml(const Plan& plan, const std::string& command);

}  // namespace lowp::api

#endif  // LOWP_API_PLAN_HTML_H_
