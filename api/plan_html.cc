// The report is built as a string, piece by piece; every text that comes
// from the user (model, device and file names, the command line) goes
// through Escape. Text widths in the charts are estimated (7 px per
// character at 12 px), enough to keep labels apart.
#include "api/plan_html.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/string_view.h"
#include "api/plan_table.h"
#include "api/text.h"

namespace lowp::api {
namespace {

constexpr char kStyle[] = R"(
body { font-family: system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial,
  sans-serif; color: #222; max-width: 920px; margin: 20px auto; padding: 0 10px; }
h1 { font-size: 22px; margin: 0 0 6px; }
h2 { font-size: 17px; margin: 26px 0 4px; }
p { margin: 4px 0; font-size: 14px; }
code { font-size: 13px; }
.proxy { background: #fff4ce; border-left: 4px solid #e0a800; padding: 6px 10px; }
.caption { color: #555; }
table { border-collapse: collapse; font-size: 13px; margin-top: 6px;
  font-variant-numeric: tabular-nums; }
th, td { padding: 3px 5px; border-bottom: 1px solid #ddd; text-align: right; }
th { vertical-align: bottom; font-weight: 600; }
th:first-child, td:first-child { text-align: left; white-space: nowrap; }
tr.pareto td { background: #eef6ea; font-weight: 600; }
td.no { color: #b3261e; }
svg { display: block; margin-top: 6px; }
svg text { font-size: 12px; fill: #333; }
.grid { stroke: #e6e6e6; }
.axis { stroke: #888; }
.capacity { stroke: #b3261e; stroke-width: 1.5; stroke-dasharray: 6 4; }
.front { fill: none; stroke: #2e7d32; stroke-width: 1.5; }
.optimal { fill: #2e7d32; }
.dominated { fill: none; stroke: #777; stroke-width: 1.5; }
.leader { stroke: #aaa; }
.point text { paint-order: stroke; stroke: #fff; stroke-width: 3px; stroke-linejoin: round; }
)";

constexpr double kWidth = 900, kHeight = 360;

// Text or an attribute value as XML character data; the control characters
// XML forbids become '?'.
std::string Escape(absl::string_view text) {
  std::string out =
      absl::StrReplaceAll(text, {{"&", "&amp;"}, {"<", "&lt;"}, {">", "&gt;"}, {"\"", "&quot;"}});
  for (char& ch : out) {
    if (static_cast<unsigned char>(ch) < 0x20 && ch != '\t' && ch != '\n') ch = '?';
  }
  return out;
}

double TextWidth(absl::string_view text) { return 7.0 * static_cast<double>(text.size()); }

// `anchor`: start, middle or end; `angle`: degrees of rotation about (x, y).
std::string Text(double x, double y, absl::string_view text, absl::string_view anchor = "start",
                 double angle = 0) {
  std::string attributes;
  if (anchor != "start") absl::StrAppend(&attributes, " text-anchor=\"", anchor, "\"");
  if (angle != 0) {
    absl::StrAppendFormat(&attributes, " transform=\"rotate(%g %.1f %.1f)\"", angle, x, y);
  }
  return absl::StrFormat("<text x=\"%.1f\" y=\"%.1f\"%s>%s</text>\n", x, y, attributes,
                         Escape(text));
}
std::string Line(double x1, double y1, double x2, double y2, absl::string_view css_class) {
  return absl::StrFormat("<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" class=\"%s\"/>\n",
                         x1, y1, x2, y2, css_class);
}
// `tooltip`: shown on hover; none when empty.
std::string Rect(double x, double y, double width, double height, absl::string_view color,
                 absl::string_view tooltip = "") {
  return absl::StrFormat(
      "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"%s\"%s\n", x, y, width,
      height, color,
      tooltip.empty() ? "/>" : absl::StrCat("><title>", Escape(tooltip), "</title></rect>"));
}
std::string SvgStart(absl::string_view label) {
  return absl::StrFormat(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%g\" height=\"%g\" "
      "viewBox=\"0 0 %g %g\" role=\"img\" aria-label=\"%s\">\n",
      kWidth, kHeight, kWidth, kHeight, Escape(label));
}

struct Component {
  const char* name;
  const char* color;
  int64_t Bytes::*bytes;
};
constexpr Component kComponents[] = {
    {"weights", "#4e79a7", &Bytes::weights},         {"gradients", "#f28e2b", &Bytes::gradients},
    {"master weights", "#e15759", &Bytes::master},   {"optimizer", "#76b7b2", &Bytes::optimizer},
    {"activations", "#59a14f", &Bytes::activations}, {"KV cache", "#edc948", &Bytes::kv_cache},
    {"workspace", "#b07aa1", &Bytes::workspace},     {"buffers", "#bab0ac", &Bytes::buffers}};

// 1, 2 or 5 times a power of ten: at most 6 steps up to `top` (> 0).
double NiceStep(double top) {
  const double power = std::pow(10, std::floor(std::log10(top / 6)));
  for (double m : {1, 2, 5}) {
    if (m * power * 6 >= top) return m * power;
  }
  return 10 * power;
}

std::string MemoryChart(const Plan& plan) {
  const std::vector<PlanCandidate>& candidates = plan.candidates;
  const size_t devices = candidates.empty() ? 0 : candidates[0].fits.size();
  // Only the capacity depends on the device: the bytes come from the first
  // device with room; with none, the bars are the weights alone.
  size_t sized = 0;
  while (sized < devices && candidates[0].fits[sized].report.capacity_bytes == 0) ++sized;
  std::vector<Bytes> bars;
  for (const PlanCandidate& c : candidates) {
    Bytes weights_alone;
    weights_alone.weights = c.weight_bytes;
    bars.push_back(sized < devices ? c.fits[sized].report.per_device : weights_alone);
  }
  std::vector<std::pair<int64_t, std::string>> capacities;  // ascending
  for (size_t d = 0; d < devices; ++d) {
    const int64_t bytes = candidates[0].fits[d].report.capacity_bytes;
    if (bytes > 0) capacities.emplace_back(bytes, candidates[0].fits[d].device.name);
  }
  std::sort(capacities.begin(), capacities.end());

  int64_t largest = 1;
  for (const Bytes& b : bars) largest = std::max(largest, b.total());
  if (!capacities.empty()) largest = std::max(largest, capacities.back().first);
  const double step = NiceStep(static_cast<double>(largest) / 1e9);
  const double top_gb = std::ceil(static_cast<double>(largest) / 1e9 / step) * step;
  const double left = 60, right = kWidth - 130, top = 44;
  const double slot = (right - left) / static_cast<double>(std::max<size_t>(1, bars.size()));
  double longest = 0;
  for (const PlanCandidate& c : candidates) longest = std::max(longest, TextWidth(c.format));
  const bool slanted = longest > slot - 6;
  const double bottom = kHeight - (slanted ? 84 : 40);
  auto y = [&](double bytes) { return bottom - bytes / 1e9 / top_gb * (bottom - top); };

  std::string svg = SvgStart("memory per device by component for each format");
  for (int i = 0; i * step <= top_gb + step / 2; ++i) {
    const double tick_y = y(i * step * 1e9);
    absl::StrAppend(&svg, Line(left, tick_y, right, tick_y, i == 0 ? "axis" : "grid"),
                    Text(left - 6, tick_y + 4, absl::StrFormat("%g", i * step), "end"));
  }
  absl::StrAppend(&svg, Text(16, (top + bottom) / 2, "GB per device", "middle", -90));
  double legend_x = left;
  for (const Component& k : kComponents) {
    if (std::none_of(bars.begin(), bars.end(), [&](const Bytes& b) { return b.*k.bytes > 0; })) {
      continue;
    }
    absl::StrAppend(&svg, Rect(legend_x, 8, 10, 10, k.color), Text(legend_x + 14, 17, k.name));
    legend_x += 26 + TextWidth(k.name);
  }
  if (!capacities.empty()) {
    absl::StrAppend(&svg, Line(legend_x, 13, legend_x + 24, 13, "capacity"),
                    Text(legend_x + 30, 17, "device capacity"));
  }

  for (size_t i = 0; i < bars.size(); ++i) {
    const std::string& format = candidates[i].format;
    const double width = std::min(slot * 0.6, 64.0);
    const double center = left + slot * (static_cast<double>(i) + 0.5);
    absl::StrAppend(&svg, "<g class=\"bar\" data-format=\"", Escape(format), "\">\n");
    int64_t below = 0;
    for (const Component& k : kComponents) {
      const int64_t bytes = bars[i].*k.bytes;
      if (bytes == 0) continue;
      absl::StrAppend(&svg,
                      Rect(center - width / 2, y(below + bytes), width, y(below) - y(below + bytes),
                           k.color, absl::StrCat(format, " ", k.name, ": ", Gb(bytes), " GB")));
      below += bytes;
    }
    const int decimals = TextWidth(Gb(below)) > slot - 4 ? 0 : 2;  // narrow bars: whole GB
    absl::StrAppend(
        &svg,
        Text(center, y(below) - 4,
             absl::StrFormat("%.*f", decimals, static_cast<double>(below) / 1e9), "middle"),
        slanted ? Text(center + 4, bottom + 14, format, "end", -35)
                : Text(center, bottom + 18, format, "middle"),
        "</g>\n");
  }
  // Labels in the right margin, two lines each, moved up when they would
  // overlap the one below.
  double free_above = kHeight;
  for (const auto& [bytes, name] : capacities) {
    const double line_y = y(static_cast<double>(bytes));
    const double label_y = std::min(line_y + 4, free_above - 30);
    free_above = label_y - 12;
    absl::StrAppend(&svg, Line(left, line_y, right, line_y, "capacity"),
                    Text(right + 8, label_y, name),
                    Text(right + 8, label_y + 14, absl::StrCat(Gb(bytes), " GB")));
  }
  absl::StrAppend(&svg, "</svg>\n");
  if (sized == devices) {
    absl::StrAppend(&svg,
                    "<p class=\"caption\">No device has room once its buffers are kept: the bars "
                    "show the weights alone.</p>\n");
  }
  return svg;
}

// What a label or point covers in a chart.
struct Box {
  double x0, y0, x1, y1;
  bool Overlaps(const Box& b) const { return x0 < b.x1 && b.x0 < x1 && y0 < b.y1 && b.y0 < y1; }
};

// Error against bits per weight: mean KL divergence of the model's outputs
// when the plan has them (lowp plan --eval), else the weights' relative RMSE.
std::string ErrorChart(const Plan& plan) {
  const std::vector<PlanCandidate>& candidates = plan.candidates;
  const bool kl = plan.eval.has_value();
  auto metric = [kl](const PlanCandidate& c) {
    return kl ? c.end_to_end->kl_mean : c.relative_rmse();
  };
  auto tick = [kl](double v) { return kl ? absl::StrFormat("%g", v) : PercentText(v); };
  double min_bits = INFINITY, max_bits = 0, min_error = INFINITY, max_error = 0;
  bool exact = false, unbounded = false;  // an error of 0; of inf or NaN
  for (const PlanCandidate& c : candidates) {
    min_bits = std::min(min_bits, c.linear_bits_per_parameter);
    max_bits = std::max(max_bits, c.linear_bits_per_parameter);
    const double e = metric(c);
    exact |= e == 0;
    unbounded |= !std::isfinite(e);
    if (e > 0 && std::isfinite(e)) {
      min_error = std::min(min_error, e);
      max_error = std::max(max_error, e);
    }
  }
  const double x_low = std::log2(min_bits) - 0.2, x_high = std::log2(max_bits) + 0.2;
  // A little beyond the errors, at least a decade.
  double y_low = max_error > 0 ? std::log10(min_error / 1.4) : -3;
  double y_high = max_error > 0 ? std::log10(max_error * 1.4) : -1;
  if (y_high - y_low < 1) {
    y_low -= (1 - (y_high - y_low)) / 2;
    y_high = y_low + 1;
  }
  const double left = 70, right = kWidth - 130, top = 44, bottom = kHeight - 48;
  // Bands for the exact points below the decades, the unbounded ones above.
  const double decades_bottom = exact ? bottom - 28 : bottom;
  const double decades_top = unbounded ? top + 28 : top;
  auto x = [&](double bits) {
    return left + (std::log2(bits) - x_low) / (x_high - x_low) * (right - left);
  };
  auto y = [&](double error) {
    if (error == 0) return bottom;
    if (!std::isfinite(error)) return top;
    return decades_bottom -
           (std::log10(error) - y_low) / (y_high - y_low) * (decades_bottom - decades_top);
  };

  std::string svg = SvgStart(kl ? "mean KL divergence versus bits per weight with the Pareto front"
                                : "error versus bits per weight with the Pareto front");
  std::vector<Box> taken;  // by tick labels, points and point labels
  for (double k = std::floor(y_low); k <= y_high; ++k) {
    for (double m : {1, 2, 5}) {
      const double error = m * std::pow(10, k);
      if (std::log10(error) < y_low || std::log10(error) > y_high) continue;
      if (m > 1 && y_high - y_low > 3) continue;  // decades alone
      const std::string label = tick(error);
      absl::StrAppend(&svg, Line(left, y(error), right, y(error), "grid"),
                      Text(left - 6, y(error) + 4, label, "end"));
      taken.push_back({left - 6 - TextWidth(label), y(error) - 7, left - 6, y(error) + 6});
    }
  }
  if (exact) absl::StrAppend(&svg, Text(left - 6, bottom + 4, "exact", "end"));
  if (unbounded) absl::StrAppend(&svg, Text(left - 6, top + 4, "inf", "end"));
  for (double k = std::floor(x_low); k <= x_high; ++k) {
    for (double bits : {std::exp2(k), 1.5 * std::exp2(k)}) {
      if (std::log2(bits) < x_low || std::log2(bits) > x_high) continue;
      absl::StrAppend(&svg, Line(x(bits), top, x(bits), bottom, "grid"),
                      Text(x(bits), bottom + 23, absl::StrFormat("%g", bits), "middle"));
    }
  }
  absl::StrAppend(
      &svg, Line(left, bottom + 9, right, bottom + 9, "axis"),
      Text((left + right) / 2, bottom + 41,
           "bits per weight of the linear layers, scales included (log scale)", "middle"),
      Text(16, (top + bottom) / 2,
           kl ? "mean KL divergence of the outputs, nats (log scale; lower is better)"
              : "relative RMSE (log scale; lower is better)",
           "middle", -90));
  absl::StrAppend(&svg, "<circle cx=\"", left + 5, "\" cy=\"13\" r=\"5\" class=\"optimal\"/>\n",
                  Text(left + 16, 17, "Pareto-optimal"), "<circle cx=\"", left + 135,
                  "\" cy=\"13\" r=\"5\" class=\"dominated\"/>\n", Text(left + 146, 17, "dominated"),
                  Line(left + 230, 13, left + 254, 13, "front"),
                  Text(left + 260, 17, "Pareto front"));

  std::vector<std::pair<double, double>> front;  // (x, y) of the optimal points
  for (const PlanCandidate& c : candidates) {
    if (c.pareto) front.emplace_back(x(c.linear_bits_per_parameter), y(metric(c)));
  }
  std::sort(front.begin(), front.end());
  if (!front.empty()) {
    // Steps: from each optimal point, right to the next one's bits, then down.
    std::string points = absl::StrFormat("%.1f,%.1f", front[0].first, front[0].second);
    for (size_t i = 1; i < front.size(); ++i) {
      absl::StrAppendFormat(&points, " %.1f,%.1f %.1f,%.1f", front[i].first, front[i - 1].second,
                            front[i].first, front[i].second);
    }
    absl::StrAppend(&svg, "<polyline points=\"", points, "\" class=\"front\"/>\n");
  }

  // Each label beside its point, right or left, moved up or down a line at
  // a time until it covers no other label, tick label or point. The optimal
  // points are labelled first, and drawn first so that a dominated ring on
  // one stays visible.
  for (const PlanCandidate& c : candidates) {
    const double px = x(c.linear_bits_per_parameter), py = y(metric(c));
    taken.push_back({px - 5, py - 5, px + 5, py + 5});
  }
  std::vector<size_t> order(candidates.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_partition(order.begin(), order.end(), [&](size_t i) { return candidates[i].pareto; });
  for (size_t i : order) {
    const PlanCandidate& c = candidates[i];
    const double error = metric(c);
    const double px = x(c.linear_bits_per_parameter), py = y(error);
    const std::string label = absl::StrCat(c.format, error == 0          ? " (exact)"
                                                     : std::isinf(error) ? " (overflow)"
                                                     : std::isnan(error) ? " (not measured)"
                                                                         : "");
    const double width = TextWidth(label);
    // Option k: right of the point for even k, else left; shifted by 0, -13,
    // +13, -26, ... px. The first that is free, else the first.
    auto shift = [](int k) { return 13.0 * ((k / 2 + 1) / 2) * (k / 2 % 2 == 1 ? -1 : 1); };
    auto box = [&](int k) {
      const double y0 = py + shift(k) - 7, y1 = py + shift(k) + 6;
      return k % 2 == 0 ? Box{px + 8, y0, px + 8 + width, y1} : Box{px - 8 - width, y0, px - 8, y1};
    };
    int chosen = 0;
    for (int k = 0; k < 48; ++k) {
      const Box b = box(k);
      if (b.x0 >= 24 && b.x1 <= kWidth && b.y0 >= top - 12 && b.y1 <= bottom + 8 &&
          std::none_of(taken.begin(), taken.end(), [&](const Box& t) { return t.Overlaps(b); })) {
        chosen = k;
        break;
      }
    }
    taken.push_back(box(chosen));
    const double side = chosen % 2 == 0 ? 1 : -1, label_y = py + shift(chosen);
    absl::StrAppend(
        &svg, "<g class=\"point\" data-format=\"", Escape(c.format), "\">\n",
        absl::StrFormat("<circle cx=\"%.1f\" cy=\"%.1f\" r=\"5\" class=\"%s\"><title>%s: %s "
                        "bits/w, rel RMSE %s, SQNR %s dB%s</title></circle>\n",
                        px, py, c.pareto ? "optimal" : "dominated", Escape(c.format),
                        absl::StrFormat("%.4g", c.linear_bits_per_parameter),
                        PercentText(c.relative_rmse()), SqnrText(c.sqnr_db()),
                        kl ? absl::StrFormat(", KL %g", metric(c)) : ""),
        chosen < 2 ? "" : Line(px + 5 * side, py, px + 8 * side, label_y, "leader"),
        Text(px + 9 * side, label_y + 4, label, side > 0 ? "start" : "end"), "</g>\n");
  }
  absl::StrAppend(&svg, "</svg>\n");
  return svg;
}

// The table for device d, then why some candidates cannot fit on it.
std::string DeviceTable(const Plan& plan, size_t d) {
  const SizingOptions& o = plan.options.sizing;
  const Device& device = plan.options.devices[d];
  const bool inference = o.mode == Mode::kInference;
  // The overflow column only when a format overflowed, as in the terminal.
  const bool overflow = PlanAnyOverflow(plan);
  std::string html = absl::StrCat(
      "<h2>", Escape(device.name), "</h2>\n<p>", Escape(device.description), ": ",
      Gb(device.memory_bytes), " GB, ",
      device.bandwidth_bytes_per_s > 0 ? absl::StrCat(TbPerS(device.bandwidth_bytes_per_s), " TB/s")
                                       : "bandwidth unknown",
      "</p>\n<table>\n<tr>");
  std::vector<std::string> headings = {"format",
                                       "bits/w",
                                       "weights GB",
                                       "GB per device",
                                       "fits",
                                       "devices needed",
                                       inference ? "max context (tokens)" : "max seq (tokens)",
                                       inference ? "max sequences" : "max micro-batch",
                                       "decode tok/s per sequence",
                                       "SQNR dB",
                                       "rel RMSE",
                                       "max abs err",
                                       "clipped"};
  if (overflow) headings.push_back("overflow");
  if (plan.eval) {
    for (const char* h : {"mean KL (nats)", "top-1 agreement", "perplexity change"}) {
      headings.push_back(h);
    }
  }
  headings.push_back("Pareto");
  for (const std::string& heading : headings) absl::StrAppend(&html, "<th>", heading, "</th>");
  absl::StrAppend(&html, "</tr>\n");
  for (const PlanCandidate& c : plan.candidates) {
    absl::StrAppend(&html, c.pareto ? "<tr class=\"pareto\">" : "<tr>");
    std::vector<std::string> cells = PlanCells(plan, c, d, Grouped);
    cells.push_back(c.pareto ? "yes" : "");
    for (const std::string& cell : cells) {
      absl::StrAppend(&html, cell == "no" || cell == "never" ? "<td class=\"no\">" : "<td>",
                      Escape(cell), "</td>");
    }
    absl::StrAppend(&html, "</tr>\n");
  }
  absl::StrAppend(&html, "</table>\n");
  for (const auto& [reason, formats] : NoFitReasons(plan, d)) {
    absl::StrAppend(&html, "<p>", Escape(absl::StrJoin(formats, ", ")), ": ", Escape(reason),
                    "</p>\n");
  }
  return html;
}

// The KV study on device d: each weight format with each KV cache format.
std::string KvStudyTable(const Plan& plan, size_t d) {
  std::string html = absl::StrCat("<h3>KV cache formats on ",
                                   Escape(plan.options.devices[d].name), "</h3>\n<table>\n<tr>");
  const std::vector<std::vector<std::string>> rows = KvStudyRows(plan, d, Grouped);
  for (const std::string& heading : rows[0]) {
    absl::StrAppend(&html, "<th>", Escape(heading), "</th>");
  }
  absl::StrAppend(&html, "</tr>\n");
  for (size_t r = 1; r < rows.size(); ++r) {
    const bool pareto = rows[r].back() == "*";
    absl::StrAppend(&html, pareto ? "<tr class=\"pareto\">" : "<tr>");
    for (const std::string& cell : rows[r]) {
      absl::StrAppend(&html, cell == "no" || cell == "none" ? "<td class=\"no\">" : "<td>",
                      Escape(cell == "*" ? "yes" : cell), "</td>");
    }
    absl::StrAppend(&html, "</tr>\n");
  }
  return absl::StrCat(html, "</table>\n");
}

}  // namespace

std::string PlanHtml(const Plan& plan, const std::string& command) {
  const SizingOptions& o = plan.options.sizing;
  const PlanSource& s = plan.source;
  const bool inference = o.mode == Mode::kInference;
  const std::string title =
      Escape(absl::StrCat("lowp plan: ", plan.model.name, ", ", ModeName(o.mode)));
  std::string html = absl::StrCat(
      "<!DOCTYPE html>\n<html xmlns=\"http://www.w3.org/1999/xhtml\" lang=\"en\">\n<head>\n"
      "<meta charset=\"utf-8\"/>\n<title>",
      title, "</title>\n<style>", kStyle, "</style>\n</head>\n<body>\n<h1>", title,
      "</h1>\n<p><code>", Escape(command), "</code></p>\n");
  absl::StrAppend(&html, "<p><b>Job:</b> ", Escape(plan.model.name), " (",
                  Grouped(CountParameters(plan.model).total), " parameters), ",
                  inference ? "context " : "seq ", Grouped(o.seq), " tokens, ",
                  inference ? "batch " : "micro-batch ", o.batch, ", dp ", o.dp, " x tp ", o.tp,
                  " x pp ", o.pp, ", KV cache ", Escape(plan.kv),
                  " for every format (the candidates differ in their weights alone). GB = "
                  "10<sup>9</sup> bytes.</p>\n");
  absl::StrAppend(&html, "<p><b>Accuracy</b> measured on ", s.tensors.size(),
                  s.tensors.size() == 1 ? " tensor (" : " tensors (",
                  Grouped(static_cast<int64_t>(s.elements)), " weights) of ",
                  Escape(absl::StrJoin(s.files, ", ")),
                  s.bundled ? " (the bundled stories260K checkpoint)" : "", ".</p>\n");
  if (s.proxy) {
    absl::StrAppend(&html,
                    "<p class=\"proxy\"><b>The accuracy is a proxy:</b> measured on tensors that "
                    "are not ",
                    Escape(plan.model.name), "'s linear layers (", Escape(s.proxy_reason),
                    "). The error columns and chart say what each format does to them, not to "
                    "the model's own weights.</p>\n");
  }
  if (plan.eval) {
    const PlanEval& e = *plan.eval;
    absl::StrAppend(&html, "<p><b>Outputs</b> measured by lowp eval on ", Escape(e.model),
                    ", tokens ", Escape(e.tokens), " (", Grouped(static_cast<int64_t>(e.positions)),
                    " positions): each format on the linear layers against the float32 model "
                    "(perplexity ", absl::StrFormat("%.4f", e.reference_perplexity), ").</p>\n");
    if (e.proxy) {
      absl::StrAppend(&html, "<p class=\"proxy\"><b>The outputs are a proxy:</b> ",
                      Escape(e.proxy_reason), ".</p>\n");
    }
  }
  const std::string chart_caption =
      plan.eval ? "Mean KL divergence KL(P<sub>float32</sub> || P<sub>format</sub>) of the "
                  "next-token distributions, nats per position. Pareto-optimal: no other format "
                  "is as small (within "
                : "Relative RMSE = ||q - x|| / ||x|| over the measured tensors. Pareto-optimal: "
                  "no other format is as small (within ";
  absl::StrAppend(&html,
                  "<h2>Memory per device</h2>\n<p class=\"caption\">The most loaded device of the "
                  "layout, by component, for each format; the dashed lines are each device's "
                  "capacity (after headroom).</p>\n",
                  MemoryChart(plan),
                  "<h2>Error versus bits per weight</h2>\n<p class=\"caption\">", chart_caption,
                  kParetoSizeTolerance * 100, "%) and as accurate, and better in one.</p>\n",
                  ErrorChart(plan));
  if (plan.kv_study) {
    const PlanKvStudy& k = *plan.kv_study;
    absl::StrAppend(&html, "<p><b>KV cache formats</b>: each format with each of ");
    for (size_t i = 0; i < k.formats.size(); ++i) {
      absl::StrAppend(&html, i ? ", " : "", Escape(k.formats[i].format));
    }
    absl::StrAppend(&html, ", sized on each device (max context at the batch given, max "
                    "sequences at the context given) and measured by lowp eval on ",
                    Escape(k.model), ", tokens ", Escape(k.tokens), " (",
                    Grouped(static_cast<int64_t>(k.positions)), " positions, sequences of ",
                    Grouped(k.context), " tokens); KV alone: the cache's format with float32 "
                    "weights. Pareto on the weights' and the job's KV cache bytes against the "
                    "mean KL.</p>\n");
  }
  for (size_t d = 0; d < plan.options.devices.size(); ++d) {
    absl::StrAppend(&html, DeviceTable(plan, d));
    if (plan.kv_study) absl::StrAppend(&html, KvStudyTable(plan, d));
  }
  absl::StrAppend(
      &html,
      "<h2>Columns</h2>\n<p>bits/w: bits per weight of the linear layers, scales included. "
      "Devices needed: a lower bound, the whole job divided evenly (docs/sizing.md). Decode tok/s: "
      "an upper bound from memory bandwidth, for a job that fits. Clipped: share of weights "
      "clamped by the format; overflow (shown only when some format overflows): turned to inf or "
      "NaN, which makes the error infinite. Rows in bold are "
      "Pareto-optimal.</p>\n</body>\n</html>\n");
  return html;
}

}  // namespace lowp::api
