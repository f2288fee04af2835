// Exits 0 when the installed library encodes 448 as fp8_e4m3fn's largest
// code, through the scalar reference and through the SIMD kernels, counts
// Llama 3.1 8B's parameters, and measures int4-g128 on the bundled checkpoint
// through the API (api/quant.h), printing its SQNR.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <vector>

#include "api/quant.h"
#include "formats/format.h"
#include "formats/reference.h"
#include "io/bundled.h"
#include "kernels/convert.h"
#include "model/config.h"

int main() {
  const absl::StatusOr<lowp::Format> f = lowp::FindFormat("fp8_e4m3fn");
  if (!f.ok() || lowp::EncodeFloat32(*f, 448.0f) != 0x7E) return 1;
  const std::vector<float> in(100, 448.0f);
  std::vector<uint8_t> out(in.size());
  if (!lowp::EncodeArray(*f, in, out).ok()) return 1;
  for (uint8_t code : out) {
    if (code != 0x7E) return 1;
  }
  const absl::StatusOr<lowp::ModelConfig> model = lowp::FindModel("llama-3.1-8b");
  if (!model.ok() || lowp::CountParameters(*model).total != 8'030'261'248) return 1;

  const absl::StatusOr<std::string> checkpoint = lowp::BundledCheckpoint();
  if (!checkpoint.ok()) return 2;
  lowp::api::QuantErrorOptions options;
  options.inputs.files = {*checkpoint};
  options.schemes = {"int4-g128"};
  options.summary = true;
  const absl::StatusOr<lowp::api::QuantErrorResult> r = lowp::api::QuantError(options);
  if (!r.ok() || r->aggregates.size() != 1) return 3;
  const double sqnr = r->aggregates[0].sqnr_db();
  std::printf("%s on %s: SQNR %.2f dB over %llu weights\n", r->aggregates[0].scheme.c_str(),
              checkpoint->c_str(), sqnr,
              static_cast<unsigned long long>(r->aggregates[0].elements));
  return std::isfinite(sqnr) && sqnr > 10 ? 0 : 4;
}
