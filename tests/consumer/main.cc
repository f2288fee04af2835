// Exits 0 when the installed library encodes 448 as fp8_e4m3fn's largest code.
#include "formats/format.h"
#include "formats/reference.h"

int main() {
  const absl::StatusOr<lowp::Format> f = lowp::FindFormat("fp8_e4m3fn");
  return f.ok() && lowp::EncodeFloat32(*f, 448.0f) == 0x7E ? 0 : 1;
}
