// lowp eval: what emulated formats do to the model's outputs.
#include <cmath>
#include <cstdio>
#include <optional>
#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "api/eval.h"
#include "api/text.h"
#include "cli/commands.h"
#include "cli/shared.h"
#include "cli/table.h"

namespace lowp::cli {

const char kEvalHelp[] =
    "usage: lowp eval [--model DIR | --model CONFIG --tensors FILES] [--text FILE [--ctx N]\n"
    "                 [--chunks N] [--tokenizer FILE] | --tokens FILE.npy | --sample N:LEN]\n"
    "                 [--seed S] [--weights LIST] [--weights-file FILES] [--imatrix FILE]\n"
    "                 [--calib-text FILE [--calib-ctx N] [--calib-chunks N] |\n"
    "                  --calib-tokens FILE.npy] [--activations LIST] [--kv LIST] [--compute LIST] [--layers]\n"
    "                 [--census] [--json | --csv] [--threads N] [--batch-tokens N] [--quiet]\n"
    "                 [--matrices auto|whole|one-at-a-time]\n"
    "\n"
    "Runs the model in float32 and each candidate (emulated sites) on the same\n"
    "tokens, one decoder layer at a time for all of them (memory: about two layers\n"
    "in float32, whatever the model's size), and compares their next-token\n"
    "distributions position by position:\n"
    "KL(P_ref || P_q) in nats (mean, median, p90, p99, max), top-1 agreement, delta p\n"
    "of the next token (q - p), both models' perplexity over positions 1..L-1, and\n"
    "per layer the relative RMSE of the hidden state (--layers). NaN or inf counts\n"
    "per site (--census) and makes KL infinite.\n"
    "--model: a Hugging Face directory (config.json + model.safetensors or its\n"
    "  index), or a config.json / preset with --tensors; default: the bundled\n"
    "  stories260K-hf (llama, 292,800 parameters, vocab 512).\n"
    "--text: a text file, tokenized whole by the model's tokenizer (the snapshot's\n"
    "  tokenizer.model, tokenizer.json or tok*.bin, or --tokenizer FILE; see\n"
    "  `lowp tokenize`), BOS first when it adds one, and measured by llama.cpp's\n"
    "  perplexity protocol: chunks of --ctx tokens (default 512; --chunks N of them\n"
    "  at most), BOS first in each, only positions ctx/2 .. ctx-2 scored, each\n"
    "  predicting the next. Adds llama.cpp's statistics: PPL(Q) and the ratio to\n"
    "  the reference with their +/-, mean KLD +/-, its 99.9%, 99% and median, RMS\n"
    "  dp and same top p (all in --json).\n"
    "--tokens: .npy of int32/int64 ids, [sequences, length] or [length]; else\n"
    "  --sample N:LEN (default 16:128) sequences sampled from the float32 model at\n"
    "  temperature 1, BOS first, seeded by --seed (default 0), decoded together: each\n"
    "  step reads the model once (for a large model, give --tokens).\n"
    "Sites (comma-separated candidates, 'none' = float32; every combination runs):\n"
    "  --weights      schemes on the decoder layers' linear layers; PATTERN=SCHEME\n"
    "                 items in a row make one candidate with per-tensor globs\n"
    "                 ('*.mlp.down_proj.weight=q8_0,*=int4-g128'; '*' also takes the\n"
    "                 embedding and lm_head). Default when no site is given:\n"
    "                 fp16,bf16,fp8_e4m3fn,fp8_e4m3fn-channel,int8-channel,int4-g128,\n"
    "                 nf4,mxfp4,q4_0.\n"
    "  --activations  schemes on the input of every linear layer, one row per token\n"
    "                 (int8-channel: per-token absmax int8; fp8_e4m3fn-tensor: one\n"
    "                 scale per sequence; mxfp8: blocks along the reduction dim;\n"
    "                 fp8_e4m3fn-g128: DeepSeek-V3's groups of 128 per token).\n"
    "                 ggml: what llama.cpp's CPU backend does to each product's\n"
    "                 input for the weight's type (q8_0 per 32 for q4_0, q5_0,\n"
    "                 q8_0, iq4_nl, mxfp4; q8_1 for q4_1, q5_1; q8_K per 256 for\n"
    "                 the k- and i-quants; f16/bf16 rounding for F16/BF16\n"
    "                 weights), lm_head's included, bit for bit as its reference\n"
    "                 quantizers: with a --weights-file GGUF (and --kv fp16, its\n"
    "                 default cache) it predicts llama-perplexity for that file.\n"
    "  --kv           schemes on each cached key (after RoPE) and value, one row\n"
    "                 per token and kv head. SCHEME:rotate rotates q, k and v by\n"
    "                 Hadamard blocks first, as llama.cpp does for a quantized\n"
    "                 cache since b8641 (heads of a multiple of 64 only: k in\n"
    "                 blocks of the largest power of two dividing the head, v in\n"
    "                 64); SCHEME:rotate=N uses blocks of N for all three.\n"
    "  A --weights scheme takes :gptq (GPTQ, calib/gptq.h): each matrix quantized\n"
    "                 column by column with the rounding errors fed forward, from\n"
    "                 the inputs the layer sees on calibration text with the\n"
    "                 layers and sub-layers before it quantized; a block's scales\n"
    "                 are the scheme's own search (ggml's, with the inputs' mean\n"
    "                 squares as its imatrix) on the updated weights. Integer\n"
    "                 schemes and llama.cpp's q*_0/q*_1, k-quants, iq4_nl, iq4_xs,\n"
    "                 ggml-mxfp4/nvfp4 and recipes ('int4-g128:gptq', 'Q4_K_M:gptq');\n"
    "                 :gptq=actorder takes columns by descending input energy\n"
    "                 (integer groups). :awq (AWQ, calib/awq.h) scales each input\n"
    "                 channel by its mean |x|^alpha (alpha searched on a grid of 20)\n"
    "                 before rounding, folded into the norm or the rows before\n"
    "                 (:awq=ALPHA takes that alpha). :smooth[=ALPHA] (SmoothQuant,\n"
    "                 calib/smooth.h; alpha 0.5) divides the inputs of q/k/v and\n"
    "                 gate/up by max|x|^alpha / max|w|^(1-alpha), folded into the\n"
    "                 norms, for candidates with --activations (W8A8).\n"
    "                 Calibration: --calib-text (default the bundled TinyStories\n"
    "                 calibration text, --calib-ctx 256, --calib-chunks 64) or\n"
    "                 --calib-tokens.\n"
    "  Any scheme takes :rotate=hadamard[N] (QuaRot): each row is rotated by a\n"
    "                 Hadamard matrix (blocks of N; the whole row when a power of\n"
    "                 two) before it is quantized and back after, on weights and\n"
    "                 activations alike ('int4-g128:rotate=hadamard' with\n"
    "                 'int8-channel:rotate=hadamard' is QuaRot's W4A8).\n"
    "  --compute      formats every matmul output and elementwise result is rounded\n"
    "                 to (nearest even; fp16 overflows to inf), counted per site.\n"
    "--weights-file: checkpoint files of the same model, each a candidate as stored:\n"
    "  a GGUF file llama.cpp made from it (llama.cpp's names, q/k rows put back in\n"
    "  order) or safetensors by Hugging Face's names (FP8 checkpoints with their\n"
    "  scale tensors: DeepSeek-V3's 128x128 weight_scale_inv, compressed-tensors'\n"
    "  weight_scale; GPTQ, AutoAWQ GEMM and compressed-tensors int/NVFP4 packed\n"
    "  weights, by the layout their config.json's quantization_config names); its\n"
    "  matrices, the model's norms and biases. Combined with the other sites as\n"
    "  --weights is.\n"
    "--imatrix: an importance matrix (llama.cpp's imatrix .gguf or .dat; lowp\n"
    "  imatrix makes one) the --weights schemes quantize each matrix with, as\n"
    "  llama-quantize --imatrix does (mixes choose as it does with one).\n"
    "--threads: 0 (default) takes every core; results do not depend on it.\n"
    "--batch-tokens: tokens per pass over the checkpoint (default: as many as 1 GiB\n"
    "  of activations holds); results do not depend on it.\n"
    "--matrices: how a layer's matrices are read: whole, or one-at-a-time (each\n"
    "  matrix, and each expert a token routes to, read and made per candidate as\n"
    "  the forward pass reaches it: memory for one instead of a layer); auto\n"
    "  (default): a layer's routed experts one at a time above 512 MiB in float32,\n"
    "  its other matrices above 2 GiB. Results do not depend on it.\n";

namespace {

std::string Sci(double v) {
  if (std::isnan(v)) return "-";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  return absl::StrFormat("%.3e", v);
}

std::string Fixed(double v, int digits) {
  if (std::isnan(v)) return "-";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  return absl::StrFormat("%.*f", digits, v);
}

std::string PlusMinus(const Estimate& e, int digits, double scale = 1) {
  return absl::StrCat(Fixed(scale * e.value, digits), " ± ", Fixed(scale * e.uncertainty, digits));
}

double At(const std::vector<std::pair<double, double>>& percentiles, double fraction) {
  for (const auto& [f, v] : percentiles) {
    if (f == fraction) return v;
  }
  return NAN;
}

// llama.cpp's final statistics, a row per candidate as its tables read.
void PrintLlamaCpp(const EvalReport& e) {
  std::printf(
      "\nas llama.cpp's perplexity --kl-divergence reports them (± its standard errors):\n");
  const LlamaCppStats* first = e.candidates.empty() ? nullptr : &e.candidates[0].llama_cpp;
  if (first != nullptr) {
    std::printf("PPL(base) %s\n", PlusMinus(first->ppl_base, 4).c_str());
  }
  std::vector<Row> rows = {{"candidate", "PPL(Q)", "PPL(Q)/PPL(base)", "mean KLD", "KLD 99.9%",
                            "KLD 99%", "KLD median", "RMS Δp %", "same top p %"}};
  for (const CandidateResult& c : e.candidates) {
    const LlamaCppStats& s = c.llama_cpp;
    rows.push_back({c.candidate.label, PlusMinus(s.ppl_q, 4), PlusMinus(s.ppl_ratio, 5),
                    PlusMinus(s.kld, 6), Fixed(At(s.kld_percentiles, .999), 6),
                    Fixed(At(s.kld_percentiles, .99), 6), Fixed(At(s.kld_percentiles, .5), 6),
                    PlusMinus(s.rms_delta_p, 3, 100), PlusMinus(s.same_top, 3, 100)});
  }
  PrintTable(rows, {0});
}

// A mixture of experts: each candidate's routing against the reference's
// over its layers with experts (per layer in --json).
void PrintRouting(const EvalReport& e) {
  std::vector<Row> rows = {{"candidate", "MoE layers", "top-k set agreement",
                            "top-k order agreement", "top-1 changed", "largest load change"}};
  for (const CandidateResult& c : e.candidates) {
    if (c.routing.empty()) continue;
    double set = 0, order = 0, changed = 0, load = 0;
    for (const RoutingResult& r : c.routing) {
      set += r.set_agreement;
      order += r.order_agreement;
      changed += r.top1_changed;
      load = std::max(load, r.max_load_change);
    }
    const double n = static_cast<double>(c.routing.size());
    rows.push_back({c.candidate.label, std::to_string(c.routing.size()),
                    api::PercentText(set / n), api::PercentText(order / n),
                    api::PercentText(changed / n), api::PercentText(load)});
  }
  if (rows.size() == 1) return;
  std::printf(
      "\nrouting: each token's top-k experts against the reference's, means over the layers\n"
      "with experts (load change: |tokens an expert takes - the reference's| / tokens, the\n"
      "largest); the routers stay float32 unless a --weights pattern names them\n"
      "(*.mlp.gate.weight, *.block_sparse_moe.gate.weight, gpt-oss's *.mlp.router.weight):\n"
      "a plain scheme takes the linear layers only\n");
  PrintTable(rows, {0});
}

void PrintResult(const api::EvalResult& r, Output output, bool layers, bool census) {
  const EvalReport& e = r.report;
  std::vector<Row> rows = {{"candidate", "bits/w", "w SQNR dB", "KL mean", "KL median", "KL p99",
                            "KL max", "top-1", "dp rms", "ppl", "ppl ratio", "nonfinite"}};
  for (const CandidateResult& c : e.candidates) {
    const bool quantized = !c.weights.tensors.empty();
    rows.push_back({c.candidate.label,
                    quantized ? absl::StrFormat("%.4g", c.weights.total.bits_per_weight()) : "32",
                    quantized ? api::SqnrText(c.weights.total.sqnr_db()) : "-", Sci(c.kl.mean),
                    Sci(c.kl.median), Sci(c.kl.p99), Sci(c.kl.max),
                    api::PercentText(c.top1_agreement), Sci(c.delta_p.rms), Fixed(c.perplexity, 4),
                    Fixed(c.perplexity / e.reference_perplexity, 5),
                    std::to_string(c.nonfinite_positions)});
  }
  if (output == Output::kCsv) {
    PrintCsv(rows);
    return;
  }
  std::printf("model     %s (%s, %lld layers, hidden %lld, vocab %lld)\n",
              Printable(ShortPath(r.model)).c_str(), r.config.model_type.c_str(),
              static_cast<long long>(r.config.num_layers),
              static_cast<long long>(r.config.hidden_size),
              static_cast<long long>(r.config.vocab_size));
  if (e.scored_from >= 0) {
    std::printf("tokenizer %s (%s)\n", Printable(ShortPath(r.tokenizer.path)).c_str(),
                r.tokenizer.kind.c_str());
    std::printf(
        "tokens    %s: %llu tokens, %lld chunks of %lld, positions %lld..%lld of each scored\n"
        "          (llama.cpp's perplexity protocol) = %llu positions\n",
        Printable(ShortPath(r.tokens)).c_str(), static_cast<unsigned long long>(r.text_tokens),
        static_cast<long long>(e.sequences), static_cast<long long>(e.sequence_length),
        static_cast<long long>(e.scored_from), static_cast<long long>(e.sequence_length - 2),
        static_cast<unsigned long long>(e.positions));
  } else {
    std::printf("tokens    %s: %lld sequences x %lld = %llu positions\n",
                Printable(ShortPath(r.tokens)).c_str(), static_cast<long long>(e.sequences),
                static_cast<long long>(e.sequence_length),
                static_cast<unsigned long long>(e.positions));
  }
  if (!r.calibration.empty()) {
    std::printf("calibrated on %s: %llu tokens (the :gptq, :awq and :smooth candidates)\n",
                Printable(ShortPath(r.calibration)).c_str(),
                static_cast<unsigned long long>(r.calibration_tokens));
  }
  std::printf("products  OpenBLAS, %s kernels (%s)\n", r.blas.core.c_str(),
              r.blas.chosen_by.c_str());
  std::printf("reference float32 perplexity %.4f (cross-entropy %.5f nats over %llu predictions)\n",
              e.reference_perplexity, e.reference_cross_entropy,
              static_cast<unsigned long long>(e.predictions));
  std::printf(
      "units     KL in nats, KL(P_ref || P_q) per position; top-1: positions whose\n"
      "          argmax agrees; dp: q(next) - p(next); bits/w and w SQNR over the\n"
      "          quantized matrices ('-': weights in float32)\n\n");
  PrintTable(rows, {0});
  if (e.scored_from >= 0) PrintLlamaCpp(e);
  PrintRouting(e);
  if (layers) {
    std::printf("\nrelative RMSE of the hidden state after each layer, ||h_q - h|| / ||h||\n");
    std::vector<Row> table;
    Row header = {"candidate"};
    for (int64_t l = 0; l < r.config.num_layers; ++l) header.push_back(absl::StrCat("layer ", l));
    table.push_back(header);
    for (const CandidateResult& c : e.candidates) {
      Row row = {c.candidate.label};
      for (double v : c.layer_relative_rmse) row.push_back(Sci(v));
      table.push_back(row);
    }
    PrintTable(table, {0});
  }
  if (census) {
    std::printf(
        "\ncensus: values per site and what the compute format did to them (candidates\n"
        "with a compute format or a non-finite value)\n");
    std::vector<Row> table = {
        {"candidate", "site", "values", "overflow", "saturated", "flushed", "nonfinite"}};
    for (const CandidateResult& c : e.candidates) {
      // Only where something can have happened: a compute format, or a
      // non-finite value.
      if (c.candidate.compute.empty() && c.census.nonfinite() == 0) continue;
      for (int i = 0; i < kSiteCount; ++i) {
        const SiteCounts& s = c.census.sites[i];
        if (s.values == 0) continue;
        table.push_back({c.candidate.label, std::string(SiteName(static_cast<Site>(i))),
                         std::to_string(s.values), std::to_string(s.overflow),
                         std::to_string(s.saturated), std::to_string(s.flushed),
                         std::to_string(s.nonfinite)});
      }
    }
    PrintTable(table, {0, 1});
  }
}

}  // namespace

int EvalCommand(const std::vector<std::string>& argv) {
  std::vector<std::string> values = {"model",       "tensors", "tokens",  "sample",
                                     "seed",        "weights", "weights-file", "activations",
                                     "kv",          "compute", "threads", "batch-tokens",
                                     "text",        "tokenizer", "ctx",   "chunks",
                                     "imatrix",     "matrices"};
  for (std::string& name : TokenOptionNames("calib-")) values.push_back(std::move(name));
  absl::StatusOr<Args> args =
      Args::Parse(argv, values, {"json", "csv", "layers", "census", "quiet"});
  if (!args.ok()) return Fail(args.status());
  if (!args->positional().empty()) {
    return Fail(absl::InvalidArgumentError("eval takes no positional arguments; see --help"));
  }
  absl::StatusOr<Output> output = ParseOutput(*args);
  if (!output.ok()) return Fail(output.status());
  api::EvalOptions o;
  absl::StatusOr<int> threads = ParseThreads(*args);
  if (!threads.ok()) return Fail(threads.status());
  o.threads = *threads;
  o.model = args->Value("model").value_or("");
  if (std::optional<std::string> t = args->Value("tensors")) o.tensors = SplitNames(*t);
  if (absl::Status s = ReadTokenOptions(*args, "", o); !s.ok()) return Fail(s);
  if (absl::Status s = ReadTokenOptions(*args, "calib-", o.calibration, /*text_by_default=*/true);
      !s.ok()) {
    return Fail(s);
  }
  o.weights = args->Value("weights").value_or("");
  o.imatrix = args->Value("imatrix").value_or("");
  if (std::optional<std::string> f = args->Value("weights-file")) {
    absl::StatusOr<std::vector<std::string>> files = SplitList(*args, "weights-file");
    if (!files.ok()) return Fail(files.status());
    o.weights_files = *files;
  }
  if (std::optional<std::string> b = args->Value("batch-tokens")) {
    if (!absl::SimpleAtoi(*b, &o.batch_tokens) || o.batch_tokens < 0) {
      return Fail(absl::InvalidArgumentError(
          absl::StrCat("--batch-tokens '", *b, "': want a number >= 0")));
    }
  }
  o.matrices = args->Value("matrices").value_or("auto");
  o.activations = args->Value("activations").value_or("");
  o.kv = args->Value("kv").value_or("");
  o.compute = args->Value("compute").value_or("");
  std::optional<Progress> line;
  const bool quiet = args->Has("quiet");
  o.progress = [&line, quiet](int64_t, int64_t total, const std::string& what) {
    if (!line) line.emplace(static_cast<size_t>(total), quiet);
    line->Step(what);
  };
  absl::StatusOr<api::EvalResult> result = api::Eval(o);
  line.reset();
  if (!result.ok()) return Fail(result.status());
  if (*output == Output::kJson) {
    EmitJson(api::ToJson(*result));
    return 0;
  }
  PrintResult(*result, *output, args->Has("layers"), args->Has("census"));
  return 0;
}

}  // namespace lowp::cli
