#include "api/quantize_model.h"

#include <algorithm>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "eval/candidates.h"
#include "eval/checkpoint_export.h"
#include "eval/gguf_export.h"
#include "eval/variant.h"
#include "formats/format.h"
#include "formats/option_error.h"
#include "io/input_files.h"
#include "io/output_file.h"
#include "io/safetensors.h"
#include "io/tensor_set.h"
#include "kernels/convert.h"
#include "kernels/thread_pool.h"
#include "model/checkpoint.h"
#include "model/gguf_layout.h"
#include "tokenizer/tokenizer.h"

namespace lowp::api {
namespace {

// Rows of a table made and written at a time.
constexpr int64_t kTableRows = 1024;

// Writes float32 values as `dtype` (F32, F16 or BF16).
class MatrixWriter {
 public:
  MatrixWriter(SafetensorsWriter& out, DType dtype) : out_(out), dtype_(dtype) {}

  absl::Status Write(std::span<const float> values) {
    if (dtype_ == DType::kF32) {
      return out_.Write(std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(values.data()),
                                                 values.size() * sizeof(float)));
    }
    const Format half = *FindFormat(dtype_ == DType::kF16 ? "fp16" : "bf16");
    bytes_.resize(values.size() * 2);
    if (absl::Status s = EncodeArray(half, values, bytes_); !s.ok()) return s;
    return out_.Write(bytes_);
  }

