#include "mix/table_file.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <memory>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "eval/calibrator.h"
#include "formats/option_error.h"
#include "io/mapped_file.h"
#include "io/output_file.h"
#include "io/strict_json.h"
#include "nlohmann/json.hpp"

namespace lowp {
namespace {

using Json = nlohmann::ordered_json;

constexpr int64_t kMaxShards = 4096;
constexpr uint64_t kMaxShardFileBytes = uint64_t{1} << 30;
constexpr const char* kFormat = "lowp-mix-table";
constexpr int kVersion = 2;

// FNV-1a over bytes, as 16 hex digits: a fingerprint, not a defence.
struct Fingerprint {
  uint64_t h = 1469598103934665603ull;
  void Add(const void* data, size_t n) {
    const auto* p = static_cast<const uint8_t*>(data);
    for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 1099511628211ull;
  }
  template <class T>
  void Add(const T& v) {
    Add(&v, sizeof(v));
  }
  std::string Hex() const { return absl::StrCat(absl::Hex(h, absl::kZeroPad16)); }
};

std::string TokensFingerprint(std::span<const int32_t> ids, int64_t length, int64_t scored_from) {
  Fingerprint f;
  f.Add(ids.data(), ids.size_bytes());
  f.Add(length);
  f.Add(scored_from);
  return f.Hex();
}

// What a shard shares with the run that merges it, field by field.
absl::StatusOr<Json> Identity(const MixTable& t, const MixTokens& tune) {
  Json groups = Json::array();
  for (const MixGroup& g : t.groups) {
    groups.push_back({g.name, g.rows, g.cols, g.count});
  }
  Json id;
  id["groups"] = groups;
  id["types"] = t.types;
  id["sensitivity"] = MixSensitivityName(t.method);
  id["tokens"] = {{"description", tune.description},
                  {"fingerprint", TokensFingerprint(tune.ids, tune.length, tune.scored_from)}};
  std::string imatrix = "none";
  if (!t.imatrix.empty()) {  // read a chunk at a time: an expert model's can be large
    std::ifstream in(t.imatrix, std::ios::binary);
    if (!in) return absl::NotFoundError(absl::StrCat("imatrix ", t.imatrix, ": cannot open"));
    Fingerprint f;
    std::vector<char> chunk(size_t{1} << 20);
    while (in.read(chunk.data(), static_cast<std::streamsize>(chunk.size())) || in.gcount() > 0) {
      f.Add(chunk.data(), static_cast<size_t>(in.gcount()));
    }
    imatrix = f.Hex();
  }
  id["imatrix"] = imatrix;
  id["calibration"] = t.calibration == nullptr
                          ? std::string("none")
                          : TokensFingerprint(t.calibration->ids, t.calibration->length, -1);
  return id;
}

// A number that may be NaN or Inf (JSON has none: written as strings, read
// back exactly).
Json Number(double v) { return std::isfinite(v) ? Json(v) : Json(absl::StrCat(v)); }
bool ReadNumber(const Json& j, double& v) {
  if (j.is_number()) {
    v = j.get<double>();
    return true;
  }
  return j.is_string() && absl::SimpleAtod(j.get<std::string>(), &v);
}

// Whether the shard holds table entry (g, t): its unit's (mix/sensitivity.h).
bool Holds(const MixShard& shard, const MixTable& table, size_t g, size_t t) {
  const size_t unit = table.method == MixSensitivity::kPredicted ? g : g * table.types.size() + t;
  return shard.Takes(static_cast<int64_t>(unit));
}

}  // namespace

absl::StatusOr<MixShard> ParseMixShard(absl::string_view text) {
  const std::vector<absl::string_view> parts = absl::StrSplit(text, '/');
  MixShard s;
  if (parts.size() != 2 || !absl::SimpleAtoi(parts[0], &s.index) ||
      !absl::SimpleAtoi(parts[1], &s.count) || s.count < 1 || s.count > kMaxShards ||
      s.index < 1 || s.index > s.count) {
    return OptionError("shard", absl::StrCat("'", text, "': want I/N with 1 <= I <= N <= ",
                                             kMaxShards));
  }
  return s;
}

absl::Status WriteMixShard(const MixTable& table, const MixTokens& tune, const MixShard& shard,
                           const std::string& path) {
  absl::StatusOr<Json> id = Identity(table, tune);
  if (!id.ok()) return id.status();
  Json j;
  j["format"] = kFormat;
  j["version"] = kVersion;
  j["model"] = table.model;
  j["identity"] = *std::move(id);
  j["shard"] = {{"index", shard.index}, {"count", shard.count}};
  j["positions"] = table.tune_positions;
  // [group, type, KL, measured end to end, weight error (null: none)].
  Json entries = Json::array();
  const size_t T = table.types.size();
  for (size_t g = 0; g < table.groups.size(); ++g) {
    for (size_t t = 0; t < T; ++t) {
      if (!Holds(shard, table, g, t)) continue;
      const bool error = !table.weight_error.empty();
      entries.push_back({g, t, Number(table.sensitivity[g][t]), table.measured[g][t] != 0,
                         error ? Number(table.weight_error[g][t]) : Json()});
    }
  }
  j["kl_mean"] = entries;
  absl::StatusOr<std::unique_ptr<OutputFile>> out = OutputFile::Create(path, "table_out");
  if (!out.ok()) return out.status();
  if (absl::Status s = (*out)->Write(j.dump(1) + "\n"); !s.ok()) return s;
  return (*out)->Commit();
}

absl::Status ReadMixShards(const std::vector<std::string>& paths, const MixTokens& tune,
                           MixTable& table) {
  std::vector<std::pair<std::string, std::string>> files;
  for (const std::string& path : paths) {
    absl::StatusOr<std::string> text = ReadRegularFile(path, kMaxShardFileBytes);
    if (!text.ok()) return OptionError("tables", text.status().message());
    files.emplace_back(path, *std::move(text));
  }
  return MergeMixShards(files, tune, table);
}

absl::Status MergeMixShards(const std::vector<std::pair<std::string, std::string>>& files,
                            const MixTokens& tune, MixTable& table) {
  if (files.empty()) return OptionError("tables", "no file given");
  absl::StatusOr<Json> want = Identity(table, tune);
  if (!want.ok()) return want.status();
  const size_t G = table.groups.size(), T = table.types.size();
  table.sensitivity.assign(G, std::vector<double>(T, NAN));
  table.measured.assign(G, std::vector<uint8_t>(T, 0));
  table.weight_error.clear();
  if (table.method == MixSensitivity::kPredicted) {
    table.weight_error.assign(G, std::vector<double>(T, NAN));
  }
  std::vector<uint8_t> seen(G * T, 0);
  std::map<int64_t, std::string> shards;  // index -> file
  int64_t count = 0;
  uint64_t positions = 0;
  for (const auto& file : files) {
    const std::string& path = file.first;
    const std::string& text = file.second;
    auto fail = [&](const std::string& why) {
      return absl::InvalidArgumentError(absl::StrCat("tables: ", path, ": ", why));
    };
    absl::StatusOr<Json> parsed = ParseStrictJson(text, path);
    if (!parsed.ok()) return OptionError("tables", parsed.status().message());
    const Json& j = *parsed;
    if (!j.is_object() || j.value("format", Json()) != kFormat) {
      return fail(absl::StrCat("not a ", kFormat, " file (lowp mix --table-out writes them)"));
    }
    if (j.value("version", Json()) != kVersion) return fail("a version lowp does not read");
    const Json& id = j.value("identity", Json());
    for (const auto& [field, what] :
         {std::pair{"groups", "another model's matrices"}, std::pair{"types", "another type list"},
          std::pair{"sensitivity", "another sensitivity method"},
          std::pair{"tokens", "other tuning tokens"},
          std::pair{"imatrix", "another importance matrix"},
          std::pair{"calibration", "other calibration tokens"}}) {
      if (!id.is_object() || !id.contains(field) || id[field] != (*want)[field]) {
        return fail(absl::StrCat(field, ": the shard was measured with ", what,
                                 ", not this run's"));
      }
    }
    const Json& s = j.value("shard", Json());
    if (!s.is_object() || !s.value("index", Json()).is_number_integer() ||
        !s.value("count", Json()).is_number_integer()) {
      return fail("shard: missing or not integers");
    }
    MixShard shard{s["index"].get<int64_t>(), s["count"].get<int64_t>()};
    if (shard.count < 1 || shard.count > kMaxShards || shard.index < 1 ||
        shard.index > shard.count) {
      return fail("shard: index and count out of range");
    }
    if (count != 0 && shard.count != count) {
      return fail(absl::StrCat("shard: one of ", shard.count, " shards, the others of ", count));
    }
    count = shard.count;
    if (auto [it, fresh] = shards.emplace(shard.index, path); !fresh) {
      return fail(
          absl::StrCat("shard ", shard.index, "/", count, " again (also ", it->second, ")"));
    }
    const Json& p = j.value("positions", Json());
    if (!p.is_number_unsigned() || (positions != 0 && p.get<uint64_t>() != positions)) {
      return fail("positions: missing or not the other shards'");
    }
    positions = p.get<uint64_t>();
    const Json& entries = j.value("kl_mean", Json());
    if (!entries.is_array()) return fail("kl_mean: not a list");
    const bool predicted = table.method == MixSensitivity::kPredicted;
    for (const Json& e : entries) {
      if (!e.is_array() || e.size() != 5 || !e[0].is_number_unsigned() ||
          !e[1].is_number_unsigned() || e[0].get<uint64_t>() >= G ||
          e[1].get<uint64_t>() >= T || !e[3].is_boolean() || e[4].is_null() == predicted) {
        return fail("kl_mean: an entry is not [group, type, KL, measured, weight error] of "
                    "this table");
      }
      const size_t g = e[0].get<size_t>(), t = e[1].get<size_t>();
      double kl = NAN, error = NAN;
      if (!ReadNumber(e[2], kl) || (predicted && !ReadNumber(e[4], error))) {
        return fail("kl_mean: a value is not a number");
      }
      if (!Holds(shard, table, g, t) || seen[g * T + t]) {
        return fail("kl_mean: an entry of another shard, or twice");
      }
      seen[g * T + t] = 1;
      table.sensitivity[g][t] = kl;
      table.measured[g][t] = e[3].get<bool>();
      if (predicted) table.weight_error[g][t] = error;
    }
  }
  if (static_cast<int64_t>(shards.size()) != count) {
    for (int64_t i = 1; i <= count; ++i) {
      if (!shards.contains(i)) {
        return OptionError("tables", absl::StrCat("shard ", i, "/", count, " is missing"));
      }
    }
  }
  for (size_t k = 0; k < seen.size(); ++k) {
    if (!seen[k]) {
      return OptionError("tables", absl::StrCat("shard ", k % count + 1, "/", count,
                                                " lacks the KL of ", table.groups[k / T].name,
                                                " in ", table.types[k % T]));
    }
  }
  table.tune_tokens = tune.description;
  table.tune_positions = positions;
  table.candidates_measured = 0;  // by the shards
  for (const std::vector<uint8_t>& row : table.measured) {
    table.candidates_measured += std::count(row.begin(), row.end(), 1);
  }
  return absl::OkStatus();
}

}  // namespace lowp
