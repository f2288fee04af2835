#include "api/imatrix.h"

#include <algorithm>
#include <limits>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "api/inputs.h"
#include "api/json.h"
#include "api/quant.h"
#include "formats/option_error.h"
#include "eval/imatrix.h"
#include "model/checkpoint.h"
#include "io/input_files.h"

namespace lowp::api {

absl::StatusOr<ImatrixResult> MakeImatrix(const ImatrixOptions& o) {
  const InputScope scope;  // --out never replaces the model or the text
  const EvalOptions& in = o.input;
  if (absl::Status s = CheckThreads(in.threads); !s.ok()) return s;
  if (in.batch_tokens < 0) {
    return OptionError("batch_tokens", absl::StrCat(in.batch_tokens, " is negative"));
  }
  ImatrixResult result;
  result.format = o.format;
  if (o.min_expert_tokens < 0) {
    return OptionError("min_expert_tokens", absl::StrCat(o.min_expert_tokens, ": want >= 0"));
  }
  if (result.format.empty()) result.format = absl::EndsWith(o.out, ".dat") ? "dat" : "gguf";
  if (result.format != "gguf" && result.format != "dat") {
    return OptionError("format", absl::StrCat("'", o.format, "': want gguf or dat"));
  }
  absl::StatusOr<std::string> path = ModelPath(in.model);
  if (!path.ok()) return path.status();
  absl::StatusOr<Checkpoint> model = Checkpoint::OpenModel(*path, in.tensors);
  if (!model.ok()) return model.status();
  result.model = *path;
  absl::StatusOr<Tokens> read = ReadTokens(in, in.threads, *model, *path);
  if (!read.ok()) return read.status();
  const TokenArray* tokens = &read->array;
  result.tokens = read->description;
  result.text_tokens = read->text_tokens;
  ImatrixRunOptions ro;
  ro.process_output = o.process_output;
  ro.threads = in.threads;
  ro.batch_tokens = in.batch_tokens;
  ro.scored_from = read->scored_from;
  ro.progress = in.progress;
  absl::StatusOr<ImatrixRun> made =
      ComputeImatrix(*model, tokens->ids, tokens->length, {read->description}, ro);
  if (!made.ok()) return made.status();
  result.chunk_size = tokens->length;
  result.chunks = tokens->length > 0 ? static_cast<int64_t>(tokens->ids.size()) / tokens->length : 0;
  result.perplexity = made->perplexity;
  result.imatrix = std::move(made->imatrix);
  result.min_expert_tokens = o.min_expert_tokens;
  for (const auto& [name, e] : result.imatrix.entries()) {
    if (e.matrices <= 1) continue;
    ExpertCoverage c;
    c.entry = e.name;
    c.min_tokens = std::numeric_limits<uint64_t>::max();
    for (size_t m = 0; m < e.counts.size(); ++m) {
      const uint64_t tokens = static_cast<uint64_t>(e.counts[m]);
      c.min_tokens = std::min(c.min_tokens, tokens);
      c.max_tokens = std::max(c.max_tokens, tokens);
      if (static_cast<double>(e.counts[m]) < static_cast<double>(o.min_expert_tokens)) {
        c.under_min.push_back(static_cast<int64_t>(m));
      }
    }
    result.experts.push_back(std::move(c));
  }
  if (!o.out.empty()) {
    absl::Status s = result.format == "dat" ? WriteImatrixDat(result.imatrix, o.out)
                                            : WriteImatrixGguf(result.imatrix, o.out);
    if (!s.ok()) return s;
    result.out = o.out;
  }
  return result;
}

nlohmann::json ToJson(const ImatrixResult& r) {
  nlohmann::ordered_json j;
  j["model"] = r.model;
  j["tokens"] = r.tokens;
  if (r.text_tokens > 0) j["text_tokens"] = r.text_tokens;
  j["chunks"] = r.chunks;
  j["chunk_size"] = r.chunk_size;
  j["perplexity"] = JsonNumber(r.perplexity);
  if (!r.experts.empty()) j["min_expert_tokens"] = r.min_expert_tokens;
  if (!r.out.empty()) {
    j["out"] = r.out;
    j["format"] = r.format;
  }
  j["entries"] = nlohmann::ordered_json::array();
  auto next = r.experts.begin();
  for (const auto& [name, e] : r.imatrix.entries()) {
    const std::vector<float> w = e.Values();
    double sum = 0;
    float lo = std::numeric_limits<float>::infinity(), hi = 0;
    for (float v : w) {
      sum += v;
      lo = std::min(lo, v);
      hi = std::max(hi, v);
    }
    nlohmann::ordered_json x;
    x["name"] = e.name;
    x["columns"] = e.columns;
    x["matrices"] = e.matrices;
    x["counts"] = e.counts;
    x["importance_mean"] = w.empty() ? 0.0 : sum / static_cast<double>(w.size());
    x["importance_min"] = w.empty() ? 0.0f : lo;
    x["importance_max"] = hi;
    if (next != r.experts.end() && next->entry == e.name) {  // both in name order
      x["experts_under_min"] = (next++)->under_min;
    }
    j["entries"].push_back(std::move(x));
  }
  return j;
}

}  // namespace lowp::api
