#include "api/catalog.h"

#include <memory>

#include "api/json.h"

namespace lowp::api {
namespace {

nlohmann::json FormatJson(const Format& f) {
  nlohmann::json j;
  j["name"] = f.name;
  j["aliases"] = f.aliases;
  j["kind"] = f.is_float() ? "float" : "integer";
  j["bits"] = f.bits;
  j["storage_bits"] = f.storage_bits();
  j["signed"] = f.is_signed;
  j["exponent_bits"] = f.exponent_bits;
  j["mantissa_bits"] = f.mantissa_bits;
  j["bias"] = f.bias;
  j["encoding"] = f.encoding_name();
  j["has_infinity"] = f.has_infinity();
  j["has_nan"] = f.has_nan();
  j["has_negative_zero"] = f.has_negative_zero();
  j["has_subnormals"] = f.has_subnormals();
  j["max_finite"] = f.max_finite();
  j["lowest_finite"] = f.lowest_finite();
  j["min_normal"] = f.min_normal();
  j["min_subnormal"] =
      f.has_subnormals() ? nlohmann::json(f.min_subnormal()) : nlohmann::json(nullptr);
  j["epsilon"] = f.epsilon();
  return j;
}

}  // namespace

FormatCatalog Formats() { return {Catalog()}; }

nlohmann::json ToJson(const FormatCatalog& catalog) {
  nlohmann::json all = nlohmann::json::array();
  for (const Format& f : catalog.formats) all.push_back(FormatJson(f));
  return all;
}

SchemeCatalog Schemes() {
  SchemeCatalog catalog;
  for (const SchemeFamily& f : SchemeFamilies()) {
    SchemeCatalog::Entry entry{f, {}};
    for (const std::string& name : f.examples) {
      absl::StatusOr<std::unique_ptr<Scheme>> s = ParseScheme(name);
      entry.bits_4096x4096.emplace_back(
          name, s.ok() ? std::optional<double>((*s)->BitsPerWeight(4096, 4096)) : std::nullopt);
    }
    catalog.families.push_back(std::move(entry));
  }
  return catalog;
}

nlohmann::json ToJson(const SchemeCatalog& catalog) {
  nlohmann::json all = nlohmann::json::array();
  for (const SchemeCatalog::Entry& e : catalog.families) {
    nlohmann::json j;
    j["family"] = e.family.family;
    j["examples"] = e.family.examples;
    j["rule"] = e.family.rule;
    j["options"] = e.family.options;
    nlohmann::json bits = nlohmann::json::object();
    for (const auto& [name, b] : e.bits_4096x4096) {
      if (b) bits[name] = *b;
    }
    j["bits_per_weight_4096x4096"] = bits;
    all.push_back(j);
  }
  return all;
}

DeviceCatalogResult Devices() { return {DeviceCatalog()}; }

nlohmann::json ToJson(const DeviceCatalogResult& catalog) {
  nlohmann::json all = nlohmann::json::array();
  for (const Device& d : catalog.devices) all.push_back(DeviceJson(d));
  return all;
}

}  // namespace lowp::api
