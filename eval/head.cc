#include "eval/head.h"

#include <algorithm>
#include <numeric>

#include "codecs/ggml_vec_dot.h"
#include "kernels/thread_pool.h"

namespace lowp {
namespace {

constexpr int64_t kChunkBytes = int64_t{64} << 20;

}  // namespace

absl::Status RunHead(const HeadRun& run, const Batch& batch, int64_t first_sequence,
                     int64_t length, std::span<const int32_t> ids, std::vector<int64_t>& next) {
  const ModelConfig& c = run.reference.config();
  const int64_t D = c.hidden_size, V = c.vocab_size, rows = batch.rows;
  const int threads = run.threads;
  for (Stream& s : run.streams) {
    FinalNorm(c, run.final_norm, EmulationOf(s), s.hidden, s.hidden, threads, &s.census);
    if (s.candidate == nullptr && s.inputs != nullptr) {
      s.inputs->Add(c.num_layers, Site::kLogits, -1,
                    std::span<const float>(s.hidden).first(static_cast<size_t>(rows * D)), D);
    }
    if (EmulationOf(s).ggml_products) {  // lm_head's input as llama.cpp converts it
      const ggml::TypeInfo* type = s.variant != nullptr && s.variant->Changes(Table::kLmHead)
                                       ? s.variant->HeadType()
                                       : StoredGgmlType(run.reference.TableView(Table::kLmHead));
      std::optional<ggml::Type> vec_dot;
      if (type != nullptr) vec_dot = ggml::VecDotType(type->type);
      if (vec_dot.has_value()) {
        std::span<float> x = std::span<float>(s.hidden).first(static_cast<size_t>(rows * D));
        ggml::RoundForVecDot(*vec_dot, x, x);
      }
    }
    s.reference_logits.assign(static_cast<size_t>(rows), LogitStats());
    s.logits.assign(static_cast<size_t>(rows), CandidateStats());
  }
  next.resize(static_cast<size_t>(rows));
  for (int64_t r = 0; r < rows; ++r) next[r] = r % length + 1 < length ? ids[r + 1] : -1;
  int64_t align = 1;
  for (const auto& v : run.variants) {
    if (v->Changes(Table::kLmHead)) align = std::lcm(align, v->HeadChunkRows());
  }
  int64_t chunk = run.head_rows > 0 ? run.head_rows
                                    : std::min(kChunkBytes / 4 / std::max<int64_t>(rows, 1),
                                               kChunkBytes / 4 / D);
  chunk = std::min(V, std::max(align, (chunk + align - 1) / align * align));
  std::vector<float> head(static_cast<size_t>(chunk * D));
  std::vector<float> x(static_cast<size_t>(rows * chunk)), y(x.size());
  std::vector<double> old_max(static_cast<size_t>(rows));
  Stream& reference = run.streams[0];
  for (int64_t first = 0; first < V; first += chunk) {
    const int64_t count = std::min(chunk, V - first);
    std::span<float> head_rows(head.data(), static_cast<size_t>(count * D));
    if (absl::Status s = run.reference.ReadRows(Table::kLmHead, first, count, head_rows, threads);
        !s.ok()) {
      return s;
    }
    float* out = run.kept_logits != nullptr
                     ? run.kept_logits->data() + first_sequence * length * V + first
                     : x.data();
    const int64_t ldc = run.kept_logits != nullptr ? V : count;
    Logits(c, Emulation(), batch, reference.hidden, head_rows, count, out, ldc, threads,
           &reference.census);
    ParallelFor(static_cast<size_t>(rows), threads, [&](size_t r) {
      old_max[r] = reference.reference_logits[r].Add(
          std::span<const float>(out + r * ldc, static_cast<size_t>(count)), first, next[r]);
    });
    // A candidate's logits of the chunk from lm_head rows `w`, into its sums.
    auto candidate = [&](Stream& s, std::span<const float> w) {
      Logits(c, EmulationOf(s), batch, s.hidden, w, count, y.data(), count, threads, &s.census);
      ParallelFor(static_cast<size_t>(rows), threads, [&](size_t r) {
        s.logits[r].Add(std::span<const float>(out + r * ldc, static_cast<size_t>(count)),
                        std::span<const float>(y.data() + r * count, static_cast<size_t>(count)),
                        first, next[r], old_max[r], reference.reference_logits[r]);
      });
    };
    for (Stream& s : run.streams.subspan(1)) {
      if (s.variant == nullptr || !s.variant->Changes(Table::kLmHead)) candidate(s, head_rows);
    }
    // A variant's rows are made once for all its streams.
    for (const auto& v : run.variants) {
      if (!v->Changes(Table::kLmHead)) continue;
      absl::StatusOr<std::span<const float>> w =
          v->HeadRows(first, count, head_rows, threads, run.pass);
      if (!w.ok()) return w.status();
      for (Stream& s : run.streams.subspan(1)) {
        if (s.variant == v.get()) candidate(s, *w);
      }
    }
    run.reference.ReleaseRows(Table::kLmHead, first, count, run.pass.another_follows);
  }
  return absl::OkStatus();
}

}  // namespace lowp
