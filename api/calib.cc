#include "api/calib.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "api/inputs.h"
#include "calib/gptq.h"
#include "calib/hessian.h"
#include "formats/option_error.h"
#include "quant/scheme.h"

namespace lowp::api {
namespace {

// A floating 2-D array as float32 rows, or an error on `field`.
absl::StatusOr<std::vector<float>> Rows(const TensorView& t, const std::string& field) {
  if (t.shape.size() != 2 || !IsFloating(t.dtype) || t.dtype == DType::kGgml) {
    return OptionError(field, "want a 2-D floating array");
  }
  std::vector<float> out(static_cast<size_t>(t.elements()));
  if (absl::Status s = ReadAsFloat32(t, 0, out); !s.ok()) return OptionError(field, s.message());
  return out;
}

}  // namespace

absl::StatusOr<GptqArrayResult> GptqArray(const TensorView& weight, const TensorView& inputs,
                                          const std::string& scheme_name,
                                          const GptqArrayOptions& options) {
  if (absl::Status s = CheckThreads(options.threads); !s.ok()) return s;
  if (!(options.damp >= 0 && options.damp < 1e6)) {
    return OptionError("damp", absl::StrCat(options.damp, " is not in [0, 1e6)"));
  }
  absl::StatusOr<std::unique_ptr<Scheme>> scheme = ParseScheme(scheme_name);
  if (!scheme.ok()) return OptionError("scheme", scheme.status().message());
  absl::StatusOr<std::vector<float>> w = Rows(weight, "weight");
  if (!w.ok()) return w.status();
  absl::StatusOr<std::vector<float>> x = Rows(inputs, "inputs");
  if (!x.ok()) return x.status();
  const int64_t rows = weight.shape[0], cols = weight.shape[1];
  if (inputs.shape[1] != cols) {
    return OptionError("inputs", absl::StrCat("rows of ", inputs.shape[1],
                                              " values for a weight of ", cols, " columns"));
  }
  for (float v : *x) {
    if (!std::isfinite(v)) return OptionError("inputs", "not all finite");
  }
  Hessian h(cols);
  h.Add(*x, options.threads);
  TensorContext context;
  if ((*scheme)->NeedsTensorPass()) (*scheme)->Observe(*w, cols, context);
  GptqOptions g;
  g.damp = options.damp;
  g.act_order = options.act_order;
  g.threads = options.threads;
  absl::StatusOr<GptqResult> q =
      Gptq("weight", *w, rows, cols, std::move(h), **scheme, context, g);
  if (!q.ok()) return q.status();
  return GptqArrayResult{std::move(q->values), std::move(q->bytes), std::move(q->order)};
}

}  // namespace lowp::api
