#include "io/scaled_tensors.h"

#include <algorithm>
#include <filesystem>
#include <initializer_list>
#include <map>
#include <memory>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
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

// compressed-tensors: the first config group whose weights are 8-bit floats
// gives the block structure or group size of the FP8 weights.
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
    if (auto bits = weights->find("num_bits");
        bits != weights->end() && bits->is_number_integer() && *bits != 8) {
      continue;  // NVFP4 / MXFP4: io/packed_tensors.h
    }
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

// Optional typed fields of an object: absent or null leaves `out` as it is.
absl::Status OptionalString(const Json& object, const char* key, const std::string& source,
                            const std::string& field, std::string& out) {
  auto it = object.find(key);
  if (it == object.end() || it->is_null()) return absl::OkStatus();
  if (!it->is_string() || it->get_ref<const std::string&>().size() > 256) {
    return FieldError(source, field, "must be a string (of at most 256 bytes)");
  }
  out = it->get<std::string>();
  return absl::OkStatus();
}

absl::Status OptionalBool(const Json& object, const char* key, const std::string& source,
                          const std::string& field, bool& out) {
  auto it = object.find(key);
  if (it == object.end() || it->is_null()) return absl::OkStatus();
  if (!it->is_boolean()) return FieldError(source, field, "must be true or false");
  out = it->get<bool>();
  return absl::OkStatus();
}

// An integer in [low, high]; absent or null leaves `out` as it is.
absl::Status OptionalInteger(const Json& object, const char* key, const std::string& source,
                             const std::string& field, int64_t low, int64_t high, int64_t& out) {
  auto it = object.find(key);
  if (it == object.end() || it->is_null()) return absl::OkStatus();
  if (!it->is_number_integer() || (it->is_number_unsigned() && it->get<uint64_t>() > uint64_t(high)) ||
      it->get<int64_t>() < low || it->get<int64_t>() > high) {
    return FieldError(source, field, absl::StrCat("must be an integer from ", low, " to ", high));
  }
  out = it->get<int64_t>();
  return absl::OkStatus();
}

// `key` or its older spelling `alias` (AutoAWQ's w_bit, q_group_size): an
// integer in [low, high]; both given must agree.
absl::Status IntegerOrAlias(const Json& config, const char* key, const char* alias,
                            const std::string& source, int64_t low, int64_t high, int64_t& out) {
  int64_t a = 0, b = 0;
  const bool has_a = config.contains(key) && !config[key].is_null();
  const bool has_b = config.contains(alias) && !config[alias].is_null();
  if (absl::Status s = OptionalInteger(config, key, source, key, low, high, a); !s.ok()) return s;
  if (absl::Status s = OptionalInteger(config, alias, source, alias, low, high, b); !s.ok()) {
    return s;
  }
  if (has_a && has_b && a != b) {
    return FieldError(source, key, absl::StrCat(a, " disagrees with quantization_config.", alias,
                                                " ", b));
  }
  if (has_a) out = a;
  if (has_b && !has_a) out = b;
  return absl::OkStatus();
}

constexpr int64_t kMaxGroupSize = int64_t{1} << 24;

// bits (or w_bit), one of `allowed`, and group_size (or q_group_size), -1
// (one group) or positive, into q; errors name the field.
absl::Status ReadBitsAndGroup(const Json& config, absl::string_view method,
                              std::initializer_list<int64_t> allowed, absl::string_view spelled,
                              CheckpointQuantization& q) {
  int64_t bits = 0, group = 0;
  if (absl::Status s = IntegerOrAlias(config, "bits", "w_bit", q.source, 1, 64, bits); !s.ok()) {
    return s;
  }
  if (std::find(allowed.begin(), allowed.end(), bits) == allowed.end()) {
    return FieldError(q.source, "bits",
                      bits == 0 ? absl::StrCat("is missing: ", method, " checkpoints have ",
                                               spelled, " bits")
                                : absl::StrCat(bits, ": ", method, " checkpoints have ", spelled,
                                               " bits"));
  }
  if (absl::Status s = IntegerOrAlias(config, "group_size", "q_group_size", q.source, -1,
                                      kMaxGroupSize, group);
      !s.ok()) {
    return s;
  }
  if (group == 0) {
    return FieldError(q.source, "group_size", "must be -1 (one group) or a positive integer");
  }
  q.bits = static_cast<int>(bits);
  q.group_size = group;
  return absl::OkStatus();
}

