#include "api/size.h"

#include "api/json.h"
#include "formats/option_error.h"

namespace lowp::api {
namespace {

absl::StatusOr<ModelConfig> Model(const std::string& name) {
  absl::StatusOr<ModelConfig> model = FindModel(name);
  if (!model.ok()) return OptionError("model", model.status().message());
  return model;
}

absl::StatusOr<Device> DeviceNamed(const std::string& name) {
  absl::StatusOr<Device> device = FindDevice(name);
  if (!device.ok()) return OptionError("device", device.status().message());
  return device;
}

}  // namespace

absl::StatusOr<SizingReport> Size(const SizeOptions& o) {
  absl::StatusOr<ModelConfig> model = Model(o.model);
  if (!model.ok()) return model.status();
  absl::StatusOr<Device> device = DeviceNamed(o.device);
  if (!device.ok()) return device.status();
  return EstimateMemory(*model, o.sizing, *device);
}

nlohmann::json ToJson(const SizingReport& r) {
  nlohmann::json j;
  j["model"] = ModelJson(r.model);
  nlohmann::json p;
  p["embedding"] = r.parameters.embedding;
  p["attention"] = r.parameters.attention;
  p["mlp"] = r.parameters.mlp;
  p["router"] = r.parameters.router;
  p["norms"] = r.parameters.norms;
  p["lm_head"] = r.parameters.lm_head;
  p["total"] = r.parameters.total;
  p["active"] = r.parameters.active;
  j["parameters"] = p;
  j["trainable_parameters"] = r.trainable_parameters;
  j["options"] = SizingOptionsJson(r.options);
  j["device"] = DeviceJson(r.device);
  j["weight_bits_per_parameter"] = JsonNumber(r.weight_bits_per_parameter);
  j["linear_bits_per_parameter"] = JsonNumber(r.linear_bits_per_parameter);
  j["whole"] = BytesJson(r.whole);
  j["per_device"] = BytesJson(r.per_device);
  j["pipeline_stage"] = r.pipeline_stage;
  j["host_bytes_per_device"] = r.host_bytes_per_device;
  j["capacity_bytes"] = r.capacity_bytes;
  j["usable_bytes"] = r.usable_bytes;
  j["fits"] = r.fits;
  j["devices_in_layout"] = r.devices_in_layout;
  j["devices_for_states_exact"] = JsonNumber(r.devices_for_states_exact);
  j["devices_for_states"] = r.devices_for_states;
  j["devices_needed_exact"] = JsonNumber(r.devices_needed_exact);
  j["devices_needed"] = r.devices_needed;
  j["max_seq"] = r.max_seq;
  j["max_batch"] = r.max_batch;
  j["bytes_read_per_step"] = r.bytes_read_per_step;
  j["decode_tokens_per_s_per_sequence"] = JsonNumber(r.decode_tokens_per_s_per_sequence);
  j["decode_tokens_per_s"] = JsonNumber(r.decode_tokens_per_s);
  return j;
}

absl::StatusOr<FormatComparison> CompareFormats(const CompareFormatsOptions& o) {
  if (!o.size.sizing.weights.empty()) {
    return OptionError("weights and compare_formats",
                       "exclude each other (`formats` lists the weights' formats to compare)",
                       " ");
  }
  FormatComparison c;
  absl::StatusOr<ModelConfig> model = Model(o.size.model);
  if (!model.ok()) return model.status();
  absl::StatusOr<Device> device = DeviceNamed(o.size.device);
  if (!device.ok()) return device.status();
  absl::StatusOr<std::vector<FormatRow>> rows = lowp::CompareFormats(
      *model, o.size.sizing, *device, o.formats.empty() ? DefaultCompareFormats() : o.formats);
  if (!rows.ok()) return rows.status();
  c.model = *std::move(model);
  c.sizing = o.size.sizing;
  c.device = *std::move(device);
  c.rows = *std::move(rows);
  return c;
}

nlohmann::json ToJson(const FormatComparison& c) {
  nlohmann::json j;
  j["model"] = c.model.name;
  j["mode"] = std::string(ModeName(c.sizing.mode));
  j["device"] = DeviceJson(c.device);
  j["seq"] = c.sizing.seq;
  j["batch"] = c.sizing.batch;
  j["dp"] = c.sizing.dp;
  j["tp"] = c.sizing.tp;
  j["pp"] = c.sizing.pp;
  j["rows"] = nlohmann::json::array();
  for (const FormatRow& r : c.rows) {
    nlohmann::json row;
    row["format"] = r.format;
    row["linear_bits_per_parameter"] = JsonNumber(r.linear_bits_per_parameter);
    row["weight_bytes"] = r.weight_bytes;
    row["saving_vs_bf16"] = JsonNumber(r.saving_vs_bf16);
    row["per_device_bytes"] = r.per_device_bytes;
    row["fits"] = r.fits;
    row["devices_needed"] = r.devices_needed;
    row["max_seq"] = r.max_seq;
    row["decode_tokens_per_s_per_sequence"] = JsonNumber(r.decode_tokens_per_s_per_sequence);
    j["rows"].push_back(row);
  }
  return j;
}

}  // namespace lowp::api
