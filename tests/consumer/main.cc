// Exits 0 when the installed library encodes 448 as fp8_e4m3fn's largest
// code, through the scalar reference and through the SIMD kernels, and
// counts Llama 3.1 8B's parameters.
#include <cstdint>
#include <vector>

#include "formats/format.h"
#include "formats/reference.h"
#include "kernels/convert.h"
#include "sizing/model.h"

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
  return 0;
}
