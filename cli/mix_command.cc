// lowp mix: the per-tensor types that fit a budget, chosen by measured loss.
#include <cmath>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "api/mix.h"
#include "cli/commands.h"
#include "cli/shared.h"
#include "cli/table.h"

namespace lowp::cli {

const char kMixHelp[] =
    "usage: lowp mix (--bits-per-weight B | --bytes N | --device D [JOB]) [--model DIR]\n"
    "                [--types LIST] [--sensitivity predicted|exact]\n"
    "                [--text FILE [--ctx N] [--chunks N] | --tokens F | --sample N:LEN]\n"
    "                [--tune-text FILE [--tune-ctx N] [--tune-chunks N] | --tune-tokens F |\n"
    "                 --tune-sample N:LEN] [--baselines LIST|none] [--random-mixes K]\n"
    "                [--random-seed S] [--imatrix FILE] [--calib-text FILE [--calib-ctx N]\n"
    "                 [--calib-chunks N] | --calib-tokens F] [--out FILE]\n"
    "                [--expert-groups layer|each] [--shard I/N --table-out F | --tables LIST]\n"
    "                [--json] [--threads N] [--quiet]\n"
    "\n"
    "Chooses a type for every matrix of the model (the embedding, each layer's\n"
    "attention and MLP matrices, lm_head unless tied) so that the matrices fit the\n"
    "budget with the least loss, and checks the choice end to end:\n"
    "  1. sensitivity: the mean KL each matrix costs alone in each type, every other\n"
    "     weight float32, on the tuning tokens (a candidate starts from the\n"
    "     reference's hidden state at its layer): predicted (default) from one probe\n"
    "     type per matrix evaluated end to end, the other types' KL scaled from it by\n"
    "     their weight errors on the matrix (imatrix-weighted when given; one forward\n"
    "     per matrix; calibrated types and routers are evaluated in each); or\n"
    "     --sensitivity exact, every matrix in every type evaluated;\n"
    "  2. prediction: a mix's KL is the sum of its matrices' costs;\n"
    "  3. allocation: the mix of least predicted KL within the budget, exactly\n"
    "     (branch and bound; else the bound it is within is printed);\n"
    "  4. verification on other tokens: the mix, llama.cpp's recipes (Q2_K .. Q8_0,\n"
    "     --baselines) and lowp's mix at each recipe's own size, predicted beside\n"
    "     measured KL, top-1 and perplexity; --random-mixes K random assignments\n"
    "     show how well the prediction ranks mixes (Spearman, median error).\n"
    "Prints the mix as eval's --weights rules and as llama-quantize arguments.\n"
    "--bits-per-weight: over the matrices mixed (storage bits / their elements,\n"
    "  as llama.cpp counts a type's bits); --bytes: their bytes (units as 4.2GB).\n"
    "--device D: what device D (lowp size --list-devices; or NAME:MEMORY) leaves for\n"
    "  the matrices when it serves the model, by lowp size's memory model: JOB is\n"
    "  --seq N (context, 4096), --batch N (sequences, 1), --kv F (KV cache, fp16),\n"
    "  --prefill-tokens N, --buffers BYTES (2GB), --headroom F (0); norms and biases\n"
    "  are counted at float32.\n"
    "--types: default q2_K,q3_K,q4_K,q5_K,q6_K,q8_0,iq4_xs,fp16 (those that apply\n"
    "  to every row); any lowp scheme is accepted, calibrated ones too (q4_K:gptq,\n"
    "  int4-g128:awq, as eval's --weights): each matrix alone calibrated on the\n"
    "  --calib- tokens (default the bundled TinyStories calibration text, ctx 256, 64\n"
    "  chunks), the embedding and output head rounded as the type's scheme. A mix\n"
    "  with calibrated types has no llama-quantize line (it would round them again).\n"
    "--imatrix: an importance matrix every type and recipe quantizes with (as\n"
    "  llama-quantize --imatrix; lowp imatrix makes one); needed for iq2_xxs,\n"
    "  iq2_xs, iq1_s and the IQ1/IQ2/IQ3_XXS/Q2_K_S baselines.\n"
    "--out FILE: writes the chosen mix as lowp quantize --model does: FILE.gguf is\n"
    "  llama.cpp's model file with each matrix the mix's own bytes (calibrated types\n"
    "  included; the vocabulary of the model's tokenizer, or of --tokenizer with\n"
    "  --text), FILE.safetensors the dequantized model.\n"
    "--expert-groups: a mixture of experts' routed experts: layer (default), each\n"
    "  kind (gate, up, down) of a layer's experts one group, as llama.cpp stores\n"
    "  them; each, every expert's matrix alone (no llama-quantize line). Routers,\n"
    "  shared experts and attention are groups of their own.\n"
    "--shard I/N --table-out F: measures only every N-th matrix (every N-th\n"
    "  candidate with --sensitivity exact) of the sensitivity sweep from the I-th\n"
    "  and writes them to F, nothing more (run the N shards on N machines or\n"
    "  processes with the same other options); --tables F1,...,FN: reads the N\n"
    "  shards instead of measuring, then allocates and verifies: the same result\n"
    "  as one run, bit for bit. A shard of another model, type list, sensitivity\n"
    "  method, tuning tokens, imatrix or calibration is refused, naming it.\n"
    "--model: default the bundled stories3M-hf (llama, 3.3 M parameters, rows of\n"
    "  256 and 768, so llama.cpp's super-block types apply).\n"
    "Tokens: the verification's as eval takes them (default --sample 16:256,\n"
    "  seed 0); the tuning's with the tune- prefix (default --tune-sample 8:256,\n"
    "  seed 1). Text runs llama.cpp's perplexity protocol (see lowp eval --help).\n";

namespace {

std::string Sci(double v) { return std::isnan(v) ? "-" : absl::StrFormat("%.3e", v); }
std::string Fixed(double v, int digits) {
  return std::isnan(v) ? "-" : absl::StrFormat("%.*f", digits, v);
}

void PrintResult(const api::MixResult& r) {
  if (!r.shard.empty()) {
    std::printf("shard       %s of the sensitivity sweep (%s): %lld candidates measured on %s "
                "(%llu positions)\n",
                r.shard.c_str(), MixSensitivityName(r.method),
                static_cast<long long>(r.candidates_measured), Printable(r.tune_tokens).c_str(),
                static_cast<unsigned long long>(r.tune_positions));
    std::printf("wrote       %s (merge the shards with --tables)\n",
                Printable(r.table_written).c_str());
    return;
  }
  const MixRow& mix = r.rows.front();
  std::printf("model       %s: %zu matrices, %llu weights\n", Printable(ShortPath(r.model)).c_str(),
              r.groups.size(), static_cast<unsigned long long>(r.weights));
  std::printf("types       %s\n", absl::StrJoin(r.types, " ").c_str());
  std::printf("sensitivity %s: %lld candidates measured on %s (%llu positions)\n",
              MixSensitivityName(r.method), static_cast<long long>(r.candidates_measured),
              Printable(ShortPath(r.tune_tokens)).c_str(),
              static_cast<unsigned long long>(r.tune_positions));
  if (const std::string probe = r.Probe(); !probe.empty()) {
    std::printf("            each matrix probed in %s, the other types' KL predicted from\n"
                "            their weight errors\n",
                probe.c_str());
  }
  std::printf("verified on %s (%llu positions); float32 perplexity %.4f\n",
              Printable(ShortPath(r.verify_tokens)).c_str(),
              static_cast<unsigned long long>(r.verify_positions), r.reference_perplexity);
  std::printf("budget      %llu bytes (%.4f bits per weight)\n",
              static_cast<unsigned long long>(r.budget_bytes),
              BitsPerWeight(r.budget_bytes, r.weights));
  if (r.device) {
    const DeviceBudget& d = *r.device;
    std::printf("            %s: %lld bytes after headroom, %lld for the job beside the matrices\n"
                "            (context %lld x batch %lld, KV cache %s %lld bytes; buffers,\n"
                "            workspace, norms)%s\n",
                d.device.name.c_str(), static_cast<long long>(d.capacity_bytes),
                static_cast<long long>(d.other_bytes), static_cast<long long>(d.sizing.seq),
                static_cast<long long>(d.sizing.batch), d.sizing.kv.c_str(),
                static_cast<long long>(d.kv_cache_bytes),
                d.matrices_bytes > static_cast<int64_t>(r.budget_bytes)
                    ? "; the matrices fit in float32: float32's bytes are the budget"
                    : "");
  }
  if (r.allocation.exact) {
    std::printf("allocation  exact (%lld nodes)\n", static_cast<long long>(r.allocation.nodes));
  } else {
    std::printf("allocation  within %.3e of the best (bound %.6e; search stopped at %lld nodes)\n",
                mix.predicted_kl - r.allocation.lower_bound, r.allocation.lower_bound,
                static_cast<long long>(r.allocation.nodes));
  }
  std::printf("\n");
  std::vector<Row> rows = {{"mix", "bits/w", "bytes", "predicted KL", "measured KL", "KL 99%",
                            "top-1", "ppl", "ppl ratio"}};
  for (const MixRow& row : r.rows) {
    double kld_99 = NAN;
    for (const auto& [f, v] : row.llama_cpp.kld_percentiles) {
      if (f == 0.99) kld_99 = v;
    }
    rows.push_back({row.label, absl::StrFormat("%.4f", row.bits_per_weight),
                    std::to_string(row.bytes), Sci(row.predicted_kl), Sci(row.kl_mean),
                    Sci(kld_99), absl::StrFormat("%.2f%%", 100 * row.top1_agreement), Fixed(row.perplexity, 4),
                    Fixed(row.perplexity / r.reference_perplexity, 5)});
  }
  PrintTable(rows, {0});
  if (!std::isnan(r.spearman)) {
    std::printf("\nprediction over the random mixes: Spearman %.3f, median |predicted - measured|"
                " / measured %.1f%%\n",
                r.spearman, 100 * r.median_relative_error);
  }
  std::printf("\nthe mix, per matrix (type: the KL it costs, %s)\n",
              r.Probe().empty() ? "measured" : "measured in the probe type, else predicted");
  std::vector<Row> table = {{"tensor", "llama.cpp", "type", "KL"}};
  for (size_t g = 0; g < r.groups.size(); ++g) {
    const size_t t = static_cast<size_t>(r.allocation.choice[g]);
    table.push_back({r.groups[g].name, r.groups[g].llama_cpp, r.types[t],
                     Sci(r.sensitivity[g][t])});
  }
  PrintTable(table, {0, 1, 2});
  std::printf("\nas eval's rules: --weights '%s'\n", absl::StrJoin(r.rules, ",").c_str());
  if (r.llama_quantize_error.empty()) {
    std::printf("as llama-quantize: %s\n",
                r.llama_quantize.Line("MODEL-F32.gguf", "OUT.gguf").c_str());
  } else {
    std::printf("as llama-quantize: none (%s)\n", r.llama_quantize_error.c_str());
  }
  if (!r.written.empty()) std::printf("written: %s\n", Printable(r.written).c_str());
}

}  // namespace

int MixCommand(const std::vector<std::string>& argv) {
  std::vector<std::string> values = {"model",     "tensors",      "bits-per-weight", "bytes",
                                     "device",    "types",        "baselines",
                                     "random-mixes", "random-seed", "threads", "imatrix",
                                     "out",       "expert-groups", "shard",
                                     "table-out", "tables", "sensitivity"};
  for (const std::string& name : JobValueOptions()) values.push_back(name);
  for (const std::string& prefix :
       {std::string(), std::string("tune-"), std::string("calib-")}) {
    for (std::string& name : TokenOptionNames(prefix)) values.push_back(std::move(name));
  }
  absl::StatusOr<Args> args = Args::Parse(argv, values, {"json", "quiet"});
  if (!args.ok()) return Fail(args.status());
  if (!args->positional().empty()) {
    return Fail(absl::InvalidArgumentError("mix takes no positional arguments; see --help"));
  }
  api::MixOptions o;
  absl::StatusOr<int> threads = ParseThreads(*args);
  if (!threads.ok()) return Fail(threads.status());
  o.threads = *threads;
  o.model = args->Value("model").value_or("");
  if (std::optional<std::string> t = args->Value("tensors")) o.tensors = SplitNames(*t);
  // The values' checks are the budget's own (mix/budget.h CheckMixBudget).
  if (std::optional<std::string> b = args->Value("bits-per-weight")) {
    double bits = 0;
    if (!absl::SimpleAtod(*b, &bits)) {
      return Fail(absl::InvalidArgumentError(
          absl::StrCat("--bits-per-weight '", *b, "': want a number > 0")));
    }
    o.bits_per_weight = bits;
  }
  if (std::optional<std::string> b = args->Value("bytes")) {
    absl::StatusOr<int64_t> bytes = ParseBytes(*b, "--bytes");
    if (!bytes.ok()) return Fail(bytes.status());
    if (*bytes < 0) {
      return Fail(absl::InvalidArgumentError(absl::StrCat("--bytes '", *b, "': want more than 0")));
    }
    o.bytes = static_cast<uint64_t>(*bytes);
  }
  o.device = args->Value("device").value_or("");
  o.imatrix = args->Value("imatrix").value_or("");
  o.out = args->Value("out").value_or("");
  o.expert_groups = args->Value("expert-groups").value_or("layer");
  o.shard = args->Value("shard").value_or("");
  o.sensitivity = args->Value("sensitivity").value_or("predicted");
  o.table_out = args->Value("table-out").value_or("");
  if (std::optional<std::string> t = args->Value("tables")) o.tables = SplitNames(*t);
  if (absl::Status s = ReadJobOptions(*args, &o.job); !s.ok()) return Fail(s);
  if (o.device.empty()) {
    for (const std::string& name : JobValueOptions()) {
      if (args->Value(name)) {
        return Fail(absl::InvalidArgumentError(
            absl::StrCat("--", name, " describes the job beside the weights: give --device")));
      }
    }
  }
  for (auto [name, list] : {std::pair<const char*, std::vector<std::string>*>{"types", &o.types},
                            {"baselines", &o.baselines}}) {
    absl::StatusOr<std::vector<std::string>> items = SplitList(*args, name);
    if (!items.ok()) return Fail(items.status());
    *list = *std::move(items);
  }
  if (std::optional<std::string> k = args->Value("random-mixes")) {
    if (!absl::SimpleAtoi(*k, &o.random_mixes) || o.random_mixes < 0) {
      return Fail(absl::InvalidArgumentError(
          absl::StrCat("--random-mixes '", *k, "': want a number >= 0")));
    }
  }
  if (std::optional<std::string> s = args->Value("random-seed")) {
    if (!absl::SimpleAtoi(*s, &o.seed)) {
      return Fail(absl::InvalidArgumentError(
          absl::StrCat("--random-seed '", *s, "': want a number >= 0")));
    }
  }
  if (absl::Status s = ReadTokenOptions(*args, "", o.verify); !s.ok()) return Fail(s);
  if (absl::Status s = ReadTokenOptions(*args, "tune-", o.tune); !s.ok()) return Fail(s);
  if (absl::Status s = ReadTokenOptions(*args, "calib-", o.calibration, /*text_by_default=*/true);
      !s.ok()) {
    return Fail(s);
  }
  std::optional<Progress> line;
  const bool quiet = args->Has("quiet");
  o.progress = [&line, quiet](int64_t done, int64_t total, const std::string& what) {
    // A new line of progress for each pass (the rounds restart the count).
    if (!line || done == 0) line.emplace(static_cast<size_t>(total), quiet);
    line->Step(what);
  };
  absl::StatusOr<api::MixResult> result = api::Mix(o);
  line.reset();
  if (!result.ok()) return Fail(result.status());
  if (args->Has("json")) {
    EmitJson(api::ToJson(*result));
    return 0;
  }
  PrintResult(*result);
  return 0;
}

}  // namespace lowp::cli