 private:
  SafetensorsWriter& out_;
  DType dtype_;
  std::vector<uint8_t> bytes_;
};

using MatrixSink = std::function<absl::Status(std::span<const float>)>;

// The model as `variant` makes it, a layer at a time: each matrix's values
// to `sink` (when given) in MatrixShapes order (the embedding, each layer's,
// lm_head unless tied), and the variant's statistics of every matrix it
// changes kept (WeightVariant::Report). Progress before each step, named
// after `label`.
absl::Status RunVariant(const Checkpoint& model, WeightVariant& variant, int threads,
                        const ProgressFn& progress, const std::string& label,
                        const MatrixSink* sink) {
  threads = ResolveThreads(threads);  // the layers' products and GPTQ run on the pool
  const ModelConfig& config = model.config();
  const PassOptions pass{.first = true};
  const size_t steps = static_cast<size_t>(config.num_layers) + 2;
  auto step = [&](const std::string& what) {
    if (progress) progress(steps, label.empty() ? what : absl::StrCat(label, ": ", what));
  };
  const int64_t D = config.hidden_size;
  std::vector<float> rows;
  std::vector<int32_t> ids;
  if (sink != nullptr) {
    step(model.TableName(Table::kEmbedding));
    for (int64_t first = 0; first < config.vocab_size; first += kTableRows) {
      const int64_t count = std::min(kTableRows, config.vocab_size - first);
      rows.resize(static_cast<size_t>(count * D));
      absl::Status s;
      if (variant.Changes(Table::kEmbedding)) {
        ids.resize(static_cast<size_t>(count));
        for (int64_t i = 0; i < count; ++i) ids[i] = static_cast<int32_t>(first + i);
        s = variant.EmbeddingRows(ids, rows, threads, pass);
      } else {
        s = model.ReadRows(Table::kEmbedding, first, count, rows, threads);
      }
      if (s.ok()) s = (*sink)(rows);
      if (!s.ok()) return s;
    }
  }
  LayerStorage reference_storage, storage;
  storage.values_unused = sink == nullptr;  // statistics alone (quant-error --model)
  for (int64_t layer = 0; layer < config.num_layers; ++layer) {
    step(absl::StrCat("layer ", layer));
    absl::StatusOr<LayerWeights> reference = model.ReadLayer(layer, reference_storage, threads);
    if (!reference.ok()) return reference.status();
    absl::StatusOr<LayerWeights> w =
        variant.Layer({.layer = layer, .reference = *reference, .storage = storage,
                       .threads = threads, .pass = pass});
    if (!w.ok()) return w.status();
    if (sink == nullptr) continue;
    for (const LayerWeights::Entry& e : w->Matrices(config)) {
      if (absl::Status s = (*sink)(e.matrix->values); !s.ok()) return s;
    }
  }
  // lm_head's rows: written unless the embedding serves, and run through
  // the variant where it changes them (a tied embedding's statistics come
  // with them).
  const bool write_head = sink != nullptr && !config.tie_word_embeddings;
  if (!write_head && !variant.Changes(Table::kLmHead)) return absl::OkStatus();
  step(model.TableName(Table::kLmHead));
  const int64_t unit = std::max<int64_t>(1, variant.HeadChunkRows());
  const int64_t chunk = unit * std::max<int64_t>(1, kTableRows / unit);
  for (int64_t first = 0; first < config.vocab_size; first += chunk) {
    const int64_t count = std::min(chunk, config.vocab_size - first);
    rows.resize(static_cast<size_t>(count * D));
    if (absl::Status s = model.ReadRows(Table::kLmHead, first, count, rows, threads); !s.ok()) {
      return s;
    }
    std::span<const float> values = rows;
    if (variant.Changes(Table::kLmHead)) {
      absl::StatusOr<std::span<const float>> q = variant.HeadRows(first, count, rows, threads, pass);
      if (!q.ok()) return q.status();
      values = *q;
    }
    if (write_head) {
      if (absl::Status s = (*sink)(values); !s.ok()) return s;
    }
  }
  return absl::OkStatus();
}

// An error on eval's `weights` as one on quant-error's `schemes`.
absl::Status AsSchemes(const absl::Status& status) {
  if (OptionOf(status).value_or("") != "weights") return status;
  absl::string_view why = status.message();
  absl::ConsumePrefix(&why, "weights: ");
  return OptionError("schemes", why);
}

// Each candidate's imatrix and, where its rules calibrate, the calibration
// tokens (read once; faults name imatrix and calib_...).
absl::Status Equip(std::vector<EvalCandidate>& candidates, const std::string& imatrix,
                   const TokenOptions& calibration, int threads, const Checkpoint& model,
                   const std::string& path) {
  absl::StatusOr<std::shared_ptr<const ImportanceMap>> importance = OpenImportance(imatrix);
  if (!importance.ok()) return importance.status();
  for (EvalCandidate& c : candidates) c.importance = *importance;
  return SetCalibration(candidates, calibration, threads, model, path);
}

// The one candidate `weights` names, its rules' tokens and imatrix set.
absl::StatusOr<EvalCandidate> OneCandidate(const QuantizeModelOptions& o,
                                           const Checkpoint& model) {
  SiteLists sites;
  sites.weights = o.weights;
  absl::StatusOr<std::vector<EvalCandidate>> candidates = MakeCandidates(sites);
  if (!candidates.ok()) return candidates.status();
  if (candidates->size() != 1 || (*candidates)[0].weight_rules.empty()) {
    return OptionError("weights", absl::StrCat("'", o.weights, "': want the rules of one model "
                                               "(a scheme, a recipe or PATTERN=SCHEME items)"));
  }
  // A rule that takes no matrix is a typo, not a choice: refused rather
  // than written as a model it leaves unchanged.
  const std::vector<TensorView> matrices = model.MatrixShapes();
  for (const WeightRule& r : (*candidates)[0].weight_rules) {
    if (r.pattern.empty()) continue;
    const bool takes = std::any_of(matrices.begin(), matrices.end(), [&](const TensorView& m) {
      return MatchesPattern(r.pattern, m.name);
    });
    if (!takes) {
      return OptionError("weights", absl::StrCat("'", r.pattern, "' names no matrix of ", o.model,
                                                 " (names as ", matrices.front().name, ")"));
    }
  }
  for (const WeightRule& r : (*candidates)[0].weight_rules) {
    if (r.scheme != nullptr && r.calibration.folds()) {
      return OptionError(
          "weights", absl::StrCat(r.scheme->name(), r.calibration.Suffix(),
                                  " folds its scales into the norms before the matrices; "
                                  "writing those is not done yet (lowp eval measures it)"));
    }
  }
  if (absl::Status s = Equip(*candidates, o.imatrix, o.calibration, o.threads, model, o.model);
      !s.ok()) {
    return s;
  }
  return std::move((*candidates)[0]);
}

// What QuantizeModel reports once its output is written: the error of each
// matrix the rules changed and over them all.
QuantErrorResult Reported(const QuantizeModelOptions& o, const WeightVariant& variant) {
  QuantErrorResult r;
  r.imatrix = o.imatrix;
  const WeightReport report = variant.Report();
  if (!o.summary) r.results = report.tensors;
  r.aggregates.push_back(report.total);
  return r;
}

// The variant `candidate`'s rules make of `model`, prepared (for a writer
// that makes each table whole through TableBytes when `table_bytes`).
absl::StatusOr<std::unique_ptr<WeightVariant>> PreparedVariant(const QuantizeModelOptions& o,
                                                               const EvalCandidate& candidate,
                                                               const Checkpoint& model,
                                                               int threads, bool table_bytes) {
  absl::StatusOr<std::unique_ptr<WeightVariant>> variant = WeightVariant::FromRules(
      o.weights, candidate.weight_rules, model, candidate.importance, candidate.calibration);
  if (!variant.ok()) return variant.status();
  absl::Status s = table_bytes ? (*variant)->PrepareForTableBytes(threads)
                               : (*variant)->Prepare(threads);
  if (!s.ok()) return s;
  return variant;
}

// A safetensors output's metadata: the model's, with the rules (and the
// calibration tokens) that made it.
std::map<std::string, std::string> OutputMetadata(const QuantizeModelOptions& o,
                                                  const EvalCandidate& candidate,
                                                  const Checkpoint& model) {
  std::map<std::string, std::string> metadata = model.set().metadata();
  metadata["lowp.weights"] = o.weights;
  if (candidate.calibration != nullptr) {
    metadata["lowp.calibration"] = candidate.calibration->source;
  }
  return metadata;
}

// OK when every matrix of `model` is stored under its own name, rows in
// order (a Hugging Face checkpoint, not a GGUF file's permuted q and k);
// with `parts_allowed`, also as a part of a stacked or fused tensor
// (gpt-oss's experts, Phi-3's qkv_proj and gate_up_proj).
absl::Status CheckOwnLayout(const Checkpoint& model, const std::string& path,
                            bool parts_allowed = false) {
  for (const TensorView& m : model.MatrixShapes()) {
    const Checkpoint::Found* found = model.Find(m.name);
    const bool part = found != nullptr && found->source != nullptr;
    if (found == nullptr || (found->view->name != m.name && !(parts_allowed && part)) ||
        !found->row_of.empty()) {
      return OptionError("model", absl::StrCat(path, " stores ", m.name,
                                               found == nullptr ? " nowhere"
                                                                : " under another name or order",
                                               ": quantize --model reads Hugging Face "
                                               "safetensors checkpoints"));
    }
  }
  return absl::OkStatus();
}

// The GGUF output of QuantizeModel.
absl::StatusOr<QuantErrorResult> QuantizeToGguf(const QuantizeModelOptions& o) {
  if (o.dtype != "F32") {
    return OptionError("dtype", absl::StrCat("'", o.dtype, "' is for safetensors output; a GGUF "
                                             "file stores each matrix in its llama.cpp type"));
  }
  absl::StatusOr<Checkpoint> model = Checkpoint::OpenModel(o.model, {});
  if (!model.ok()) return model.status();
  // The GGUF writer lays out stacked and fused matrices itself.
  if (absl::Status s = CheckOwnLayout(*model, o.model, /*parts_allowed=*/true); !s.ok()) return s;
  absl::StatusOr<std::unique_ptr<Tokenizer>> tokenizer =
      LoadTokenizer(o.tokenizer.empty() ? o.model : o.tokenizer);
  if (!tokenizer.ok()) {
    return OptionError(o.tokenizer.empty() ? "model" : "tokenizer",
                       absl::StrCat(tokenizer.status().message(),
                                    " (llama.cpp loads no GGUF without a vocabulary)"));
  }
  absl::StatusOr<LlamaCppVocab> vocab = (*tokenizer)->LlamaCppVocabulary();
  if (!vocab.ok()) return OptionError("tokenizer", vocab.status().message());
  absl::StatusOr<EvalCandidate> candidate = OneCandidate(o, *model);
  if (!candidate.ok()) return candidate.status();
  const int threads = ResolveThreads(o.threads);
  absl::StatusOr<std::unique_ptr<WeightVariant>> variant =
      PreparedVariant(o, *candidate, *model, threads, /*table_bytes=*/true);
  if (!variant.ok()) return variant.status();
  GgufExportOptions options;
  options.name = std::filesystem::path(o.model).filename().string();
  if (options.name.empty()) options.name = std::filesystem::path(o.model).parent_path().filename();
  // A recipe given alone names the file's type as llama-quantize does.
  if (candidate->weight_rules.size() == 1 && candidate->weight_rules[0].pattern.empty() &&
      candidate->weight_rules[0].scheme != nullptr) {
    options.file_type = LlamaCppRecipeFileType(candidate->weight_rules[0].scheme->name());
  }
  options.threads = threads;
  options.progress = o.progress;
  absl::StatusOr<std::unique_ptr<OutputFile>> out = OutputFile::Create(o.output);
  if (!out.ok()) return out.status();
  if (absl::Status s = WriteGgufModel(*model, **variant, candidate->weight_rules,
                                      candidate->importance != nullptr, *std::move(vocab), options,
                                      **out);
      !s.ok()) {
    return s;
  }
  if (absl::Status s = model->CheckIntact(); !s.ok()) return s;
  if (absl::Status s = (*variant)->CheckIntact(); !s.ok()) return s;
  if (absl::Status s = (*out)->Commit(); !s.ok()) return s;
  absl::StatusOr<QuantErrorResult> r = Reported(o, **variant);
  if (r.ok()) r->notes = LlamaCppNotes(model->config());
  return r;
}

// The quantized Hugging Face checkpoint output of QuantizeModel.
absl::StatusOr<QuantErrorResult> QuantizeToCheckpoint(const QuantizeModelOptions& o,
                                                      CheckpointFormat format) {
  if (o.dtype != "F32") {
    return OptionError("dtype", absl::StrCat("'", o.dtype, "' is for dequantized output; ",
                                             o.format, " stores codes and scales"));
  }
  if (!o.tokenizer.empty()) {
    return OptionError("tokenizer", absl::StrCat("is for GGUF output; ", o.format,
                                                 " copies the model's tokenizer files"));
  }
  absl::StatusOr<Checkpoint> model = Checkpoint::OpenModel(o.model, {});
  if (!model.ok()) return model.status();
  if (absl::Status s = CheckOwnLayout(*model, o.model); !s.ok()) return s;
  absl::StatusOr<EvalCandidate> candidate = OneCandidate(o, *model);
  if (!candidate.ok()) return candidate.status();
  const int threads = ResolveThreads(o.threads);
  absl::StatusOr<std::unique_ptr<WeightVariant>> variant =
      PreparedVariant(o, *candidate, *model, threads, /*table_bytes=*/false);
  if (!variant.ok()) return variant.status();
  CheckpointExportOptions options;
  options.format = format;
  options.model_dir = std::filesystem::is_directory(o.model)
                          ? o.model
                          : std::filesystem::path(o.model).parent_path().string();
  options.metadata = OutputMetadata(o, *candidate, *model);
  options.metadata.emplace("format", "pt");  // what transformers asks of a safetensors file
  options.threads = threads;
  options.progress = o.progress;
  absl::StatusOr<std::unique_ptr<OutputDirectory>> out = OutputDirectory::Create(o.output);
  if (!out.ok()) return out.status();
  absl::StatusOr<std::vector<std::string>> notes = WriteQuantizedCheckpoint(
      *model, **variant, candidate->weight_rules, candidate->importance != nullptr, options,
      **out);
  if (!notes.ok()) return notes.status();
  if (absl::Status s = model->CheckIntact(); !s.ok()) return s;
  if (absl::Status s = (*variant)->CheckIntact(); !s.ok()) return s;
  if (absl::Status s = (*out)->Commit(); !s.ok()) return s;
  QuantErrorResult r = Reported(o, **variant);
  r.notes = *std::move(notes);
  return r;
}

}  // namespace

