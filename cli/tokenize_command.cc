// lowp tokenize: a model's tokenizer on a text file.
#include <cstdio>
#include <string>
#include <vector>

#include "api/tokenize.h"
#include "cli/commands.h"
#include "cli/shared.h"
#include "cli/table.h"

namespace lowp::cli {

const char kTokenizeHelp[] =
    "usage: lowp tokenize FILE [--model DIR | --tokenizer FILE] [--parse-special]\n"
    "                     [--bos | --no-bos] [--pieces] [--json]\n"
    "\n"
    "The token ids of the text in FILE, as `lowp eval --text` reads it: the\n"
    "whole file one string, BOS first when the tokenizer adds it.\n"
    "--model: a Hugging Face snapshot directory; its tokenizer.model\n"
    "(SentencePiece, through libsentencepiece), else tokenizer.json (BPE:\n"
    "byte-level or SentencePiece-style), else llama2.c's tok*.bin. Default: the\n"
    "bundled stories260K-hf and its tok512.bin.\n"
    "--tokenizer: that tokenizer file instead (tokenizer_config.json and\n"
    "config.json beside it give BOS and EOS).\n"
    "--parse-special: special tokens written in the text (\"<s>\") become their\n"
    "ids; by default they are text, as in llama.cpp's perplexity.\n"
    "--bos, --no-bos: add BOS or not, whatever the tokenizer says.\n"
    "--pieces: each token's id and vocabulary string, one per line.\n"
    "Prints the tokenizer, the counts, then the ids on one line.\n";

int TokenizeCommand(const std::vector<std::string>& argv) {
  absl::StatusOr<Args> args = Args::Parse(argv, {"model", "tokenizer"},
                                          {"parse-special", "bos", "no-bos", "pieces", "json"});
  if (!args.ok()) return Fail(args.status());
  if (args->positional().size() != 1) {
    return Fail(absl::InvalidArgumentError("tokenize needs one text file; see --help"));
  }
  if (args->Has("bos") && args->Has("no-bos")) {
    return Fail(absl::InvalidArgumentError("--bos and --no-bos together"));
  }
  api::TokenizeOptions options;
  options.text_file = args->positional()[0];
  options.model = args->Value("model").value_or("");
  options.tokenizer = args->Value("tokenizer").value_or("");
  options.parse_special = args->Has("parse-special");
  if (args->Has("bos")) options.add_bos = true;
  if (args->Has("no-bos")) options.add_bos = false;
  options.pieces = args->Has("pieces");
  absl::StatusOr<api::TokenizeResult> r = api::Tokenize(options);
  if (!r.ok()) return Fail(r.status());
  if (args->Has("json")) {
    EmitJson(api::ToJson(*r));
    return 0;
  }
  const TokenizerInfo& t = r->tokenizer;
  std::printf("tokenizer  %s (%s, %lld tokens; BOS %d%s, EOS %d)\n", Printable(t.path).c_str(),
              t.kind.c_str(), static_cast<long long>(t.vocab_size), t.bos,
              r->add_bos ? " added" : " not added", t.eos);
  std::printf("text       %s: %llu bytes, %zu tokens (%llu different), %.3f bytes per token\n",
              Printable(r->text).c_str(), static_cast<unsigned long long>(r->bytes), r->ids.size(),
              static_cast<unsigned long long>(r->distinct),
              r->ids.empty() ? 0.0 : static_cast<double>(r->bytes) / r->ids.size());
  if (options.pieces) {
    for (size_t i = 0; i < r->ids.size(); ++i) {
      std::printf("%d\t%s\n", r->ids[i], Printable(r->pieces[i]).c_str());
    }
    return 0;
  }
  std::string line;
  for (size_t i = 0; i < r->ids.size(); ++i) {
    if (i > 0) line += ' ';
    line += std::to_string(r->ids[i]);
  }
  std::printf("%s\n", line.c_str());
  return 0;
}

}  // namespace lowp::cli