// quant_method "gptq" (AutoGPTQ, GPTQModel, optimum).
absl::Status ReadGptq(const Json& config, CheckpointQuantization& q) {
  if (absl::Status s = ReadBitsAndGroup(config, "GPTQ", {2, 3, 4, 8}, "2, 3, 4 or 8", q);
      !s.ok()) {
    return s;
  }
  if (absl::Status s = OptionalBool(config, "desc_act", q.source, "desc_act", q.desc_act);
      !s.ok()) {
    return s;
  }
  if (absl::Status s = OptionalBool(config, "sym", q.source, "sym", q.sym); !s.ok()) return s;
  q.checkpoint_format = "gptq";
  if (absl::Status s = OptionalString(config, "checkpoint_format", q.source, "checkpoint_format",
                                      q.checkpoint_format);
      !s.ok()) {
    return s;
  }
  if (q.checkpoint_format != "gptq" && q.checkpoint_format != "gptq_v2") {
    return FieldError(q.source, "checkpoint_format",
                      absl::StrCat("\"", q.checkpoint_format,
                                   "\" is not one lowp reads (it reads \"gptq\" and \"gptq_v2\")"));
  }
  bool marlin = false;
  if (absl::Status s = OptionalBool(config, "is_marlin_format", q.source, "is_marlin_format", marlin);
      !s.ok()) {
    return s;
  }
  if (marlin) return FieldError(q.source, "is_marlin_format", "true: marlin's layout is not read");
  std::string pack_dtype = "int32";
  if (absl::Status s = OptionalString(config, "pack_dtype", q.source, "pack_dtype", pack_dtype);
      !s.ok()) {
    return s;
  }
  if (pack_dtype != "int32") {
    return FieldError(q.source, "pack_dtype",
                      absl::StrCat("\"", pack_dtype, "\": only int32 words are read"));
  }
  return absl::OkStatus();
}

// quant_method "awq" (AutoAWQ): the GEMM layout only.
absl::Status ReadAwq(const Json& config, CheckpointQuantization& q) {
  if (absl::Status s = ReadBitsAndGroup(config, "AWQ", {4}, "4", q); !s.ok()) return s;
  q.version = "gemm";
  if (absl::Status s = OptionalString(config, "version", q.source, "version", q.version);
      !s.ok()) {
    return s;
  }
  if (absl::AsciiStrToLower(q.version) != "gemm") {
    return FieldError(q.source, "version",
                      absl::StrCat("\"", q.version,
                                   "\" is not a layout lowp reads (it reads AutoAWQ's \"gemm\")"));
  }
  if (absl::Status s = OptionalBool(config, "zero_point", q.source, "zero_point", q.zero_point);
      !s.ok()) {
    return s;
  }
  if (!q.zero_point) {
    return FieldError(q.source, "zero_point",
                      "false: AutoAWQ's GEMM layout always stores zero points");
  }
  std::string backend = "autoawq";
  if (absl::Status s = OptionalString(config, "backend", q.source, "backend", backend); !s.ok()) {
    return s;
  }
  if (absl::AsciiStrToLower(backend) != "autoawq") {
    return FieldError(q.source, "backend",
                      absl::StrCat("\"", backend, "\": only AutoAWQ's packing is read"));
  }
  return absl::OkStatus();
}

constexpr size_t kMaxConfigGroups = 1024;
constexpr size_t kMaxIgnored = size_t{1} << 16;

