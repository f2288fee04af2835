#include "io/scaled_tensors.h"

#include <algorithm>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "io/mapped_file.h"
#include "io/strict_json.h"

namespace lowp {
namespace {

using Json = nlohmann::ordered_json;

constexpr uint64_t kMaxConfigBytes = uint64_t{16} << 20;  // as model/config_json.cc
constexpr int64_t kMaxBlockSide = int64_t{1} << 20;

absl::Status FieldError(const std::string& source, absl::string_view field,
                        absl::string_view why) {
  return absl::InvalidArgumentError(
      absl::StrCat(source, ": quantization_config.", field, " ", why));
}

// A positive integer of at most kMaxBlockSide.
absl::StatusOr<int64_t> Side(const Json& value, const std::string& source,
                             absl::string_view field) {
  if (!value.is_number_integer() || value.get<int64_t>() < 1 ||
      value.get<int64_t>() > kMaxBlockSide) {
    return FieldError(source, field, "must hold positive integers up to 1048576");
  }
  return value.get<int64_t>();
}

// [R, C]: two sides.
absl::Status ReadBlock(const Json& value, const std::string& source, absl::string_view field,
                       CheckpointQuantization& q) {
  if (!value.is_array() || value.size() != 2) {
    return FieldError(source, field, "must be a list of two integers ([128, 128])");
  }
  absl::StatusOr<int64_t> rows = Side(value[0], source, field);
  if (!rows.ok()) return rows.status();
  absl::StatusOr<int64_t> cols = Side(value[1], source, field);
  if (!cols.ok()) return cols.status();
  q.block_rows = *rows;
  q.block_cols = *cols;
  return absl::OkStatus();
}

// compressed-tensors: the first config group whose weights are floats gives
// the block structure or group size.
absl::Status ReadCompressedTensors(const Json& config, CheckpointQuantization& q) {
  auto groups = config.find("config_groups");
  if (groups == config.end() || groups->is_null()) return absl::OkStatus();
  if (!groups->is_object()) return FieldError(q.source, "config_groups", "must be an object");
  for (const auto& [name, group] : groups->items()) {
    if (!group.is_object()) continue;
    auto weights = group.find("weights");
    if (weights == group.end() || !weights->is_object()) continue;
    auto type = weights->find("type");
    if (type == weights->end() || *type != "float") continue;
    const std::string field = absl::StrCat("config_groups.", name, ".weights");
    if (auto block = weights->find("block_structure");
        block != weights->end() && !block->is_null()) {
      if (absl::Status s = ReadBlock(*block, q.source, field + ".block_structure", q); !s.ok()) {
        return s;
      }
    }
    if (auto size = weights->find("group_size"); size != weights->end() && !size->is_null()) {
      absl::StatusOr<int64_t> g = Side(*size, q.source, field + ".group_size");
      if (!g.ok()) return g.status();
      q.group = *g;
    }
    return absl::OkStatus();
  }
  return absl::OkStatus();
}

std::string ShapeText(const std::vector<int64_t>& shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ", "), "]");
}

bool IsFp8(DType dtype) { return dtype == DType::kF8E4M3 || dtype == DType::kF8E5M2; }

// A layout a scale tensor may have for its weight: the shape it then has.
struct Candidate {
  std::vector<int64_t> shape;
  int64_t block_rows, block_cols;
  std::string layout;
};

}  // namespace

bool CheckpointQuantization::scaled_fp8() const {
  return method == "fp8" || method == "compressed-tensors" || method == "modelopt";
}

absl::StatusOr<CheckpointQuantization> ReadCheckpointQuantization(const std::string& directory) {
  CheckpointQuantization q;
  q.source = (std::filesystem::path(directory.empty() ? "." : directory) / "config.json").string();
  std::error_code ec;
  if (!std::filesystem::exists(q.source, ec)) return q;
  absl::StatusOr<std::string> text = ReadRegularFile(q.source, kMaxConfigBytes);
  if (!text.ok()) return text.status();
  absl::StatusOr<Json> json = ParseStrictJson(*text, q.source);
  if (!json.ok()) return json.status();
  if (!json->is_object()) {
    return absl::InvalidArgumentError(absl::StrCat(q.source, ": not a JSON object"));
  }
  auto config = json->find("quantization_config");
  if (config == json->end() || config->is_null()) return q;
  if (!config->is_object()) {
    return absl::InvalidArgumentError(
        absl::StrCat(q.source, ": quantization_config must be an object"));
  }
  auto method = config->find("quant_method");
  if (method == config->end() || !method->is_string()) {
    return FieldError(q.source, "quant_method", "must be a string");
  }
  q.method = method->get<std::string>();
  if (q.method == "fp8") {
    if (auto block = config->find("weight_block_size");
        block != config->end() && !block->is_null()) {
      if (absl::Status s = ReadBlock(*block, q.source, "weight_block_size", q); !s.ok()) return s;
    }
  } else if (q.method == "compressed-tensors") {
    if (absl::Status s = ReadCompressedTensors(*config, q); !s.ok()) return s;
  }
  return q;
}

