// The catalogs: formats, quantization schemes, devices (`lowp formats`,
// `lowp schemes`, `lowp devices`; lowp.formats(), ...).
#ifndef LOWP_API_CATALOG_H_
#define LOWP_API_CATALOG_H_

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "formats/format.h"
#include "nlohmann/json.hpp"
#include "quant/scheme.h"
#include "sizing/devices.h"

namespace lowp::api {

struct FormatCatalog {
  std::vector<Format> formats;  // every built-in format, in catalog order
};
FormatCatalog Formats();
nlohmann::json ToJson(const FormatCatalog& catalog);

struct SchemeCatalog {
  struct Entry {
    SchemeFamily family;
    // Each example name with its bits per weight on a 4096 x 4096 matrix
    // (nullopt for an example that does not parse, which a test forbids).
    std::vector<std::pair<std::string, std::optional<double>>> bits_4096x4096;
  };
  std::vector<Entry> families;
};
SchemeCatalog Schemes();
nlohmann::json ToJson(const SchemeCatalog& catalog);

struct DeviceCatalogResult {
  std::vector<Device> devices;
};
DeviceCatalogResult Devices();
nlohmann::json ToJson(const DeviceCatalogResult& catalog);

}  // namespace lowp::api

#endif  // LOWP_API_CATALOG_H_
