// lowp imatrix: llama.cpp's importance matrix of a model over calibration
// tokens, written as llama-imatrix writes it.
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "api/imatrix.h"
#include "cli/commands.h"
#include "cli/shared.h"
#include "cli/table.h"

namespace lowp::cli {

const char kImatrixHelp[] =
    "usage: lowp imatrix --out FILE [--model DIR | --model CONFIG --tensors FILES]\n"
    "                    [--text FILE [--ctx N] [--chunks N] [--tokenizer FILE] |\n"
    "                     --tokens FILE.npy | --sample N:LEN] [--seed S]\n"
    "                    [--process-output] [--format gguf|dat] [--min-expert-tokens N]\n"
    "                    [--json]\n"
    "                    [--threads N] [--batch-tokens N] [--quiet]\n"
    "\n"
    "Runs the float32 model over calibration tokens and writes llama.cpp's\n"
    "importance matrix, as llama-imatrix does: for the input of every linear\n"
    "layer of the decoder layers (attn_q, attn_k and attn_v sharing theirs,\n"
    "attn_output, ffn_gate, ffn_up, ffn_down, the MoE router; Mixtral's experts\n"
    "per expert), each column's sum of squares over the tokens (in_sum2), its sum\n"
    "(in_sum) and the tokens counted, under llama.cpp's tensor names\n"
    "(blk.N.attn_q.weight). llama-quantize --imatrix and lowp's --imatrix read it;\n"
    "the importance of a column is in_sum2 / count.\n"
    "--out: the file, written whole or not at all; --format gguf (default:\n"
    "  llama.cpp's GGUF imatrix) or dat (the legacy format; default for a name\n"
    "  ending in .dat).\n"
    "--process-output: also lm_head's input (output.weight).\n"
    "--min-expert-tokens N: a mixture of experts' entries (blk.N.ffn_*_exps) list\n"
    "  the experts that took fewer than N tokens (default 1: those no token\n"
    "  reached), whose importance llama-quantize would use from that little.\n"
    "Tokens as `lowp eval` takes them (default --sample 16:128); --text runs\n"
    "llama-imatrix's protocol: chunks of --ctx tokens (512), BOS first in each;\n"
    "the perplexity printed is the float32 model's over their second halves.\n"
    "Where lowp differs from llama-imatrix: sums in double (stored as float32),\n"
    "every product counted (llama.cpp skips those of fewer than 16 rows), and\n"
    "lowp's float32 forward pass over the Hugging Face weights.\n";

int ImatrixCommand(const std::vector<std::string>& argv) {
  std::vector<std::string> values = {"model", "tensors", "out", "format", "min-expert-tokens",
                                     "threads",
                                     "batch-tokens"};
  for (std::string& name : TokenOptionNames("")) values.push_back(std::move(name));
  absl::StatusOr<Args> args = Args::Parse(argv, values, {"process-output", "json", "quiet"});
  if (!args.ok()) return Fail(args.status());
  if (!args->positional().empty()) {
    return Fail(absl::InvalidArgumentError("imatrix takes no positional arguments; see --help"));
  }
  std::optional<std::string> out = args->Value("out");
  if (!out || out->empty()) return Fail(absl::InvalidArgumentError("--out is required"));
  api::ImatrixOptions o;
  absl::StatusOr<int> threads = ParseThreads(*args);
  if (!threads.ok()) return Fail(threads.status());
  o.input.threads = *threads;
  o.input.model = args->Value("model").value_or("");
  if (std::optional<std::string> t = args->Value("tensors")) o.input.tensors = SplitNames(*t);
  if (absl::Status s = ReadTokenOptions(*args, "", o.input); !s.ok()) return Fail(s);
  if (std::optional<std::string> b = args->Value("batch-tokens")) {
    if (!absl::SimpleAtoi(*b, &o.input.batch_tokens) || o.input.batch_tokens < 0) {
      return Fail(absl::InvalidArgumentError(
          absl::StrCat("--batch-tokens '", *b, "': want a number >= 0")));
    }
  }
  o.process_output = args->Has("process-output");
  o.out = *out;
  o.format = args->Value("format").value_or("");
  if (std::optional<std::string> m = args->Value("min-expert-tokens")) {
    if (!absl::SimpleAtoi(*m, &o.min_expert_tokens) || o.min_expert_tokens < 0) {
      return Fail(absl::InvalidArgumentError(
          absl::StrCat("--min-expert-tokens '", *m, "': want a number >= 0")));
    }
  }
  std::optional<Progress> line;
  const bool quiet = args->Has("quiet");
  o.input.progress = [&line, quiet](int64_t, int64_t total, const std::string& what) {
    if (!line) line.emplace(static_cast<size_t>(total), quiet);
    line->Step(what);
  };
  absl::StatusOr<api::ImatrixResult> r = api::MakeImatrix(o);
  line.reset();
  if (!r.ok()) return Fail(r.status());
  if (args->Has("json")) {
    EmitJson(api::ToJson(*r));
    return 0;
  }
  std::printf("model       %s\n", Printable(r->model).c_str());
  std::printf("tokens      %s: %lld chunks of %lld\n", Printable(r->tokens).c_str(),
              static_cast<long long>(r->chunks), static_cast<long long>(r->chunk_size));
  std::printf("perplexity  %.4f (float32)\n", r->perplexity);
  std::printf("wrote       %s (%s): %zu entries\n", Printable(r->out).c_str(), r->format.c_str(),
              r->imatrix.entries().size());
  if (!r->experts.empty()) {
    std::printf("\nexperts: tokens each took, and those under %lld\n",
                static_cast<long long>(r->min_expert_tokens));
    std::vector<Row> rows = {{"entry", "fewest", "most", "under"}};
    for (const api::ExpertCoverage& c : r->experts) {
      rows.push_back({c.entry, std::to_string(c.min_tokens), std::to_string(c.max_tokens),
                      c.under_min.empty() ? std::string("none") : absl::StrJoin(c.under_min, ",")});
    }
    PrintTable(rows, {0});
  }
  return 0;
}

}  // namespace lowp::cli
