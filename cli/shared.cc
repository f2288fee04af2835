#include "cli/shared.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <string>
#include <system_error>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "api/quant.h"
#include "cli/table.h"
#include "formats/option_error.h"
#include "sizing/devices.h"

namespace lowp::cli {

std::string ShortPath(const std::string& path) {
  std::error_code ec;
  const std::filesystem::path p = std::filesystem::proximate(path, ec);
  return ec || p.empty() || p.string().starts_with("..") ? path : p.string();
}

namespace {

// An options struct's field as the command line's flag: seq -> --seq,
// lora_rank -> --lora-rank, output -> --out, add_bos -> --bos.
std::string Flag(absl::string_view field) {
  if (field == "output") return "--out";
  if (field == "add_bos") return "--bos";
  std::string flag = absl::StrCat("--", field);
  for (char& c : flag) {
    if (c == '_') c = '-';
  }
  return flag;
}

bool IsFieldChar(char c) { return std::islower(static_cast<unsigned char>(c)) || c == '_'; }

}  // namespace

std::string FlagMessage(const absl::Status& status) {
  std::string message(status.message());
  // The subject an option error starts with: "seq", "formats nosuch",
  // "buffers and headroom".
  if (std::optional<std::string> field = OptionOf(status);
      field && absl::StartsWith(message, *field)) {
    std::vector<std::string> parts;
    for (absl::string_view part : absl::StrSplit(*field, " and ")) {
      const size_t end = std::min(part.find(' '), part.size());
      parts.push_back(absl::StrCat(Flag(part.substr(0, end)), part.substr(end)));
    }
    message = absl::StrCat(absl::StrJoin(parts, " and "), message.substr(field->size()));
  }
  // Other options named in the text, written `name`.
  std::string out;
  for (size_t i = 0; i < message.size(); ++i) {
    if (message[i] == '`') {
      size_t j = i + 1;
      while (j < message.size() && IsFieldChar(message[j])) ++j;
      if (j > i + 1 && j < message.size() && message[j] == '`') {
        out += Flag(absl::string_view(message).substr(i + 1, j - i - 1));
        i = j;
        continue;
      }
    }
    out += message[i];
  }
  return out;
}

void PrintSkipped(const std::vector<std::string>& skipped) {
  if (skipped.empty()) return;
  std::fprintf(stderr, "lowp: skipped %zu tensor(s) that are not floating: %s\n", skipped.size(),
               Printable(absl::StrJoin(skipped, ", ")).c_str());
}

int Fail(const absl::Status& status) {
  std::fprintf(stderr, "lowp: %s\n", Printable(FlagMessage(status)).c_str());
  return 1;
}

void EmitJson(const nlohmann::json& j) {
  // A string that is not UTF-8 (a tensor named after a file, an option value
  // echoed back) cannot be JSON as it is: dump() would throw and abort the
  // command; it is printed with U+FFFD in place of each bad byte instead.
  std::printf("%s\n", j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
}

absl::StatusOr<Output> ParseOutput(const Args& args) {
  if (args.Has("json") && args.Has("csv")) {
    return absl::InvalidArgumentError("--json and --csv exclude each other");
  }
  return args.Has("json") ? Output::kJson : args.Has("csv") ? Output::kCsv : Output::kTable;
}

// The value of --name as an integer; `out` is left alone when absent.
template <typename Int>
absl::Status ReadInt(const Args& args, const char* name, Int* out) {
  std::optional<std::string> text = args.Value(name);
  if (!text) return absl::OkStatus();
  if (!absl::SimpleAtoi(*text, out)) {
    return absl::InvalidArgumentError(absl::StrCat("--", name, " '", *text, "': want an integer"));
  }
  return absl::OkStatus();
}

absl::Status ReadCount(const Args& args, const char* name, int64_t* out) {
  std::optional<std::string> text = args.Value(name);
  if (!text) return absl::OkStatus();
  int64_t value;
  if (!absl::SimpleAtoi(*text, &value) || value < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("--", name, " '", *text, "': want a number >= 1"));
  }
  *out = value;
  return absl::OkStatus();
}

const std::vector<std::string>& SizingValueOptions() {
  static const std::vector<std::string> options = {"model",
                                                   "mode",
                                                   "weights",
                                                   "embed",
                                                   "grads",
                                                   "master",
                                                   "optimizer",
                                                   "opt-state",
                                                   "kv",
                                                   "seq",
                                                   "batch",
                                                   "zero",
                                                   "dp",
                                                   "tp",
                                                   "pp",
                                                   "recompute",
                                                   "offload",
                                                   "lora-rank",
                                                   "lora-targets",
                                                   "prefill-tokens",
                                                   "buffers",
                                                   "headroom",
                                                   "activation-bytes"};
  return options;
}

absl::Status ReadSizingOptions(const Args& args, SizingOptions* o) {
  std::optional<std::string> mode = args.Value("mode");
  if (!mode) {
    return absl::InvalidArgumentError(
        "--mode is required (pretrain, finetune, lora, qlora, inference)");
  }
  absl::StatusOr<Mode> m = ParseMode(*mode);
  if (!m.ok()) return m.status();
  o->mode = *m;
  struct {
    const char* name;
    std::string* field;
  } const formats[] = {{"weights", &o->weights}, {"embed", &o->embed},         {"grads", &o->grads},
                       {"master", &o->master},   {"opt-state", &o->opt_state}};
  for (const auto& f : formats) {
    if (std::optional<std::string> v = args.Value(f.name)) {
      if (v->empty()) return absl::InvalidArgumentError(absl::StrCat("--", f.name, " is empty"));
      *f.field = *v;
    }
  }
  if (std::optional<std::string> v = args.Value("optimizer")) {
    absl::StatusOr<Optimizer> opt = ParseOptimizer(*v);
    if (!opt.ok()) return opt.status();
    o->optimizer = *opt;
  }
  if (std::optional<std::string> v = args.Value("recompute")) {
    absl::StatusOr<Recompute> r = ParseRecompute(*v);
    if (!r.ok()) return r.status();
    o->recompute = *r;
  }
  for (absl::Status s :
       {ReadInt(args, "dp", &o->dp), ReadInt(args, "tp", &o->tp), ReadInt(args, "pp", &o->pp),
        ReadInt(args, "zero", &o->zero), ReadInt(args, "lora-rank", &o->lora_rank),
        ReadInt(args, "activation-bytes", &o->activation_bytes)}) {
    if (!s.ok()) return s;
  }
  o->sequence_parallel = args.Has("sequence-parallel");
  o->flash_attention = !args.Has("no-flash-attention");
  if (std::optional<std::string> v = args.Value("offload")) {
    if (*v != "optimizer") {
      return absl::InvalidArgumentError(
          absl::StrCat("--offload '", *v, "': only 'optimizer' can be offloaded"));
    }
    o->offload_optimizer = true;
  }
  if (std::optional<std::string> v = args.Value("lora-targets")) {
    for (absl::string_view target : absl::StrSplit(*v, ',')) {
      if (target.empty()) {
        return absl::InvalidArgumentError(
            absl::StrCat("--lora-targets '", *v, "': empty name in the list"));
      }
      o->lora_targets.emplace_back(target);
    }
  }
  return ReadJobOptions(args, o);
}

const std::vector<std::string>& JobValueOptions() {
  static const std::vector<std::string> options = {"kv",      "seq",     "batch", "prefill-tokens",
                                                   "buffers", "headroom"};
  return options;
}

absl::Status ReadJobOptions(const Args& args, SizingOptions* o) {
  if (std::optional<std::string> v = args.Value("kv")) {
    if (v->empty()) return absl::InvalidArgumentError("--kv is empty");
    o->kv = *v;
  }
  for (absl::Status s : {ReadInt(args, "seq", &o->seq), ReadInt(args, "batch", &o->batch),
                         ReadInt(args, "prefill-tokens", &o->prefill_tokens)}) {
    if (!s.ok()) return s;
  }
  if (std::optional<std::string> v = args.Value("buffers")) {
    absl::StatusOr<int64_t> bytes = ParseBytes(*v, "--buffers");
    if (!bytes.ok()) return bytes.status();
    o->buffers_bytes = *bytes;
  }
  if (std::optional<std::string> v = args.Value("headroom")) {
    if (!absl::SimpleAtod(*v, &o->headroom) || !std::isfinite(o->headroom)) {
      return absl::InvalidArgumentError(
          absl::StrCat("--headroom '", *v, "': want a fraction in [0, 1), e.g. 0.3"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<int> ParseThreads(const Args& args) {
  int threads = 0;
  if (std::optional<std::string> t = args.Value("threads")) {
    if (!absl::SimpleAtoi(*t, &threads) || threads < 0 || threads > api::kMaxThreads) {
      return absl::InvalidArgumentError(absl::StrCat("--threads '", *t, "': want 0 (all) to 1024"));
    }
  }
  return threads;
}

std::vector<std::string> SplitNames(absl::string_view text) {
  std::vector<std::string> items(1);
  int depth = 0;
  for (char c : text) {
    if (c == '(') ++depth;
    if (c == ')' && depth > 0) --depth;
    if (c == ',' && depth == 0) {
      items.emplace_back();
    } else {
      items.back() += c;
    }
  }
  return items;
}

absl::StatusOr<std::vector<std::string>> SplitList(const Args& args, absl::string_view name) {
  std::vector<std::string> items;
  std::optional<std::string> text = args.Value(name);
  if (!text) return items;
  for (const std::string& item : SplitNames(*text)) {
    if (item.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--", name, " '", *text, "': empty name in the list"));
    }
    for (const std::string& seen : items) {
      if (seen == item) {
        return absl::InvalidArgumentError(
            absl::StrCat("--", name, " '", *text, "': ", item, " is given twice"));
      }
    }
    items.emplace_back(item);
  }
  return items;
}

std::vector<std::string> TokenOptionNames(const std::string& prefix) {
  std::vector<std::string> out;
  for (const char* name : {"text", "tokenizer", "ctx", "chunks", "tokens", "sample", "seed"}) {
    out.push_back(prefix + name);
  }
  return out;
}

absl::Status ReadTokenOptions(const Args& args, const std::string& prefix, api::TokenOptions& o,
                              bool text_by_default) {
  auto flag = [&](const char* name) { return prefix + name; };
  o.tokens_file = args.Value(flag("tokens")).value_or("");
  if (std::optional<std::string> s = args.Value(flag("sample"))) {
    if (!o.tokens_file.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("give --", flag("tokens"), " or --", flag("sample"), ", not both"));
    }
    o.sample = *s;
  }
  o.text_file = args.Value(flag("text")).value_or("");
  o.tokenizer = args.Value(flag("tokenizer")).value_or("");
  if (!o.text_file.empty() && (args.Value(flag("tokens")) || args.Value(flag("sample")))) {
    return absl::InvalidArgumentError(absl::StrCat("give --", flag("text"), ", --", flag("tokens"),
                                                   " or --", flag("sample"), ", one of them"));
  }
  for (const char* name : {"tokenizer", "ctx", "chunks"}) {
    const bool text = !o.text_file.empty() ||
                      (text_by_default && !args.Value(flag("tokens")) && !args.Value(flag("sample")));
    if (args.Value(flag(name)) && !text) {
      return absl::InvalidArgumentError(
          absl::StrCat("--", flag(name), " goes with --", flag("text")));
    }
  }
  for (auto [name, value] :
       {std::pair<const char*, int64_t*>{"ctx", &o.ctx}, {"chunks", &o.chunks}}) {
    if (absl::Status s = ReadCount(args, flag(name).c_str(), value); !s.ok()) return s;
  }
  if (std::optional<std::string> s = args.Value(flag("seed"))) {
    if (!absl::SimpleAtoi(*s, &o.seed)) {
      return absl::InvalidArgumentError(
          absl::StrCat("--", flag("seed"), " '", *s, "': want a number >= 0"));
    }
  }
  return absl::OkStatus();
}

api::ProgressFn ProgressLine(std::optional<Progress>& line, bool quiet) {
  return [&line, quiet](size_t total, const std::string& name) {
    if (!line) line.emplace(total, quiet);
    line->Step(name);
  };
}

void PrintTrainingPlan(const api::TrainingPlanResult& r, bool csv) {
  std::vector<Row> rows = {{"recipe", "bytes/param", "states GB", "GB/device", "fits",
                            "devices (states)", "devices", "updates lost", "update ratio",
                            "weight rel err", "m rel err", "v rel err"}};
  for (const api::TrainingPlanRow& row : r.rows) {
    const SizingReport& m = row.memory;
    const UpdateReport& f = row.figures;
    rows.push_back({row.recipe.name, absl::StrFormat("%.4g", row.recipe.BytesPerParameter()),
                    csv ? std::to_string(m.whole.model_states()) : Gb(m.whole.model_states()),
                    csv ? std::to_string(m.per_device.total()) : Gb(m.per_device.total()),
                    m.fits ? "yes" : "no", std::to_string(m.devices_for_states),
                    std::to_string(m.devices_needed),
                    absl::StrFormat("%.2f%%", 100 * f.updates_lost()),
                    absl::StrFormat("%.4g", f.update_ratio()),
                    absl::StrFormat("%.4g", f.weight_relative_error()),
                    absl::StrFormat("%.4g", f.m_relative_error()),
                    absl::StrFormat("%.4g", f.v_relative_error())});
  }
  if (csv) {
    PrintCsv(rows);
    return;
  }
  if (!r.rows.empty()) {
    const SizingReport& m = r.rows.front().memory;
    const SizingOptions& o = m.options;
    std::printf("plan      %s, %s, seq %lld, batch %lld, dp %lld x tp %lld x pp %lld, ZeRO %d on %s "
                "(%s GB)\n",
                Printable(m.model.name).c_str(), std::string(ModeName(o.mode)).c_str(),
                static_cast<long long>(o.seq), static_cast<long long>(o.batch),
                static_cast<long long>(o.dp), static_cast<long long>(o.tp),
                static_cast<long long>(o.pp), o.zero, Printable(m.device.name).c_str(),
                Gb(m.device.memory_bytes).c_str());
  }
  const AdamWOptions& a = r.measured.update.adamw;
  std::vector<std::string> files;
  for (const std::string& f : r.measured_on) files.push_back(ShortPath(f));
  std::printf("measured  %s: %llu weights, %lld AdamW steps at lr %g (%s), beside float64\n",
              Printable(absl::StrJoin(files, ", ")).c_str(),
              static_cast<unsigned long long>(r.rows.empty() ? 0 : r.rows.front().figures.elements),
              static_cast<long long>(a.steps), a.lr, a.schedule.c_str());
  std::printf("units     GB = 10^9 bytes; states: weights, gradients, master (or Kahan buffer) and\n"
              "          moments of the whole model; devices (states): the states alone over one\n"
              "          device's capacity; lost and errors as lowp update-error defines them\n\n");
  PrintTable(rows, {0});
}

absl::Status ReadRecipeOptions(const Args& args, api::UpdateErrorApiOptions& o) {
  absl::StatusOr<std::vector<std::string>> recipes = SplitList(args, "recipes");
  if (!recipes.ok()) return recipes.status();
  o.recipes = *recipes;
  absl::StatusOr<std::vector<std::string>> files = SplitList(args, "recipe-tensors");
  if (!files.ok()) return files.status();
  o.inputs.files = *files;
  if (absl::Status s = ReadCount(args, "steps", &o.update.adamw.steps); !s.ok()) return s;
  if (std::optional<std::string> v = args.Value("lr")) {
    if (!absl::SimpleAtod(*v, &o.update.adamw.lr)) {
      return OptionError("lr", absl::StrCat("'", *v, "' is not a number"));
    }
  }
  if (std::optional<std::string> v = args.Value("seed")) {
    if (!absl::SimpleAtoi(*v, &o.update.seed)) {
      return OptionError("seed", absl::StrCat("'", *v, "' is not a non-negative integer"));
    }
  }
  return absl::OkStatus();
}

std::vector<std::string> RecipeOptionNames() {
  return {"recipes", "recipe-tensors", "steps", "lr", "seed"};
}

}  // namespace lowp::cli
