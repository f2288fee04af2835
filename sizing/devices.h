// The accelerator catalog: memory and memory bandwidth per device.
#ifndef LOWP_SIZING_DEVICES_H_
#define LOWP_SIZING_DEVICES_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace lowp {

struct Device {
  std::string name;                  // "h100-sxm", ...
  std::string description;           // "NVIDIA H100 SXM5 80 GB HBM3"
  int64_t memory_bytes = 0;          // the datasheet capacity, GB taken as 10^9 bytes
  double bandwidth_bytes_per_s = 0;  // datasheet peak memory bandwidth; 0 if unknown
  std::string source;                // where the numbers come from
};

// Built-in devices, in display order.
const std::vector<Device>& DeviceCatalog();

// A catalog name (case-insensitive, with aliases such as "h100"), or a
// user-defined device "NAME:MEMORY[:BANDWIDTH]" with units, e.g.
// "mygpu:96GB:4TB/s", "card:24GiB:1008GB/s". Unknown names are
// InvalidArgument listing the catalog.
absl::StatusOr<Device> FindDevice(absl::string_view spec);

// "80GB", "80e9", "24GiB", "512MiB", "1.5TB" -> bytes (GB = 10^9, GiB = 2^30;
// a plain number is bytes). InvalidArgument naming `what` otherwise.
absl::StatusOr<int64_t> ParseBytes(absl::string_view text, absl::string_view what);
// "3.35TB/s", "864GB/s" -> bytes per second.
absl::StatusOr<double> ParseBandwidth(absl::string_view text, absl::string_view what);

}  // namespace lowp

#endif  // LOWP_SIZING_DEVICES_H_
