// Exits 0 when the installed library encodes 448 as fp8_e4m3fn's largest
// code, through the scalar reference and through the SIMD kernels.
#include <cstdint>
#include <vector>

#include "formats/format.h"
#include "formats/reference.h"
#include "kernels/convert.h"

int main() {
  const absl::StatusOr<lowp::Format> f = lowp::FindFormat("fp8_e4m3fn");
  if (!f.ok() || lowp::EncodeFloat32(*f, 448.0f) != 0x7E) return 1;
  const std::vector<float> in(100, 448.0f);
  std::vector<uint8_t> out(in.size());
  if (!lowp::EncodeArray(*f, in, out).ok()) return 1;
  for (uint8_t code : out) {
    if (code != 0x7E) return 1;
  }
  return 0;
}
