#include "eval/imatrix.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"
#include "eval/evaluate.h"

namespace lowp {

std::string ImatrixTensorName(Site site, int64_t layer, int64_t expert_index) {
  if (site == Site::kLogits) return "output.weight";
  const bool expert = expert_index >= 0;
  if (expert_index == kSharedExpert) {  // llama.cpp's names for Qwen2-MoE's
    const char* shared = site == Site::kRouter     ? "ffn_gate_inp_shexp"
                         : site == Site::kGateProj ? "ffn_gate_shexp"
                         : site == Site::kUpProj   ? "ffn_up_shexp"
                         : site == Site::kDownProj ? "ffn_down_shexp"
                                                   : nullptr;
    return shared == nullptr ? "" : absl::StrCat("blk.", layer, ".", shared, ".weight");
  }
  const char* base = nullptr;
  switch (site) {
    case Site::kQProj: base = "attn_q"; break;
    case Site::kQaProj: base = "attn_q_a"; break;
    case Site::kKvaProj: base = "attn_kv_a_mqa"; break;
    case Site::kKvbProj: base = "attn_kv_b"; break;
    case Site::kKProj: base = "attn_k"; break;
    case Site::kVProj: base = "attn_v"; break;
    case Site::kOProj: base = "attn_output"; break;
    case Site::kRouter: base = "ffn_gate_inp"; break;
    case Site::kGateProj: base = expert ? "ffn_gate_exps" : "ffn_gate"; break;
    case Site::kUpProj: base = expert ? "ffn_up_exps" : "ffn_up"; break;
    case Site::kDownProj: base = expert ? "ffn_down_exps" : "ffn_down"; break;
    default: return "";
  }
  return absl::StrCat("blk.", layer, ".", base, ".weight");
}

ImatrixCollector::ImatrixCollector(const ModelConfig& config, bool process_output)
    : config_(config), process_output_(process_output) {}

void ImatrixCollector::Add(int64_t layer, Site site, int64_t expert, std::span<const float> in,
                           int64_t cols) {
  if (site == Site::kLogits && !process_output_) return;
  // DeepSeek-V3's q_b_proj reports at q_proj's site. Phi-3's fused
  // attn_qkv and ffn_up (gate, then up) take the input q and gate take:
  // one entry each, under llama.cpp's names.
  std::string name = config_.q_lora_rank > 0 && site == Site::kQProj
                         ? absl::StrCat("blk.", layer, ".attn_q_b.weight")
                         : ImatrixTensorName(site, layer, expert);
  if (config_.fused_projections && expert < 0) {
    if (site == Site::kKProj || site == Site::kVProj || site == Site::kUpProj) return;
    if (site == Site::kQProj) name = absl::StrCat("blk.", layer, ".attn_qkv.weight");
    if (site == Site::kGateProj) name = absl::StrCat("blk.", layer, ".ffn_up.weight");
  }
  if (name.empty() || cols <= 0) return;
  const int64_t matrices = expert >= 0 ? std::max<int64_t>(1, config_.num_experts) : 1;
  const int64_t m = expert >= 0 ? expert : 0;
  const int64_t rows = static_cast<int64_t>(in.size()) / cols;
  std::lock_guard<std::mutex> lock(mutex_);
  Sums& s = sums_[name];
  if (s.counts.empty()) {
    s.cols = cols;
    s.sum2.assign(static_cast<size_t>(matrices * cols), 0.0);
    s.sum.assign(s.sum2.size(), 0.0);
    s.counts.assign(static_cast<size_t>(matrices), 0);
  }
  double* sum2 = s.sum2.data() + m * cols;
  double* sum = s.sum.data() + m * cols;
  for (int64_t r = 0; r < rows; ++r) {
    const float* x = in.data() + r * cols;
    for (int64_t j = 0; j < cols; ++j) {
      const double v = x[j];
      sum2[j] += v * v;
      sum[j] += v;
    }
  }
  s.counts[static_cast<size_t>(m)] += rows;
}

Imatrix ImatrixCollector::Result(std::vector<std::string> datasets, int64_t chunk_count,
                                 int64_t chunk_size) const {
  std::lock_guard<std::mutex> lock(mutex_);
  Imatrix result;
  result.datasets = std::move(datasets);
  result.chunk_count = static_cast<uint32_t>(chunk_count);
  result.chunk_size = static_cast<uint32_t>(chunk_size);
  for (const auto& [name, s] : sums_) {  // std::map: sorted by name, as llama.cpp stores them
    ImatrixEntry e;
    e.name = name;
    e.columns = s.cols;
    e.matrices = static_cast<int64_t>(s.counts.size());
    e.sum2.assign(s.sum2.begin(), s.sum2.end());
    e.sum.assign(s.sum.begin(), s.sum.end());
    e.counts.assign(s.counts.begin(), s.counts.end());
    (void)result.Add(std::move(e));  // names unique (map keys); sums finite, counts >= 0
  }
  return result;
}

absl::StatusOr<ImatrixRun> ComputeImatrix(const Checkpoint& model,
                                          std::span<const int32_t> tokens, int64_t length,
                                          std::vector<std::string> datasets,
                                          const ImatrixRunOptions& options) {
  ImatrixCollector collector(model.config(), options.process_output);
  EvalRun run;
  run.threads = options.threads;
  run.batch_tokens = options.batch_tokens;
  run.scored_from = options.scored_from;
  run.progress = options.progress;
  run.reference_inputs = &collector;
  absl::StatusOr<EvalReport> report = Evaluate(model, tokens, length, {}, run);
  if (!report.ok()) return report.status();
  ImatrixRun result;
  const int64_t sequences = length > 0 ? static_cast<int64_t>(tokens.size()) / length : 0;
  result.imatrix = collector.Result(std::move(datasets), sequences, length);
  result.perplexity = report->reference_perplexity;
  result.tokens = static_cast<uint64_t>(tokens.size());
  return result;
}

}  // namespace lowp
