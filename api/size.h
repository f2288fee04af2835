// The memory model: bytes per component and device for one job (`lowp
// size`, lowp.size) and per weight format (`lowp size --compare-formats`,
// lowp.size(compare_formats=True)).
#ifndef LOWP_API_SIZE_H_
#define LOWP_API_SIZE_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"
#include "sizing/devices.h"
#include "sizing/memory.h"
#include "model/config.h"

namespace lowp::api {

struct SizeOptions {
  std::string model;        // a preset (lowp size --help) or a config.json path
  SizingOptions sizing;     // the job
  std::string device = "h100-sxm";  // a catalog name or NAME:MEMORY[:BANDWIDTH]
};

// Errors name the field: model, device, seq, tp, ...
absl::StatusOr<SizingReport> Size(const SizeOptions& options);
nlohmann::json ToJson(const SizingReport& report);

struct CompareFormatsOptions {
  SizeOptions size;  // size.sizing.weights must be empty: each row sets it
  std::vector<std::string> formats;  // empty takes DefaultCompareFormats()
};

struct FormatComparison {
  ModelConfig model;
  SizingOptions sizing;
  Device device;
  std::vector<FormatRow> rows;  // one per format, in order
};

absl::StatusOr<FormatComparison> CompareFormats(const CompareFormatsOptions& options);
nlohmann::json ToJson(const FormatComparison& comparison);

}  // namespace lowp::api

#endif  // LOWP_API_SIZE_H_
