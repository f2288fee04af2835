#include "eval/sample.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "eval/metrics.h"
#include "formats/option_error.h"
#include "formats/reference.h"
#include "kernels/thread_pool.h"
#include "model/batch.h"
#include "model/forward.h"
#include "model/layer_reader.h"

namespace lowp {
namespace {

// A uniform double in [0, 1) from 53 bits of (seed, sequence, position).
double Uniform(uint64_t seed, uint64_t sequence, uint64_t position) {
  const uint64_t hi = RandomBits(seed ^ (sequence * 0x9E3779B97F4A7C15ull), 2 * position);
  const uint64_t lo = RandomBits(seed ^ (sequence * 0x9E3779B97F4A7C15ull), 2 * position + 1);
  const uint64_t bits = ((hi << 32) | lo) >> 11;
  return static_cast<double>(bits) * 0x1.0p-53;
}

// The token drawn from `logits` at `temperature` with uniform `u`.
int64_t Draw(std::span<const float> logits, double temperature, double u) {
  int64_t next = ArgMax(logits);
  if (temperature <= 0) return next;
  thread_local std::vector<double> p;
  p.resize(logits.size());
  double max = -INFINITY, sum = 0;
  for (float x : logits) max = std::max(max, static_cast<double>(x) / temperature);
  for (size_t i = 0; i < logits.size(); ++i) {
    sum += p[i] = std::exp(static_cast<double>(logits[i]) / temperature - max);
  }
  u *= sum;
  double acc = 0;
  next = static_cast<int64_t>(p.size()) - 1;
  for (size_t i = 0; i < p.size(); ++i) {
    acc += p[i];
    if (u < acc) return static_cast<int64_t>(i);
  }
  return next;
}

}  // namespace

absl::StatusOr<std::vector<int32_t>> SampleTokens(const Checkpoint& model, const SampleOptions& o) {
  constexpr int64_t kMax = int64_t{1} << 20;
  if (o.count < 1 || o.count > kMax) {
    return OptionError("count", absl::StrCat(o.count, " is not in 1..", kMax));
  }
  if (o.length < 1 || o.length > kMax) {
    return OptionError("length", absl::StrCat(o.length, " is not in 1..", kMax));
  }
  if (!(o.temperature >= 0 && o.temperature <= 100)) {
    return OptionError("temperature", absl::StrCat(o.temperature, " is not in [0, 100]"));
  }
  const ModelConfig& c = model.config();
  if (absl::Status s = CheckSequenceLength(c, o.length, /*whole=*/false); !s.ok()) {
    return OptionError("length", s.message());
  }
  if (c.bos_token_id >= c.vocab_size) {
    return absl::InvalidArgumentError(absl::StrCat(c.name, ": bos_token_id ", c.bos_token_id,
                                                   " is not below vocab_size (", c.vocab_size,
                                                   ")"));
  }
  const int threads = ResolveThreads(o.threads);
  const int64_t S = o.count, D = c.hidden_size, V = c.vocab_size;
  std::vector<int32_t> tokens(static_cast<size_t>(S * o.length));
  for (int64_t s = 0; s < S; ++s) tokens[s * o.length] = static_cast<int32_t>(c.bos_token_id);
  LayerReader reader(model);
  // Per layer, each sequence's cache.
  std::vector<std::vector<LayerKv>> caches(static_cast<size_t>(c.num_layers),
                                           std::vector<LayerKv>(static_cast<size_t>(S)));
  std::vector<std::vector<LayerKv*>> cache_of(caches.size());
  for (size_t l = 0; l < caches.size(); ++l) {
    for (LayerKv& kv : caches[l]) cache_of[l].push_back(&kv);
  }
  ForwardBuffers buffers;
  std::vector<float> hidden(static_cast<size_t>(S * D)), logits(static_cast<size_t>(S * V));
  const int64_t chunk = std::max<int64_t>(1, std::min(V, (int64_t{16} << 20) / D));
  std::vector<float> head(static_cast<size_t>(chunk * D));
  const std::vector<int64_t> ones(static_cast<size_t>(S), 1);
  const Emulation none;
  std::vector<LayerTask> tasks;
  std::vector<int32_t> last(static_cast<size_t>(S));
  for (int64_t t = 1; t < o.length; ++t) {
    const bool again = t + 1 < o.length;
    const std::vector<int64_t> positions(static_cast<size_t>(S), t - 1);
    // A small model decodes each sequence on its own thread; a large one
    // multiplies all sequences' rows together, every thread on each product.
    const Batch batch = Batch::Make(ones, positions, ProductGroupRows(c));
    const std::vector<Batch> groups = batch.Groups();
    for (int64_t s = 0; s < S; ++s) last[s] = tokens[s * o.length + t - 1];
    std::vector<absl::Status> errors(static_cast<size_t>(S));
    ParallelFor(static_cast<size_t>(S), threads, [&](size_t s) {
      errors[s] = model.ReadRows(Table::kEmbedding, last[s], 1,
                                 std::span<float>(hidden).subspan(s * D, D), 1);
      model.ReleaseRows(Table::kEmbedding, last[s], 1, again);
    });
    for (const absl::Status& e : errors) {
      if (!e.ok()) return e;
    }
    if (absl::Status e = Embed(c, {}, hidden, threads, nullptr); !e.ok()) return e;
    for (int64_t l = 0; l < c.num_layers; ++l) {
      absl::StatusOr<const LayerWeights*> w = reader.Layer(l, threads, again);
      if (!w.ok()) return w.status();
      tasks.clear();
      for (size_t g = 0; g < groups.size(); ++g) {
        const int64_t first = batch.group_starts[g];
        LayerTask task;
        task.weights = *w;
        task.emulation = &none;
        task.batch = &groups[g];
        task.hidden = std::span<float>(hidden).subspan(static_cast<size_t>(first * D),
                                                       static_cast<size_t>(groups[g].rows * D));
        task.kv = std::span<LayerKv* const>(cache_of[l])
                      .subspan(static_cast<size_t>(first), groups[g].sequences.size());
        tasks.push_back(task);
      }
      if (absl::Status e = RunLayerTasks(c, l, tasks, buffers, threads); !e.ok()) return e;
    }
    absl::StatusOr<std::span<const float>> norm = reader.FinalNorm();
    if (!norm.ok()) return norm.status();
    FinalNorm(c, *norm, {}, hidden, hidden, threads, nullptr);
    for (int64_t first = 0; first < V; first += chunk) {
      const int64_t count = std::min(chunk, V - first);
      std::span<float> rows(head.data(), static_cast<size_t>(count * D));
      if (absl::Status e = model.ReadRows(Table::kLmHead, first, count, rows, threads); !e.ok()) {
        return e;
      }
      Logits(c, {}, batch, hidden, rows, count, logits.data() + first, V, threads, nullptr);
      model.ReleaseRows(Table::kLmHead, first, count, again);
    }
    ParallelFor(static_cast<size_t>(S), threads, [&](size_t s) {
      const std::span<const float> row(logits.data() + s * V, static_cast<size_t>(V));
      tokens[s * o.length + t] = static_cast<int32_t>(
          Draw(row, o.temperature, Uniform(o.seed, s, static_cast<uint64_t>(t))));
    });
  }
  if (absl::Status e = model.CheckIntact(); !e.ok()) return e;
  return tokens;
}

}  // namespace lowp
