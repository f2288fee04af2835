#include "api/inputs.h"

#include <cstring>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "api/tokenize.h"
#include "eval/sample.h"
#include "eval/tokens.h"
#include "formats/option_error.h"
#include "io/bundled.h"
#include "io/imatrix.h"
#include "io/tensor_set.h"

namespace lowp::api {

// ---------------------------------------------------------------- threads

absl::Status CheckThreads(int threads) {
  if (threads < 0 || threads > kMaxThreads) {
    return OptionError(absl::StrCat("threads ", threads),
                       absl::StrCat("want 0 (all) to ", kMaxThreads));
  }
  return absl::OkStatus();
}

// ---------------------------------------------------------------- tensors

absl::StatusOr<TensorSet> Open(const TensorInputs& inputs) {
  if (inputs.files.empty()) return TensorSet::FromViews(inputs.arrays);
  return TensorSet::OpenAll(inputs.files);
}

absl::StatusOr<std::vector<const TensorView*>> Select(const TensorSet& set,
                                                      const std::string& pattern,
                                                      const std::vector<std::string>& files) {
  std::vector<const TensorView*> selected;
  for (const TensorView& t : set.tensors()) {
    if (MatchesPattern(pattern, t.name)) selected.push_back(&t);
  }
  const std::string where =
      files.empty() ? std::string("the arrays given") : absl::StrJoin(files, ", ");
  if (selected.empty()) {
    if (set.tensors().empty()) {
      return absl::InvalidArgumentError(absl::StrCat("no tensors in ", where));
    }
    return OptionError("tensors", absl::StrCat("'", pattern, "' matches no tensor of ", where),
                       " ");
  }
  // Every use case measures floating tensors only (the others are reported
  // as skipped): a selection with none would report nothing as if measured.
  std::vector<std::string> kinds;
  for (const TensorView* t : selected) {
    if (IsFloating(t->dtype)) return selected;
    if (kinds.size() < 8) kinds.push_back(absl::StrCat(t->name, " (", t->type_name(), ")"));
  }
  const std::string why = absl::StrCat(
      "no floating tensor (lowp measures and quantizes floating tensors only) among the ",
      selected.size(), " selected: ", absl::StrJoin(kinds, ", "),
      selected.size() > kinds.size() ? ", ..." : "");
  if (!pattern.empty()) return OptionError("tensors", absl::StrCat("'", pattern, "' in ", where, ": ", why), " ");
  return absl::InvalidArgumentError(absl::StrCat(where, ": ", why));
}

// ---------------------------------------------------------------- model

absl::StatusOr<std::string> ModelPath(const std::string& model) {
  if (!model.empty()) return model;
  absl::StatusOr<std::string> bundled = BundledModel();
  if (!bundled.ok()) return OptionError("model", bundled.status().message());
  return bundled;
}

// ---------------------------------------------------------------- importance

absl::StatusOr<std::shared_ptr<const ImportanceMap>> OpenImportance(const std::string& path) {
  if (path.empty()) return nullptr;
  absl::StatusOr<Imatrix> imatrix = ReadImatrix(path);
  if (!imatrix.ok()) {
    if (imatrix.status().code() != absl::StatusCode::kInvalidArgument) {
      return absl::Status(imatrix.status().code(),
                          absl::StrCat("imatrix: ", imatrix.status().message()));
    }
    return OptionError("imatrix", imatrix.status().message());
  }
  return std::make_shared<const ImportanceMap>(ImportanceMap::FromImatrix(*imatrix, path));
}

// ---------------------------------------------------------------- tokens

namespace {

constexpr int64_t kMaxSequences = int64_t{1} << 20;

absl::StatusOr<TokenArray> ReadTokensFile(const std::string& path) {
  absl::StatusOr<TensorSet> set = TensorSet::Open(path);
  if (!set.ok()) return OptionError("tokens", set.status().message());
  if (set->tensors().size() != 1) {
    return OptionError("tokens", absl::StrCat(path, ": holds ", set->tensors().size(),
                                              " tensors; want one array of token ids"));
  }
  const TensorView& t = set->tensors()[0];
  if (t.dtype != DType::kI32 && t.dtype != DType::kI64) {
    return OptionError("tokens", absl::StrCat(path, ": token ids are ", DTypeName(t.dtype),
                                              "; want int32 or int64"));
  }
  if (t.shape.empty() || t.shape.size() > 2 || t.elements() == 0) {
    return OptionError("tokens", absl::StrCat(path, ": shape [", absl::StrJoin(t.shape, ", "),
                                              "]; want [sequences, length] or [length]"));
  }
  TokenArray out;
  out.length = t.shape.back();
  out.ids.resize(static_cast<size_t>(t.elements()));
  for (size_t i = 0; i < out.ids.size(); ++i) {
    int64_t v = 0;
    if (t.dtype == DType::kI32) {
      int32_t x;
      std::memcpy(&x, t.bytes.data() + 4 * i, 4);
      v = x;
    } else {
      std::memcpy(&v, t.bytes.data() + 8 * i, 8);
    }
    if (v < 0 || v > INT32_MAX) {
      return OptionError("tokens",
                         absl::StrCat(path, ": token ", v, " at sequence ", i / out.length,
                                      ", position ", i % out.length, " is not a token id"));
    }
    out.ids[i] = static_cast<int32_t>(v);
  }
  if (absl::Status s = set->CheckIntact(); !s.ok()) return s;
  return out;
}

absl::StatusOr<std::pair<int64_t, int64_t>> ParseSample(const std::string& text) {
  std::pair<std::string, std::string> parts = absl::StrSplit(text, absl::MaxSplits(':', 1));
  int64_t n = 0, len = 0;
  if (!absl::SimpleAtoi(parts.first, &n) || !absl::SimpleAtoi(parts.second, &len) || n < 1 ||
      len < 2 || n > kMaxSequences || len > kMaxSequences) {
    return OptionError("sample",
                       absl::StrCat("'", text, "' is not N:LEN (N sequences of LEN tokens, ",
                                    "1 <= N, 2 <= LEN <= ", kMaxSequences, ")"));
  }
  return std::make_pair(n, len);
}

// Which options a token array's faults are the user's: the one that set
// the sequences' length and the one the ids came from.
struct TokenSource {
  std::string length = "tokens";  // "ctx" for a text, "sample" for sampled tokens
  std::string ids = "tokens";      // for a text: "tokenizer", or "model" for its own
  std::string ids_from;            // for a text: "the tokenizer FILE gives "
};

// Every id below the model's vocabulary and sequences no longer than its
// positions (eval/tokens.h): an option error on the option the tokens came
// from (Evaluate checks too, as a library contract; this gives the front
// ends the field).
absl::Status CheckTokens(const TokenArray& tokens, const ModelConfig& config,
                         const TokenSource& source) {
  const TokenFault fault = FindTokenFault(config, tokens.ids, tokens.length);
  switch (fault.kind) {
    case TokenFault::kNone:
      return absl::OkStatus();
    case TokenFault::kLength:
      return OptionError(source.length,
                         source.length == "tokens"
                             ? absl::StrCat(fault.message, "; give [sequences, length] with ",
                                            "shorter sequences")
                             : fault.message);
    case TokenFault::kId:
      if (source.ids_from.empty()) return OptionError(source.ids, fault.message);
      // "the tokenizer FILE gives token N at ..., which is not ..."
      return OptionError(source.ids,
                         absl::StrCat(source.ids_from,
                                      absl::StrReplaceAll(fault.message,
                                                          {{" is not a token id", ", which is not a token id"}})));
    case TokenFault::kShape:
      break;
  }
  return OptionError("tokens", fault.message);
}

// The text's chunks by llama.cpp's perplexity protocol (TokenOptions).
absl::StatusOr<TokenArray> TextChunks(const TokenOptions& o, const std::string& model,
                                      Tokens& result, TokenSource& source) {
  absl::StatusOr<std::unique_ptr<Tokenizer>> tokenizer = FindTokenizer(model, o.tokenizer);
  if (!tokenizer.ok()) return tokenizer.status();
  absl::StatusOr<std::string> read = ReadText(o.text, o.text_file);
  if (!read.ok()) return read.status();
  std::string text = *std::move(read);
  // llama.cpp's -f drops one trailing newline.
  if (!text.empty() && text.back() == '\n') text.pop_back();
  absl::StatusOr<std::vector<int32_t>> ids = (*tokenizer)->Tokenize(text);
  if (!ids.ok()) {
    return OptionError("text", absl::StrCat(o.text ? "the text" : o.text_file, ": ",
                                            ids.status().message()));
  }
  const TokenizerInfo& info = (*tokenizer)->info();
  result.tokenizer = info;
  source = {.length = "ctx",
            .ids = o.tokenizer.empty() ? "model" : "tokenizer",
            .ids_from = absl::StrCat("the tokenizer ", info.path, " gives ")};
  result.text_tokens = ids->size();
  result.description = absl::StrCat("text ", o.text ? "(given)" : o.text_file);
  int64_t n = static_cast<int64_t>(ids->size()) / o.ctx;
  if (n == 0) {
    return OptionError("text", absl::StrCat("gives ", ids->size(),
                                            " tokens, fewer than one chunk of --ctx ", o.ctx));
  }
  if (o.chunks > 0) n = std::min(n, o.chunks);
  TokenArray out;
  out.length = o.ctx;
  out.ids.assign(ids->begin(), ids->begin() + n * o.ctx);
  if (info.add_bos) {
    for (int64_t c = 0; c < n; ++c) out.ids[c * o.ctx] = info.bos;
  }
  return out;
}

bool FromText(const TokenOptions& o) { return !o.text_file.empty() || o.text.has_value(); }

}  // namespace

absl::Status CheckTokenOptions(const TokenOptions& o, const ModelConfig& config) {
  if (FromText(o)) {
    if (!o.text_file.empty() && o.text.has_value()) {
      return OptionError("text", "give either a text file or a text");
    }
    if (o.ctx < 4) return OptionError("ctx", absl::StrCat(o.ctx, " is below 4"));
    if (absl::Status s = CheckSequenceLength(config, o.ctx); !s.ok()) {
      return OptionError("ctx", s.message());
    }
    if (o.chunks == 0 || o.chunks < -1) {
      return OptionError("chunks", absl::StrCat(o.chunks, " is not a count (-1: all)"));
    }
  } else if (o.tokens_file.empty() && o.token_array.ids.empty()) {
    absl::StatusOr<std::pair<int64_t, int64_t>> sample = ParseSample(o.sample);
    if (!sample.ok()) return sample.status();
    if (absl::Status s = CheckSequenceLength(config, sample->second); !s.ok()) {
      return OptionError("sample", s.message());
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<Tokens> ReadTokens(const TokenOptions& o, int threads, const Checkpoint& model,
                                  const std::string& path) {
  if (absl::Status s = CheckTokenOptions(o, model.config()); !s.ok()) return s;
  Tokens result;
  TokenArray& tokens = result.array;
  TokenSource source;
  if (FromText(o)) {
    absl::StatusOr<TokenArray> chunks = TextChunks(o, path, result, source);
    if (!chunks.ok()) return chunks.status();
    tokens = *std::move(chunks);
    result.scored_from = o.ctx / 2;
  } else if (!o.tokens_file.empty()) {
    absl::StatusOr<TokenArray> read = ReadTokensFile(o.tokens_file);
    if (!read.ok()) return read.status();
    tokens = *std::move(read);
    result.description = o.tokens_file;
  } else if (!o.token_array.ids.empty()) {
    tokens = o.token_array;
    result.description = "array";
  } else {
    absl::StatusOr<std::pair<int64_t, int64_t>> sample = ParseSample(o.sample);
    if (!sample.ok()) return sample.status();
    SampleOptions s;
    s.count = sample->first;
    s.length = sample->second;
    s.seed = o.seed;
    s.threads = threads;
    absl::StatusOr<std::vector<int32_t>> ids = SampleTokens(model, s);
    if (!ids.ok()) {
      if (OptionOf(ids.status()) == "length") {
        // "length: why": the option is --sample's LEN here.
        return OptionError("sample", ids.status().message().substr(sizeof("length: ") - 1));
      }
      return ids.status();
    }
    tokens.ids = *std::move(ids);
    tokens.length = s.length;
    result.description = absl::StrCat("sampled ", o.sample, " seed ", o.seed);
    source.length = "sample";
  }
  if (tokens.length < 2) {
    return OptionError(source.length, "sequences need at least 2 tokens (one prediction)");
  }
  if (absl::Status s = CheckTokens(tokens, model.config(), source); !s.ok()) return s;
  return result;
}


absl::Status CheckTokenArray(const TokenArray& tokens, const ModelConfig& config) {
  return CheckTokens(tokens, config, {});
}

absl::Status CheckMixTokenOptions(const TokenOptions& options, absl::string_view prefix,
                                  const ModelConfig& config) {
  return PrefixOption(CheckTokenOptions(options, config), prefix);
}

absl::StatusOr<MixTokens> ReadMixTokens(const TokenOptions& given, absl::string_view prefix,
                                        int threads, const Checkpoint& model,
                                        const std::string& path) {
  absl::StatusOr<Tokens> t = ReadTokens(given, threads, model, path);
  if (!t.ok()) return PrefixOption(t.status(), prefix);
  return MixTokens{.ids = std::move(t->array.ids),
                   .length = t->array.length,
                   .scored_from = t->scored_from,
                   .description = std::move(t->description)};
}

TokenOptions DefaultCalibrationOptions() {
  TokenOptions o;
  o.sample = "";
  o.ctx = 256;
  o.chunks = 64;
  return o;
}

namespace {

constexpr absl::string_view kCalibrationPrefix = "calib_";

// The options, with the bundled text when they name no tokens.
absl::StatusOr<TokenOptions> CalibrationSource(const TokenOptions& given) {
  TokenOptions o = given;
  if (o.tokens_file.empty() && o.token_array.ids.empty() && o.sample.empty() &&
      o.text_file.empty() && !o.text.has_value()) {
    absl::StatusOr<std::string> text = BundledCalibrationText();
    if (!text.ok()) return OptionError("text", text.status().message());
    o.text_file = *text;
  }
  return o;
}

}  // namespace

absl::Status CheckCalibrationOptions(const TokenOptions& options, const ModelConfig& config) {
  absl::StatusOr<TokenOptions> o = CalibrationSource(options);
  if (!o.ok()) return PrefixOption(o.status(), kCalibrationPrefix);
  return PrefixOption(CheckTokenOptions(*o, config), kCalibrationPrefix);
}

absl::StatusOr<std::shared_ptr<const CalibrationTokens>> ReadCalibration(
    const TokenOptions& options, int threads, const Checkpoint& model, const std::string& path) {
  absl::StatusOr<TokenOptions> o = CalibrationSource(options);
  if (!o.ok()) return PrefixOption(o.status(), kCalibrationPrefix);
  absl::StatusOr<Tokens> t = ReadTokens(*o, threads, model, path);
  if (!t.ok()) return PrefixOption(t.status(), kCalibrationPrefix);
  auto out = std::make_shared<CalibrationTokens>();
  out->ids = std::move(t->array.ids);
  out->length = t->array.length;
  out->source = std::move(t->description);
  return std::shared_ptr<const CalibrationTokens>(std::move(out));
}

absl::Status SetCalibration(std::vector<EvalCandidate>& candidates, const TokenOptions& options,
                            int threads, const Checkpoint& model, const std::string& path) {
  std::shared_ptr<const CalibrationTokens> tokens;
  for (EvalCandidate& c : candidates) {
    if (!Calibrates(c) || c.calibration != nullptr) continue;
    if (tokens == nullptr) {
      absl::StatusOr<std::shared_ptr<const CalibrationTokens>> read =
          ReadCalibration(options, threads, model, path);
      if (!read.ok()) return read.status();
      tokens = *std::move(read);
    }
    c.calibration = tokens;
  }
  return absl::OkStatus();
}

absl::Status SetCalibration(MixTable& table, const TokenOptions& options, int threads,
                            const Checkpoint& model, const std::string& path) {
  if (!table.Calibrates()) return absl::OkStatus();
  absl::StatusOr<std::shared_ptr<const CalibrationTokens>> read =
      ReadCalibration(options, threads, model, path);
  if (!read.ok()) return read.status();
  table.calibration = *std::move(read);
  return absl::OkStatus();
}

}  // namespace lowp::api