absl::Status AttachScales(std::vector<TensorView>& tensors,
                          const CheckpointQuantization& quantization) {
  std::map<std::string, size_t> index;
  for (size_t i = 0; i < tensors.size(); ++i) index.emplace(tensors[i].name, i);
  std::vector<bool> consumed(tensors.size(), false);
  for (TensorView& weight : tensors) {
    if (!IsFp8(weight.dtype)) continue;
    const auto inv = index.find(weight.name + "_scale_inv");
    const auto plain = index.find(weight.name + "_scale");
    const auto fail = [&](const TensorView& scale, absl::string_view why) {
      return absl::InvalidArgumentError(absl::StrCat(weight.file, ": tensor \"", scale.name,
                                                     "\", the scales of \"", weight.name,
                                                     "\" ", ShapeText(weight.shape), ": ", why));
    };
    if (inv != index.end() && plain != index.end()) {
      return fail(tensors[plain->second],
                  absl::StrCat("\"", weight.name, "\" has both ", weight.name, "_scale_inv and ",
                               weight.name, "_scale; which one scales it is unclear"));
    }
    if (inv == index.end() && plain == index.end()) {
      if (quantization.scaled_fp8() && absl::EndsWith(weight.name, "weight")) {
        return absl::InvalidArgumentError(absl::StrCat(
            weight.file, ": tensor \"", weight.name, "\" is ", DTypeName(weight.dtype),
            " without a scale tensor (", weight.name, "_scale_inv or ", weight.name,
            "_scale), but ", quantization.source, " declares quant_method \"",
            quantization.method, "\": its values cannot be read"));
      }
      continue;
    }
    const bool is_inverse = inv != index.end();
    const size_t at = is_inverse ? inv->second : plain->second;
    const TensorView& scale = tensors[at];
    if (scale.dtype != DType::kF32 && scale.dtype != DType::kBF16 &&
        scale.dtype != DType::kF16) {
      return fail(scale, absl::StrCat("a scale tensor must be F32, BF16 or F16, not ",
                                      scale.type_name()));
    }
    // The weight as a stack of matrices [lead..., out, in].
    const size_t rank = weight.shape.size();
    const int64_t in = rank >= 1 ? weight.shape[rank - 1] : 1;
    const int64_t out = rank >= 2 ? weight.shape[rank - 2] : 1;
    const std::vector<int64_t> lead(weight.shape.begin(),
                                    weight.shape.begin() + (rank >= 2 ? rank - 2 : 0));
    const int64_t rows = weight.rows();
    auto blocks = [&](int64_t r, int64_t c, std::string layout) {
      r = std::max<int64_t>(1, r);
      c = std::max<int64_t>(1, c);
      Candidate cand{lead, r, c, std::move(layout)};
      cand.shape.push_back((out + r - 1) / r);
      cand.shape.push_back((in + c - 1) / c);
      return cand;
    };
    std::vector<Candidate> candidates;
    if (is_inverse || quantization.block_rows > 0) {
      const int64_t r = quantization.block_rows > 0 ? quantization.block_rows : 128;
      const int64_t c = quantization.block_cols > 0 ? quantization.block_cols : 128;
      candidates.push_back(blocks(r, c, absl::StrCat("b", r, "x", c)));
    }
    if (!is_inverse) {
      candidates.push_back(blocks(1, in, "channel"));
      Candidate flat = candidates.back();
      flat.shape.pop_back();  // [out] as well as [out, 1]
      candidates.push_back(std::move(flat));
      if (quantization.group > 0) {
        candidates.push_back(
            blocks(1, quantization.group, absl::StrCat("g", quantization.group)));
      }
    }
    auto scales = std::make_shared<TensorScales>();
    scales->name = scale.name;
    scales->dtype = scale.dtype;
    scales->shape = scale.shape;
    scales->bytes = scale.bytes;
    scales->matrix_rows = std::max<int64_t>(1, out);
    const Candidate* found = nullptr;
    for (const Candidate& cand : candidates) {
      if (cand.shape == scale.shape) {
        found = &cand;
        break;
      }
    }
    if (found != nullptr) {
      scales->block_rows = found->block_rows;
      scales->block_cols = std::max<int64_t>(1, found->block_cols);
      scales->layout = found->layout;
    } else if (!is_inverse && scale.elements() == 1) {  // one scale for the whole tensor
      scales->matrix_rows = std::max<int64_t>(1, rows);
      scales->block_rows = std::max<int64_t>(1, rows);
      scales->block_cols = std::max<int64_t>(1, in);
      scales->layout = "tensor";
    } else {
      std::vector<std::string> wanted;
      for (const Candidate& cand : candidates) {
        wanted.push_back(absl::StrCat(ShapeText(cand.shape), " (", cand.layout, ")"));
      }
      if (!is_inverse) wanted.push_back("[] or [1] (tensor)");
      return fail(scale, absl::StrCat("its shape ", ShapeText(scale.shape),
                                      " fits no layout: expected ",
                                      absl::StrJoin(wanted, ", ")));
    }
    weight.scales = std::move(scales);
    consumed[at] = true;
  }
  std::vector<TensorView> kept;
  kept.reserve(tensors.size());
  for (size_t i = 0; i < tensors.size(); ++i) {
    if (!consumed[i]) kept.push_back(std::move(tensors[i]));
  }
  tensors = std::move(kept);
  return absl::OkStatus();
}

}  // namespace lowp