absl::StatusOr<QuantErrorResult> QuantizeModel(const QuantizeModelOptions& o) {
  const InputScope scope;  // the output never replaces an input
  if (absl::Status s = CheckThreads(o.threads); !s.ok()) return s;
  if (o.output.empty()) return OptionError("output", "is required", " ");
  if (!o.format.empty() && o.format != "gguf" && o.format != "safetensors") {
    absl::StatusOr<CheckpointFormat> format = ParseCheckpointFormat(o.format);
    if (!format.ok()) {
      return OptionError("format", absl::StrCat("'", o.format, "': want compressed-tensors or "
                                                "gptq (a model directory), gguf or safetensors"));
    }
    return QuantizeToCheckpoint(o, *format);
  }
  if (o.format == "gguf" && !absl::EndsWith(o.output, ".gguf")) {
    return OptionError("output", absl::StrCat(o.output, ": a GGUF file's name ends in .gguf"));
  }
  if (o.format == "safetensors" && absl::EndsWith(o.output, ".gguf")) {
    return OptionError("format", absl::StrCat("safetensors, but the output ", o.output,
                                              " ends in .gguf"));
  }
  if (absl::EndsWith(o.output, ".gguf")) return QuantizeToGguf(o);
  if (!o.tokenizer.empty()) {
    return OptionError("tokenizer", "is for GGUF output (a .gguf file), which holds a vocabulary");
  }
  absl::StatusOr<DType> dtype = ParseDType(o.dtype);
  if (!dtype.ok() || (*dtype != DType::kF32 && *dtype != DType::kF16 && *dtype != DType::kBF16)) {
    return OptionError("dtype", absl::StrCat("'", o.dtype, "': want F32, F16 or BF16"), " ");
  }
  absl::StatusOr<Checkpoint> model = Checkpoint::OpenModel(o.model, {});
  if (!model.ok()) return model.status();
  absl::StatusOr<EvalCandidate> candidate = OneCandidate(o, *model);
  if (!candidate.ok()) return candidate.status();

  // The output: the matrices in the order the variant makes them (the
  // embedding, each layer's, lm_head), then every other tensor as stored.
  const ModelConfig& config = model->config();
  const std::vector<TensorView> matrices = model->MatrixShapes();
  std::vector<SafetensorsWriter::Entry> entries;
  std::set<std::string> made;
  if (absl::Status s = CheckOwnLayout(*model, o.model); !s.ok()) return s;
  for (const TensorView& m : matrices) {
    entries.push_back({m.name, *dtype, m.shape});
    made.insert(m.name);
  }
  std::vector<const TensorView*> copied;
  for (const TensorView& t : model->set().tensors()) {
    if (made.contains(t.name)) continue;
    if (t.dtype == DType::kGgml || t.scales != nullptr || t.packed != nullptr) {
      return OptionError("model", absl::StrCat("tensor \"", t.name, "\" of ", t.file, " is ",
                                               t.type_name(), ", which the output cannot copy"));
    }
    entries.push_back({t.name, t.dtype, t.shape});
    copied.push_back(&t);
  }

  absl::StatusOr<std::unique_ptr<WeightVariant>> variant =
      PreparedVariant(o, *candidate, *model, o.threads, /*table_bytes=*/false);
  if (!variant.ok()) return variant.status();
  absl::StatusOr<std::unique_ptr<SafetensorsWriter>> out =
      SafetensorsWriter::Create(o.output, entries, OutputMetadata(o, *candidate, *model));
  if (!out.ok()) return out.status();
  MatrixWriter writer(**out, *dtype);
  const MatrixSink sink = [&writer](std::span<const float> values) { return writer.Write(values); };
  if (absl::Status s = RunVariant(*model, **variant, o.threads, o.progress, "", &sink); !s.ok()) {
    return s;
  }
  if (o.progress) o.progress(static_cast<size_t>(config.num_layers) + 2, "the other tensors");
  for (const TensorView* t : copied) {
    if (absl::Status s = (*out)->Write(t->bytes); !s.ok()) return s;
  }
  if (absl::Status s = model->CheckIntact(); !s.ok()) return s;
  if (absl::Status s = (*variant)->CheckIntact(); !s.ok()) return s;
  if (absl::Status s = (*out)->Finish(); !s.ok()) return s;
  return Reported(o, **variant);
}