// compressed-tensors: each config group's format and weights (for the
// packed formats), the top-level format and the ignore list.
absl::Status ReadCompressedTensorsGroups(const Json& config, CheckpointQuantization& q) {
  if (absl::Status s = OptionalString(config, "format", q.source, "format", q.format); !s.ok()) {
    return s;
  }
  if (auto ignore = config.find("ignore"); ignore != config.end() && !ignore->is_null()) {
    if (!ignore->is_array() || ignore->size() > kMaxIgnored) {
      return FieldError(q.source, "ignore", "must be a list of module names");
    }
    for (const Json& name : *ignore) {
      if (!name.is_string()) return FieldError(q.source, "ignore", "must be a list of strings");
      q.ignore.push_back(name.get<std::string>());
    }
  }
  auto groups = config.find("config_groups");
  if (groups == config.end() || groups->is_null()) return absl::OkStatus();
  if (!groups->is_object()) return FieldError(q.source, "config_groups", "must be an object");
  if (groups->size() > kMaxConfigGroups) {
    return FieldError(q.source, "config_groups", "holds more than 1024 groups");
  }
  for (const auto& [name, group] : groups->items()) {
    const std::string field = absl::StrCat("config_groups.", name);
    if (!group.is_object()) return FieldError(q.source, field, "must be an object");
    CompressedTensorsGroup g;
    g.name = name;
    g.format = q.format;
    if (absl::Status s = OptionalString(group, "format", q.source, field + ".format", g.format);
        !s.ok()) {
      return s;
    }
    auto weights = group.find("weights");
    if (weights == group.end() || weights->is_null()) continue;  // activations only
    if (!weights->is_object()) return FieldError(q.source, field + ".weights", "must be an object");
    const std::string w = field + ".weights";
    int64_t bits = 0, size = 0;
    if (absl::Status s = OptionalInteger(*weights, "num_bits", q.source, w + ".num_bits", 1, 64, bits);
        !s.ok()) {
      return s;
    }
    if (absl::Status s = OptionalInteger(*weights, "group_size", q.source, w + ".group_size", -1,
                                         kMaxGroupSize, size);
        !s.ok()) {
      return s;
    }
    g.num_bits = static_cast<int>(bits);
    g.group_size = size;
    for (const auto& [key, out] : {std::pair<const char*, std::string*>{"type", &g.type},
                                   {"strategy", &g.strategy}}) {
      if (absl::Status s = OptionalString(*weights, key, q.source, absl::StrCat(w, ".", key), *out);
          !s.ok()) {
        return s;
      }
    }
    if (absl::Status s = OptionalBool(*weights, "symmetric", q.source, w + ".symmetric",
                                      g.symmetric);
        !s.ok()) {
      return s;
    }
    q.groups.push_back(std::move(g));
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
  const std::string source =
      (std::filesystem::path(directory.empty() ? "." : directory) / "config.json").string();
  std::error_code ec;
  if (!std::filesystem::exists(source, ec)) {
    CheckpointQuantization q;
    q.source = source;
    return q;
  }
  absl::StatusOr<std::string> text = ReadRegularFile(source, kMaxConfigBytes);
  if (!text.ok()) return text.status();
  return ParseCheckpointQuantization(*text, source);
}

absl::StatusOr<CheckpointQuantization> ParseCheckpointQuantization(absl::string_view text,
                                                                   const std::string& source) {
  CheckpointQuantization q;
  q.source = source;
  absl::StatusOr<Json> json = ParseStrictJson(text, q.source);
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
    if (absl::Status s = ReadCompressedTensorsGroups(*config, q); !s.ok()) return s;
  } else if (q.method == "gptq") {
    if (absl::Status s = ReadGptq(*config, q); !s.ok()) return s;
  } else if (q.method == "awq") {
    if (absl::Status s = ReadAwq(*config, q); !s.ok()) return s;
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

void ReplaceParts(std::vector<TensorView>& tensors,
                  std::vector<std::pair<size_t, TensorView>> composed,
                  const std::vector<bool>& consumed) {
  std::vector<TensorView> kept;
  kept.reserve(tensors.size());
  size_t next = 0;
  for (size_t i = 0; i < tensors.size(); ++i) {
    if (next < composed.size() && composed[next].first == i) {
      kept.push_back(std::move(composed[next++].second));
    } else if (!consumed[i]) {
      kept.push_back(std::move(tensors[i]));
    }
  }
  tensors = std::move(kept);
}

absl::Status AttachMxfp4Blocks(std::vector<TensorView>& tensors,
                               const CheckpointQuantization& quantization) {
  if (quantization.method != "mxfp4") return absl::OkStatus();
  std::map<std::string, size_t> index;
  for (size_t i = 0; i < tensors.size(); ++i) index.emplace(tensors[i].name, i);
  std::vector<bool> consumed(tensors.size(), false);
  std::vector<std::pair<size_t, TensorView>> composed;  // at the blocks' place
  for (size_t i = 0; i < tensors.size(); ++i) {
    const TensorView& blocks = tensors[i];
    if (!absl::EndsWith(blocks.name, "_blocks")) continue;
    const std::string name = blocks.name.substr(0, blocks.name.size() - 7);
    const auto found = index.find(name + "_scales");
    const size_t rank = blocks.shape.size();
    const auto fail = [&](absl::string_view why) {
      return absl::InvalidArgumentError(absl::StrCat(blocks.file, ": tensor \"", blocks.name, "\" ",
                                                     ShapeText(blocks.shape), " ", blocks.type_name(),
                                                     ": ", why));
    };
    if (blocks.dtype != DType::kU8 || rank < 2 || blocks.shape[rank - 1] != 16) {
      return fail(absl::StrCat(quantization.source,
                               " declares quant_method \"mxfp4\", whose blocks are U8 [..., "
                               "groups, 16]: 32 FP4 codes per group"));
    }
    if (found == index.end()) return fail(absl::StrCat("has no scales ", name, "_scales"));
    const TensorView& scale = tensors[found->second];
    const std::vector<int64_t> want(blocks.shape.begin(), blocks.shape.end() - 1);
    if (scale.dtype != DType::kU8 || scale.shape != want) {
      return fail(absl::StrCat("its scales ", scale.name, " are ", ShapeText(scale.shape), " ",
                               scale.type_name(), ", not U8 ", ShapeText(want),
                               " (one E8M0 exponent per group)"));
    }
    TensorView weight = blocks;
    weight.name = name;
    weight.dtype = DType::kF4;
    weight.shape = want;
    weight.shape.back() *= 32;
    auto scales = std::make_shared<TensorScales>();
    scales->name = scale.name;
    scales->dtype = DType::kF8E8M0;
    scales->shape = scale.shape;
    scales->bytes = scale.bytes;
    scales->block_cols = 32;
    scales->matrix_rows = rank >= 3 ? blocks.shape[rank - 3] : 1;
    scales->layout = "mxfp4";
    weight.scales = std::move(scales);
    composed.emplace_back(i, std::move(weight));
    consumed[i] = consumed[found->second] = true;
  }
  ReplaceParts(tensors, std::move(composed), consumed);
  return absl::OkStatus();
}

}  // namespace lowp
