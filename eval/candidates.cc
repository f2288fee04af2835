#include "eval/candidates.h"

#include <cstdint>
#include <optional>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "formats/format.h"
#include "formats/option_error.h"
#include "kernels/hadamard.h"
#include "quant/scheme.h"

namespace lowp {
namespace {

// The items of a comma-separated list, trimmed; "none" kept as "".
std::vector<std::string> Items(const std::string& list) {
  std::vector<std::string> out;
  for (absl::string_view item : absl::StrSplit(list, ',')) {
    item = absl::StripAsciiWhitespace(item);
    out.push_back(item == "none" ? "" : std::string(item));
  }
  return out;
}

absl::StatusOr<std::shared_ptr<const Scheme>> SchemeFor(const std::string& field,
                                                        const std::string& name) {
  absl::StatusOr<std::unique_ptr<Scheme>> scheme = ParseScheme(name);
  if (!scheme.ok()) return OptionError(field, absl::StrCat(name, ": ", scheme.status().message()));
  return std::shared_ptr<const Scheme>(*std::move(scheme));
}

// The rule of `pattern` and `name` (a scheme, with its calibration).
absl::StatusOr<WeightRule> MakeRule(const std::string& pattern, const std::string& name) {
  absl::StatusOr<std::pair<std::string, Calibration>> split = SplitCalibration(name);
  if (!split.ok()) return OptionError("weights", split.status().message());
  absl::StatusOr<std::shared_ptr<const Scheme>> s = SchemeFor("weights", split->first);
  if (!s.ok()) return s.status();
  return WeightRule{pattern, *std::move(s), split->second};
}

struct WeightCandidate {
  std::string spec;
  std::vector<WeightRule> rules;
  std::string file;  // a checkpoint file's matrices
};

// `weights`: plain schemes are candidates of their own; a run of
// PATTERN=SCHEME items is one candidate.
absl::StatusOr<std::vector<WeightCandidate>> WeightCandidates(const std::string& list) {
  std::vector<WeightCandidate> out;
  bool in_rules = false;
  for (const std::string& item : Items(list)) {
    const size_t eq = item.find('=');
    if (eq == std::string::npos || item.find(':') < eq) {
      in_rules = false;
      WeightCandidate c;
      c.spec = item;
      if (!item.empty()) {
        absl::StatusOr<WeightRule> rule = MakeRule("", item);
        if (!rule.ok()) return rule.status();
        c.rules.push_back(*std::move(rule));
      }
      out.push_back(std::move(c));
      continue;
    }
    const std::string pattern = item.substr(0, eq), scheme = item.substr(eq + 1);
    if (pattern.empty() || scheme.empty()) {
      return OptionError("weights", absl::StrCat("'", item, "' is not PATTERN=SCHEME"));
    }
    if (!in_rules) out.push_back({});
    in_rules = true;
    WeightCandidate& c = out.back();
    c.spec = c.spec.empty() ? item : absl::StrCat(c.spec, ",", item);
    if (scheme != "none") {
      absl::StatusOr<WeightRule> rule = MakeRule(pattern, scheme);
      if (!rule.ok()) return rule.status();
      c.rules.push_back(*std::move(rule));
    } else {
      c.rules.push_back({pattern, nullptr, {}});
    }
  }
  return out;
}

absl::StatusOr<std::vector<std::pair<std::string, std::shared_ptr<const Scheme>>>> SchemeList(
    const std::string& field, const std::string& list) {
  std::vector<std::pair<std::string, std::shared_ptr<const Scheme>>> out;
  for (const std::string& item : Items(list)) {
    if (item.empty() || (field == "activations" && item == kGgmlActivations)) {
      out.push_back({item, nullptr});  // "ggml": Emulation::ggml_products
      continue;
    }
    absl::StatusOr<std::shared_ptr<const Scheme>> s = SchemeFor(field, item);
    if (!s.ok()) return s.status();
    out.push_back({item, *std::move(s)});
  }
  return out;
}

// --kv's items: a scheme with, optionally, ":rotate" (llama.cpp's KV
// rotation, model/forward.h KvRotation) or ":rotate=N" (blocks of N);
// ":rotate=hadamard[N]" is left to the scheme, which rotates each stored
// head vector and back (the same product as ":rotate=N" in exact arithmetic).
struct KvItem {
  std::string name;
  std::shared_ptr<const Scheme> scheme;
  KvRotation rotation;
};
absl::StatusOr<std::vector<KvItem>> KvList(const std::string& list) {
  std::vector<KvItem> out;
  for (const std::string& item : Items(list)) {
    KvItem kv;
    kv.name = item;
    std::vector<std::string> parts = absl::StrSplit(item, ':');
    std::vector<std::string> kept;
    for (size_t i = 0; i < parts.size(); ++i) {
      absl::string_view part = parts[i];
      // rotate=hadamard[N] is the scheme's own rotation (quant/rotated_scheme.cc).
      if (i == 0 || !absl::ConsumePrefix(&part, "rotate") ||
          absl::StartsWith(part, "=hadamard")) {
        kept.push_back(parts[i]);
        continue;
      }
      if (kv.rotation.mode != KvRotation::kNone) {
        return OptionError("kv", absl::StrCat("'", item, "': rotate given twice"));
      }
      if (part.empty()) {
        kv.rotation.mode = KvRotation::kLlamaCpp;
      } else if (absl::ConsumePrefix(&part, "=") && absl::SimpleAtoi(part, &kv.rotation.block) &&
                 IsPowerOfTwo(kv.rotation.block) && kv.rotation.block <= (int64_t{1} << 16)) {
        kv.rotation.mode = KvRotation::kBlocks;
      } else {
        return OptionError("kv", absl::StrCat("'", item, "': rotate takes no value (llama.cpp's ",
                                              "sizes) or a power of two (rotate=32)"));
      }
    }
    const std::string scheme = absl::StrJoin(kept, ":");
    if (!scheme.empty()) {
      absl::StatusOr<std::shared_ptr<const Scheme>> s = SchemeFor("kv", scheme);
      if (!s.ok()) return s.status();
      kv.scheme = *std::move(s);
    }
    out.push_back(std::move(kv));
  }
  return out;
}

absl::StatusOr<std::vector<std::pair<std::string, std::optional<Format>>>> FormatList(
    const std::string& list) {
  std::vector<std::pair<std::string, std::optional<Format>>> out;
  for (const std::string& item : Items(list)) {
    if (item.empty()) {
      out.push_back({"", std::nullopt});
      continue;
    }
    absl::StatusOr<Format> f = FindFormat(item);
    if (!f.ok()) return OptionError("compute", absl::StrCat(item, ": ", f.status().message()));
    if (!f->is_float()) {
      return OptionError("compute", absl::StrCat(item, " is not a floating format"));
    }
    out.push_back({f->name, *f});
  }
  return out;
}

}  // namespace

const std::vector<std::string>& DefaultEvalWeights() {
  static const auto* list = new std::vector<std::string>{
      "fp16", "bf16",  "fp8_e4m3fn", "fp8_e4m3fn-channel", "int8-channel", "int4-g128",
      "nf4",  "mxfp4", "q4_0"};
  return *list;
}

absl::StatusOr<std::vector<EvalCandidate>> MakeCandidates(const SiteLists& o) {
  const bool any =
      !o.weights.empty() || !o.activations.empty() || !o.kv.empty() || !o.compute.empty();
  absl::StatusOr<std::vector<WeightCandidate>> weights = WeightCandidates(
      any || !o.weights_files.empty() ? o.weights : absl::StrJoin(DefaultEvalWeights(), ","));
  if (!weights.ok()) return weights.status();
  // Files join the weight candidates; without --weights they are the only
  // ones (the float32 weights are the reference).
  if (!o.weights_files.empty() && o.weights.empty()) weights->clear();
  for (const std::string& file : o.weights_files) {
    if (file.empty()) return OptionError("weights_file", "an empty file name");
    weights->push_back({file, {}, file});
  }
  auto activations = SchemeList("activations", o.activations);
  if (!activations.ok()) return activations.status();
  auto kv = KvList(o.kv);
  if (!kv.ok()) return kv.status();
  auto compute = FormatList(o.compute);
  if (!compute.ok()) return compute.status();
  const size_t count = weights->size() * activations->size() * kv->size() * compute->size();
  if (count > kMaxCandidates) {
    return OptionError("weights", absl::StrCat(count, " candidates (every combination of the ",
                                               "site lists), above the limit of ", kMaxCandidates));
  }
  std::vector<EvalCandidate> out;
  for (const WeightCandidate& w : *weights) {
    for (const auto& [a_name, a] : *activations) {
      for (const KvItem& kv_item : *kv) {
        const std::string& kv_name = kv_item.name;
        for (const auto& [c_name, c] : *compute) {
          EvalCandidate e;
          e.weights = w.spec;
          // "PATTERN=none" is a rule with no scheme: it wins the match and
          // keeps those matrices in float32.
          e.weight_rules = w.rules;
          e.weights_file = w.file;
          e.activations = a_name;
          e.kv = kv_name;
          e.compute = c_name;
          e.emulation.activations = a;
          e.emulation.ggml_products = a_name == kGgmlActivations;
          e.emulation.kv = kv_item.scheme;
          e.emulation.kv_rotation = kv_item.rotation;
          e.emulation.compute = c;
          std::vector<std::string> parts;
          const bool only_weights = a_name.empty() && kv_name.empty() && c_name.empty();
          if (!w.spec.empty()) parts.push_back(only_weights ? w.spec : "w=" + w.spec);
          if (!a_name.empty()) parts.push_back("a=" + a_name);
          if (!kv_name.empty()) parts.push_back("kv=" + kv_name);
          if (!c_name.empty()) parts.push_back("compute=" + c_name);
          e.label = parts.empty() ? "fp32" : absl::StrJoin(parts, " ");
          out.push_back(std::move(e));
        }
      }
    }
  }
  return out;
}

EvalCandidate RulesCandidate(const std::string& label, std::vector<WeightRule> rules) {
  EvalCandidate c;
  c.label = label;
  c.weights = label;
  c.weight_rules = std::move(rules);
  return c;
}

bool Calibrates(const EvalCandidate& c) {
  for (const WeightRule& r : c.weight_rules) {
    if (r.scheme != nullptr && r.calibration.active()) return true;
  }
  return false;
}

std::string WeightsKey(const EvalCandidate& c) {
  if (!c.weights_file.empty()) return absl::StrCat("file ", c.weights_file);
  if (c.weight_rules.empty()) return "";
  std::vector<std::string> rules;
  for (const WeightRule& r : c.weight_rules) {
    rules.push_back(absl::StrCat(r.pattern, "=", r.scheme != nullptr ? r.scheme->name() : "none",
                                 r.calibration.Suffix()));
  }
  // The importance matrix by identity: candidates share one only when they
  // were given the same.
  return absl::StrCat("rules ", absl::StrJoin(rules, ","), " importance ",
                      reinterpret_cast<uintptr_t>(c.importance.get()), " calibration ",
                      reinterpret_cast<uintptr_t>(c.calibration.get()));
}

}  // namespace lowp