absl::StatusOr<QuantErrorResult> ModelQuantError(const ModelQuantErrorOptions& o) {
  if (absl::Status s = CheckThreads(o.threads); !s.ok()) return s;
  if (o.schemes.empty()) return OptionError("schemes", "none given");
  absl::StatusOr<Checkpoint> model = Checkpoint::OpenModel(o.model, {});
  if (!model.ok()) return model.status();
  SiteLists sites;
  for (const std::string& scheme : o.schemes) {
    if (scheme.find_first_of(",=") != std::string::npos) {
      return OptionError("schemes", absl::StrCat("'", scheme, "': one scheme per item"));
    }
    sites.weights += (sites.weights.empty() ? "" : ",") + scheme;
  }
  absl::StatusOr<std::vector<EvalCandidate>> candidates = MakeCandidates(sites);
  if (!candidates.ok()) return AsSchemes(candidates.status());
  if (absl::Status s = Equip(*candidates, o.imatrix, o.calibration, o.threads, *model, o.model);
      !s.ok()) {
    return s;
  }
  QuantErrorResult r;
  r.imatrix = o.imatrix;
  for (const EvalCandidate& c : *candidates) {
    absl::StatusOr<std::unique_ptr<WeightVariant>> variant = WeightVariant::FromRules(
        c.label, c.weight_rules, *model, c.importance, c.calibration);
    if (!variant.ok()) return variant.status();
    if (absl::Status s = (*variant)->Prepare(o.threads); !s.ok()) return s;
    if (absl::Status s = RunVariant(*model, **variant, o.threads, o.progress, c.label, nullptr);
        !s.ok()) {
      return s;
    }
    if (absl::Status s = model->CheckIntact(); !s.ok()) return s;
    WeightReport report = (*variant)->Report();
    if (!o.summary) {
      for (QuantReport& t : report.tensors) r.results.push_back(std::move(t));
    }
    report.total.scheme = c.label;
    r.aggregates.push_back(std::move(report.total));
  }
  return r;
}

}  // namespace lowp::api
