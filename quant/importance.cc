#include "quant/importance.h"

#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "formats/option_error.h"
#include "io/gguf_names.h"

namespace lowp {
namespace {

// Mixtral's and Qwen3-MoE's per-expert matrices by Hugging Face's names
// ("model.layers.3.block_sparse_moe.experts.5.w2.weight",
// "model.layers.3.mlp.experts.5.down_proj.weight") as the merged
// entry llama.cpp's imatrix keeps ("blk.3.ffn_down_exps.weight") and the
// expert's index; false for other names.
bool MergedExpert(absl::string_view name, std::string& merged, int64_t& expert) {
  absl::string_view rest = name;
  if (!absl::ConsumePrefix(&rest, "model.layers.")) return false;
  const size_t dot = rest.find('.');
  int64_t layer = 0;
  if (dot == absl::string_view::npos || !absl::SimpleAtoi(rest.substr(0, dot), &layer)) {
    return false;
  }
  rest.remove_prefix(dot + 1);
  if (!absl::ConsumePrefix(&rest, "block_sparse_moe.experts.") &&
      !absl::ConsumePrefix(&rest, "mlp.experts.")) {
    return false;
  }
  const size_t dot2 = rest.find('.');
  if (dot2 == absl::string_view::npos || !absl::SimpleAtoi(rest.substr(0, dot2), &expert)) {
    return false;
  }
  rest.remove_prefix(dot2 + 1);
  const char* which = rest == "w1.weight" || rest == "gate_proj.weight" ? "ffn_gate_exps"
                      : rest == "w3.weight" || rest == "up_proj.weight" ? "ffn_up_exps"
                      : rest == "w2.weight" || rest == "down_proj.weight" ? "ffn_down_exps"
                                                                          : nullptr;
  if (which == nullptr) return false;
  merged = absl::StrCat("blk.", layer, ".", which, ".weight");
  return true;
}

}  // namespace

ImportanceMap ImportanceMap::FromImatrix(const Imatrix& imatrix, std::string source) {
  ImportanceMap map;
  map.source_ = std::move(source);
  for (const auto& [name, e] : imatrix.entries()) {
    auto weights = std::make_shared<std::vector<float>>(e.Values());
    Entry entry;
    entry.columns = e.columns;
    entry.matrices = e.matrices;
    entry.weights = std::move(weights);
    map.entries_.emplace(e.name, std::move(entry));
  }
  return map;
}

ImportanceMap ImportanceMap::ForTensor(const std::string& name, std::vector<float> weights) {
  ImportanceMap map;
  map.source_ = "the importance given";
  Entry entry;
  entry.columns = static_cast<int64_t>(weights.size());
  entry.matrices = 1;
  entry.weights = std::make_shared<const std::vector<float>>(std::move(weights));
  map.entries_.emplace(name, std::move(entry));
  return map;
}

const ImportanceMap::Entry* ImportanceMap::Find(const std::string& name) const {
  if (auto it = entries_.find(name); it != entries_.end()) return &it->second;
  std::optional<std::string> other = LlamaCppName(name);
  if (!other.has_value()) other = HuggingFaceName(name);
  if (other.has_value()) {
    if (auto it = entries_.find(*other); it != entries_.end()) return &it->second;
  }
  return nullptr;
}

absl::Status ImportanceMap::Fill(const TensorView& tensor, TensorContext& context) const {
  const int64_t cols = tensor.cols();
  const Entry* e = Find(tensor.name);
  int64_t expert = -1;
  std::string merged;
  if (e == nullptr && MergedExpert(tensor.name, merged, expert)) {
    auto it = entries_.find(merged);
    if (it != entries_.end()) e = &it->second;
    if (e != nullptr && expert >= e->matrices) {
      return absl::InvalidArgumentError(absl::StrCat(
          "tensor '", tensor.name, "' is expert ", expert, " but imatrix entry '", merged,
          "' of ", source_, " has ", e->matrices, " experts"));
    }
  }
  if (e == nullptr) return absl::OkStatus();
  if (e->columns != cols) {
    return absl::InvalidArgumentError(
        absl::StrCat("tensor '", tensor.name, "' has ", cols, " columns but its imatrix entry in ",
                     source_, " has ", e->columns));
  }
  if (expert >= 0) {
    // One expert's vector out of the merged entry.
    const size_t at = static_cast<size_t>(expert * cols);
    context.importance = std::make_shared<const std::vector<float>>(
        e->weights->begin() + static_cast<ptrdiff_t>(at),
        e->weights->begin() + static_cast<ptrdiff_t>(at + static_cast<size_t>(cols)));
    context.rows_per_matrix = 0;
    return absl::OkStatus();
  }
  if (e->matrices == 1) {
    context.importance = e->weights;
    context.rows_per_matrix = 0;
    return absl::OkStatus();
  }
  // A merged experts tensor [experts, rows, cols].
  if (tensor.shape.size() != 3 || tensor.shape[0] != e->matrices) {
    return absl::InvalidArgumentError(absl::StrCat(
        "tensor '", tensor.name, "' is not ", e->matrices, " matrices, as its imatrix entry in ",
        source_, " has"));
  }
  context.importance = e->weights;
  context.rows_per_matrix = tensor.shape[1];
  return absl::OkStatus();
}

std::vector<std::string> ImportanceMap::Names() const {
  std::vector<std::string> names;
  for (const auto& [name, entry] : entries_) names.push_back(name);
  return names;
}

absl::Status CheckImportance(const Scheme& scheme, const TensorView& tensor,
                             const TensorContext& context) {
  if (context.importance != nullptr || !scheme.NeedsImportance(tensor.cols())) {
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(
      absl::StrCat("scheme ", scheme.name(), " needs an importance matrix (--imatrix) for tensor '",
                   tensor.name, "': ggml's quantizer does not run without one"));
}

absl::Status CheckImportanceUsed(const ImportanceMap* importance,
                                 std::span<const QuantizedTensor> quantized,
                                 absl::string_view why_none) {
  if (importance == nullptr) return absl::OkStatus();
  bool any_scheme = false;
  std::vector<std::string> weighed;  // tensors a scheme would weigh
  for (const QuantizedTensor& q : quantized) {
    if (!q.scheme->UsesImportance(q.tensor->cols())) continue;
    any_scheme = true;
    TensorContext context;
    if (absl::Status s = importance->Fill(*q.tensor, context); !s.ok()) {
      return OptionError("imatrix", s.message());  // an entry that does not fit the tensor
    }
    if (context.importance != nullptr) return absl::OkStatus();
    if (weighed.size() < 3) weighed.push_back(q.tensor->name);
  }
  const std::string file = importance->source();
  if (quantized.empty()) {
    return OptionError("imatrix", absl::StrCat(file, ": changes nothing: nothing here is quantized",
                                               why_none.empty() ? "" : " (", why_none,
                                               why_none.empty() ? "" : ")"));
  }
  if (!any_scheme) {
    return OptionError(
        "imatrix",
        absl::StrCat(file, ": changes nothing: no scheme here uses importance weights (llama.cpp's "
                     "types do, but for q8_0, mxfp4 and nvfp4)"));
  }
  std::vector<std::string> names = importance->Names();
  const size_t entries = names.size();
  if (names.size() > 3) names.resize(3);
  return OptionError(
      "imatrix",
      absl::StrCat(file, ": changes nothing: none of its ", entries,
                   " entries is for a tensor quantized here (its entries: ",
                   entries == 0 ? "none" : absl::StrJoin(names, ", "), entries > 3 ? ", ..." : "",
                   "; quantized with a scheme that would use one: ", absl::StrJoin(weighed, ", "),
                   ", ...)"));
}

}  // namespace lowp
