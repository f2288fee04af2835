// Throughput of the float32 forward pass (model/forward.h) on prefill, beside
// OpenBLAS's own sgemm on the shapes that pass multiplies, in the same run:
//   forward/MODEL/EMULATION/seqs:S/tokens:128/threads:T
//       S sequences of 128 tokens, each a fresh KvCache from position 0, run
//       as api::ForwardLogits runs them: ParallelFor over the sequences on
//       lowp's pool with T threads, one BLAS thread per sequence (so S=1 runs
//       on one thread whatever T is). Counters: tokens_per_second, gflops
//       (flops_per_token x tokens / s) and flops_per_token = 2 x (the decoder
//       layers' linear parameters + lm_head's) + 4 x tokens x head_dim x
//       heads x layers (the scores and values products, computed over the
//       whole [tokens, tokens] square as the pass does), logits_mean (of the
//       first sequence: the same model in bench/torch_forward.py gives the
//       same value).
//     MODEL: stories260K, the bundled model (tests/data/stories260K-hf,
//       io/bundled.h), or llama-3.2-1b-shape-2l, Llama 3.2 1B's shapes
//       (hidden 2048, intermediate 8192, 32 heads, 8 kv heads, head_dim 64,
//       vocab 128256, tied embeddings, rope_theta 5e5, eps 1e-5; no
//       rope_scaling) with 2 decoder layers and seeded N(0, 0.02^2) weights,
//       norms 1, built in memory.
//     EMULATION: none, or one emulated site: activations=SCHEME, kv=SCHEME
//       (quant/scheme.h names), compute=FORMAT (formats FindFormat). The
//       emulated cases (1B shape, 1 sequence, 1 thread) run paired with
//       none: each iteration runs the emulated forward (timed) and the plain
//       one, in alternating order; counters none_ms (the plain forwards' mean
//       time in the same iterations), added_ms and added_cost (the median
//       over the pairs of emulated - plain and emulated / plain - 1).
//   sgemm/MxNxK/threads:T
//       cblas_sgemm(RowMajor, NoTrans, Trans) as the pass calls it for a
//       linear layer, C[M, N] = A[M, K] B[N, K]^T (for the 1B shape's own
//       matrices where they have the shape); with T=2 two products run at
//       once on the pool (shared B, own A and C), one BLAS thread each, as
//       two sequences do. sgemm-nn/... is C = A[M, K] B[K, N] (the
//       attention's probabilities x values, and the square 2048^3:
//       bench/report.py divides the forward's gflops by the best square
//       rate at the same threads, this or sgemm-blas-threads).
//   sgemm-blas-threads:2/2048x2048x2048
//       the square product on OpenBLAS's own two threads (how PyTorch uses
//       the library); set back to one BLAS thread afterwards.
//   bf16-product/PATH/MxNxK/threads:1
//       one linear layer of the 1B shape on a weight stored in bf16 (the
//       checkpoints' dtype; seeded N(0, 0.02^2) values rounded), M = 256 rows
//       (the evaluator's block of two 128-token sequences), one thread,
//       the three ways to multiply it: widen (what the forward pass does
//       today: the whole matrix widened to float32, then LinearProduct's
//       tiles), tile (each of LinearProduct's column tiles widened into one
//       reused buffer just before its sgemm: the same calls on the same
//       values, so the same bits, checked), f32 (LinearProduct on float32
//       weights already in memory: the bound). The weight (and its float32
//       copy) is larger than the last-level cache, as a layer's is.
//   nn/KERNEL/IMPL/n:N
//       one elementwise kernel of kernels/nn.h over 64 rows of N seeded
//       activation-like values (N(0, sigma^2), every 53rd value x 40):
//       IMPL simd is the dispatched entry the forward pass calls, reference
//       its scalar reference (the loops model/forward.cc ran before, but for
//       the order of two double sums), in the same run; thread CPU time, the
//       copy that restores the input before each call included in both.
//       Counter values_per_second. KERNEL: softmax (scores, sigma 3), rmsnorm
//       (a row of N, weights 1), rope (N = heads 8 x head_dim, cos/sin of
//       position 37), silu, add (x += y), multiply (x *= y), nonfinite (the
//       census's count), exp.
// The OpenBLAS kernel the library picked (openblas_get_corename; Debian's
// 0.3.21 picks Prescott on CPUs it does not know unless OPENBLAS_CORETYPE is
// set) and its config are in the JSON context.
#include <cblas.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <random>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "benchmark/benchmark.h"
#include "formats/format.h"
#include "io/bundled.h"
#include "kernels/convert.h"
#include "kernels/nn.h"
#include "kernels/thread_pool.h"
#include "model/batch.h"
#include "model/blas.h"
#include "model/checkpoint.h"
#include "model/config.h"
#include "model/forward.h"
#include "model/gemm.h"
#include "model/weights.h"
#include "quant/scheme.h"

namespace lowp {
namespace {

constexpr int64_t kTokens = 128;
constexpr char kBundled[] = "stories260K";
constexpr char kWide[] = "llama-3.2-1b-shape-2l";

// Llama 3.2 1B's config.json values, 2 layers.
ModelConfig WideConfig() {
  ModelConfig c;
  c.name = kWide;
  c.model_type = "llama";
  c.hidden_size = 2048;
  c.intermediate_size = 8192;
  c.num_layers = 2;
  c.num_heads = 32;
  c.num_kv_heads = 8;
  c.head_dim = 64;
  c.vocab_size = 128256;
  c.max_position_embeddings = 131072;
  c.tie_word_embeddings = true;
  c.rope_theta = 500000;
  c.rms_norm_eps = 1e-5;
  c.bos_token_id = 128000;
  return c;
}

// `n` seeded N(0, 0.02^2) values, drawn in chunks of 2^20 on the pool (chunk
// c from seed + c: the values never depend on the thread count).
std::vector<float> Normal(int64_t n, uint32_t seed) {
  std::vector<float> v(static_cast<size_t>(n));
  constexpr int64_t kChunk = int64_t{1} << 20;
  const size_t chunks = static_cast<size_t>((n + kChunk - 1) / kChunk);
  ParallelFor(chunks, 0, [&](size_t c) {
    std::mt19937 rng(seed + static_cast<uint32_t>(c));
    std::normal_distribution<float> normal(0.0f, 0.02f);
    const int64_t begin = static_cast<int64_t>(c) * kChunk;
    const int64_t end = std::min(n, begin + kChunk);
    for (int64_t i = begin; i < end; ++i) v[i] = normal(rng);
  });
  return v;
}

// A model held whole in memory as float32: the forward pass's steps run on
// it without reading a checkpoint (what the products cost, not the reads).
struct InMemoryModel {
  ModelConfig config;
  std::vector<LayerStorage> storage;
  std::vector<LayerWeights> layers;
  std::vector<float> embed, final_norm;  // embed: [vocab, hidden], tied lm_head
  std::vector<float> lm_head;            // empty when tied
  std::span<const float> head() const { return lm_head.empty() ? embed : lm_head; }
};

void Die(const absl::Status& s) {
  std::fprintf(stderr, "forward_bench: %s\n", std::string(s.message()).c_str());
  std::exit(1);
}

void Check(const absl::Status& s) {
  if (!s.ok()) Die(s);
}

Matrix RandomMatrix(std::string name, int64_t rows, int64_t cols, std::vector<float>& buffer,
                    uint32_t seed) {
  buffer = Normal(rows * cols, seed);
  return Matrix{std::move(name), rows, cols, buffer, {}};
}

InMemoryModel WideModel() {
  InMemoryModel w;
  w.config = WideConfig();
  const ModelConfig& c = w.config;
  if (absl::Status s = ValidateModel(c); !s.ok()) Die(s);
  const int64_t D = c.hidden_size, I = c.intermediate_size;
  const int64_t q = c.num_heads * c.head_dim, kv = c.num_kv_heads * c.head_dim;
  uint32_t seed = 1000;
  w.embed = Normal(c.vocab_size * D, seed += 1000);
  w.storage.resize(static_cast<size_t>(c.num_layers));
  for (int64_t i = 0; i < c.num_layers; ++i) {
    const std::string p = "model.layers." + std::to_string(i) + ".";
    std::vector<std::vector<float>>& b = w.storage[i].buffers;
    b.resize(8);
    b[7].assign(static_cast<size_t>(D), 1.0f);  // both norms
    LayerWeights l;
    l.input_norm = b[7];
    l.post_attention_norm = b[7];
    l.q = RandomMatrix(p + "self_attn.q_proj.weight", q, D, b[0], seed += 1000);
    l.k = RandomMatrix(p + "self_attn.k_proj.weight", kv, D, b[1], seed += 1000);
    l.v = RandomMatrix(p + "self_attn.v_proj.weight", kv, D, b[2], seed += 1000);
    l.o = RandomMatrix(p + "self_attn.o_proj.weight", D, q, b[3], seed += 1000);
    l.gate = RandomMatrix(p + "mlp.gate_proj.weight", I, D, b[4], seed += 1000);
    l.up = RandomMatrix(p + "mlp.up_proj.weight", I, D, b[5], seed += 1000);
    l.down = RandomMatrix(p + "mlp.down_proj.weight", D, I, b[6], seed += 1000);
    w.layers.push_back(std::move(l));
  }
  w.final_norm.assign(static_cast<size_t>(D), 1.0f);
  return w;
}

InMemoryModel BundledModel() {
  absl::StatusOr<std::string> dir = lowp::BundledModel();
  if (!dir.ok()) Die(dir.status());
  absl::StatusOr<Checkpoint> checkpoint = Checkpoint::OpenModel(*dir, {});
  if (!checkpoint.ok()) Die(checkpoint.status());
  InMemoryModel w;
  w.config = checkpoint->config();
  const ModelConfig& c = w.config;
  w.storage.resize(static_cast<size_t>(c.num_layers));
  for (int64_t i = 0; i < c.num_layers; ++i) {
    absl::StatusOr<LayerWeights> l = checkpoint->ReadLayer(i, w.storage[i], 1);
    if (!l.ok()) Die(l.status());
    w.layers.push_back(*std::move(l));
  }
  w.embed.resize(static_cast<size_t>(c.vocab_size * c.hidden_size));
  if (absl::Status s = checkpoint->ReadRows(Table::kEmbedding, 0, c.vocab_size, w.embed, 1);
      !s.ok()) {
    Die(s);
  }
  if (!c.tie_word_embeddings) {
    w.lm_head.resize(w.embed.size());
    if (absl::Status s = checkpoint->ReadRows(Table::kLmHead, 0, c.vocab_size, w.lm_head, 1);
        !s.ok()) {
      Die(s);
    }
  }
  if (absl::Status s = checkpoint->ReadFinalNorm(w.final_norm); !s.ok()) Die(s);
  return w;
}

// The model by name, made (or read) on first use, then kept.
const InMemoryModel& Model(const std::string& name) {
  static std::unique_ptr<InMemoryModel> bundled, wide;
  if (name == kWide) {
    if (wide == nullptr) wide = std::make_unique<InMemoryModel>(WideModel());
    return *wide;
  }
  if (bundled == nullptr) bundled = std::make_unique<InMemoryModel>(BundledModel());
  return *bundled;
}

// The forward pass of `ids` ([sequences, kTokens]) as the evaluator runs a
// stream: the embedding, every layer (RunLayerTasks: groups side by side for
// a small model, each product on every thread for a large one), the final
// norm and the logits ([tokens, vocab]).
absl::Status Forward(const InMemoryModel& w, const Emulation& e, std::span<const int32_t> ids,
                     int64_t sequences, int threads, std::vector<float>& logits) {
  const ModelConfig& c = w.config;
  const int64_t D = c.hidden_size, V = c.vocab_size;
  const std::vector<int64_t> lengths(static_cast<size_t>(sequences), kTokens);
  const Batch batch = Batch::Make(lengths, {}, ProductGroupRows(c));
  const bool small = SmallLayer(c);
  const std::vector<Batch> groups = small ? batch.Groups() : std::vector<Batch>{batch};
  std::vector<float> hidden(static_cast<size_t>(batch.rows * D));
  for (int64_t r = 0; r < batch.rows; ++r) {
    std::copy_n(w.embed.data() + ids[r] * D, D, hidden.data() + r * D);
  }
  if (absl::Status s = Embed(c, e, hidden, threads, nullptr); !s.ok()) return s;
  std::vector<LayerKv> kv(static_cast<size_t>(sequences));
  std::vector<LayerKv*> kv_of;
  for (LayerKv& k : kv) kv_of.push_back(&k);
  thread_local ForwardBuffers buffers;
  std::vector<LayerTask> tasks;
  for (int64_t l = 0; l < c.num_layers; ++l) {
    for (LayerKv& k : kv) k.Clear();
    tasks.clear();
    for (size_t g = 0; g < groups.size(); ++g) {
      const int64_t first = small ? batch.group_starts[g] : 0;
      LayerTask t;
      t.weights = &w.layers[l];
      t.emulation = &e;
      t.batch = &groups[g];
      t.hidden = std::span<float>(hidden).subspan(static_cast<size_t>(first * kTokens * D),
                                                  static_cast<size_t>(groups[g].rows * D));
      t.kv = std::span<LayerKv* const>(kv_of).subspan(static_cast<size_t>(first),
                                                      groups[g].sequences.size());
      tasks.push_back(t);
    }
    if (absl::Status s = RunLayerTasks(c, l, tasks, buffers, threads); !s.ok()) return s;
  }
  FinalNorm(c, w.final_norm, e, hidden, hidden, threads, nullptr);
  Logits(c, e, batch, hidden, w.head(), V, logits.data(), V, threads, nullptr);
  return absl::OkStatus();
}

// Executed flops per token of a prefill of `tokens` from position 0.
double FlopsPerToken(const ModelConfig& c, int64_t tokens) {
  const int64_t D = c.hidden_size, I = c.intermediate_size;
  const int64_t q = c.num_heads * c.head_dim, kv = c.num_kv_heads * c.head_dim;
  const int64_t linear = q * D + 2 * kv * D + D * q + 3 * I * D;  // per layer
  const double params = static_cast<double>(linear * c.num_layers + c.vocab_size * D);
  const double attention =
      4.0 * static_cast<double>(tokens * c.head_dim * c.num_heads * c.num_layers);
  return 2 * params + attention;
}

// Token i of the run (sequence s, position t: i = s * 128 + t), the same
// formula as bench/torch_forward.py.
std::vector<int32_t> Tokens(int64_t sequences, int64_t vocab) {
  std::vector<int32_t> ids(static_cast<size_t>(sequences * kTokens));
  for (size_t i = 0; i < ids.size(); ++i) {
    ids[i] = static_cast<int32_t>((static_cast<uint64_t>(i) * 2654435761u + 1) %
                                  static_cast<uint64_t>(vocab));
  }
  return ids;
}

const Emulation kNone;

struct Site1 {
  std::string label;  // "none", "activations=int8-channel", ...
  Emulation emulation;
};

Site1 ParseSite(const std::string& label) {
  Site1 out{label, {}};
  if (label == "none") return out;
  const size_t eq = label.find('=');
  const std::string field = label.substr(0, eq), value = label.substr(eq + 1);
  if (field == "compute") {
    absl::StatusOr<Format> f = FindFormat(value);
    if (!f.ok()) {
      std::fprintf(stderr, "forward_bench: %s\n", std::string(f.status().message()).c_str());
      std::exit(1);
    }
    out.emulation.compute = *f;
    return out;
  }
  absl::StatusOr<std::unique_ptr<Scheme>> s = ParseScheme(value);
  if (!s.ok()) {
    std::fprintf(stderr, "forward_bench: %s\n", std::string(s.status().message()).c_str());
    std::exit(1);
  }
  std::shared_ptr<const Scheme> scheme(*std::move(s));
  (field == "kv" ? out.emulation.kv : out.emulation.activations) = std::move(scheme);
  return out;
}

void ForwardCase(benchmark::State& state, std::string model, std::string site, int64_t sequences,
                 int threads) {
  const InMemoryModel& w = Model(model);
  const Site1 s = ParseSite(site);
  const int64_t V = w.config.vocab_size;
  const std::vector<int32_t> ids = Tokens(sequences, V);
  std::vector<float> logits(static_cast<size_t>(sequences * kTokens * V));
  for (auto _ : state) {
    if (absl::Status e = Forward(w, s.emulation, ids, sequences, threads, logits); !e.ok()) {
      state.SkipWithError(std::string(e.message()).c_str());
      return;
    }
    benchmark::ClobberMemory();
  }
  double sum = 0;
  for (int64_t i = 0; i < kTokens * V; ++i) sum += logits[i];
  const double tokens = static_cast<double>(sequences * kTokens);
  const double flops = FlopsPerToken(w.config, kTokens);
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations()) * sequences * kTokens);
  state.counters["tokens_per_second"] =
      benchmark::Counter(tokens, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["gflops"] =
      benchmark::Counter(tokens * flops / 1e9, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["flops_per_token"] = flops;
  state.counters["logits_mean"] = sum / static_cast<double>(kTokens * V);
}

// One emulated site against none, paired: every iteration runs the forward
// with the site and without (in alternating order: site first on even
// iterations, none first on odd ones), each on its own clock; the
// iteration's time is the emulated forward's. Counters: none_ms (the plain
// forwards of the same iterations, mean), added_ms and added_cost (the
// median over iterations of emulated - plain and emulated / plain - 1), so
// that a slow spell of this shared machine falls on both sides of a pair.
void SiteCase(benchmark::State& state, std::string model, std::string site) {
  const InMemoryModel& w = Model(model);
  const Site1 s = ParseSite(site);
  const int64_t V = w.config.vocab_size;
  const std::vector<int32_t> ids = Tokens(1, V);
  std::vector<float> logits(static_cast<size_t>(kTokens * V));
  std::vector<double> differences, ratios;
  double none_seconds = 0;
  auto run = [&](const Emulation& e) -> double {
    const auto start = std::chrono::steady_clock::now();
    const absl::Status status = Forward(w, e, ids, 1, 1, logits);
    benchmark::ClobberMemory();
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (!status.ok()) state.SkipWithError(std::string(status.message()).c_str());
    return status.ok() ? seconds : -1;
  };
  for (auto _ : state) {
    const bool site_first = differences.size() % 2 == 0;
    const double a = run(site_first ? s.emulation : kNone);
    const double b = run(site_first ? kNone : s.emulation);
    if (a < 0 || b < 0) return;
    const double emulated = site_first ? a : b, plain = site_first ? b : a;
    state.SetIterationTime(emulated);
    none_seconds += plain;
    differences.push_back(emulated - plain);
    ratios.push_back(emulated / plain - 1);
  }
  auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    const size_t n = v.size();
    return n % 2 == 1 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
  };
  const double flops = FlopsPerToken(w.config, kTokens);
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations()) * kTokens);
  state.counters["tokens_per_second"] = benchmark::Counter(
      static_cast<double>(kTokens), benchmark::Counter::kIsIterationInvariantRate);
  state.counters["gflops"] =
      benchmark::Counter(kTokens * flops / 1e9, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["flops_per_token"] = flops;
  state.counters["none_ms"] =
      benchmark::Counter(none_seconds * 1e3, benchmark::Counter::kAvgIterations);
  state.counters["added_ms"] = median(differences) * 1e3;
  state.counters["added_cost"] = median(ratios);
}

// B for an sgemm case: the 1B shape's own matrix of that shape, else random.
const float* SgemmB(int64_t rows, int64_t cols, bool transposed, std::vector<float>& own) {
  if (transposed) {
    const InMemoryModel& w = Model(kWide);
    for (const Matrix* m : {&w.layers[0].q, &w.layers[0].k, &w.layers[0].gate, &w.layers[0].down}) {
      if (m->rows == rows && m->cols == cols) return m->values.data();
    }
    if (rows == w.config.vocab_size && cols == w.config.hidden_size) return w.embed.data();
  }
  own = Normal(rows * cols, 7);
  return own.data();
}

void Sgemm(benchmark::State& state, bool transposed, int64_t m, int64_t n, int64_t k, int threads,
           int blas_threads) {
  std::vector<float> own_b;
  const float* b = transposed ? SgemmB(n, k, true, own_b) : SgemmB(k, n, false, own_b);
  std::vector<std::vector<float>> a(threads), c(threads);
  for (int t = 0; t < threads; ++t) {
    a[t] = Normal(m * k, 11 + t);
    c[t].assign(static_cast<size_t>(m * n), 0.0f);
  }
  const blasint ldb = static_cast<blasint>(transposed ? k : n);
  openblas_set_num_threads(blas_threads);
  for (auto _ : state) {
    ParallelFor(static_cast<size_t>(threads), threads, [&](size_t t) {
      cblas_sgemm(CblasRowMajor, CblasNoTrans, transposed ? CblasTrans : CblasNoTrans,
                  static_cast<blasint>(m), static_cast<blasint>(n), static_cast<blasint>(k), 1.0f,
                  a[t].data(), static_cast<blasint>(k), b, ldb, 0.0f, c[t].data(),
                  static_cast<blasint>(n));
    });
    benchmark::ClobberMemory();
  }
  openblas_set_num_threads(1);
  const double flops = 2.0 * static_cast<double>(m * n * k) * threads;
  state.counters["gflops"] =
      benchmark::Counter(flops / 1e9, benchmark::Counter::kIsIterationInvariantRate);
}

// See bf16-product/ at the top. `path`: "widen", "tile" or "f32".
void Bf16ProductCase(benchmark::State& state, std::string path, int64_t m, int64_t n, int64_t k) {
  static const Format bf16 = *FindFormat("bf16");
  const std::vector<float> values = Normal(n * k, 23);
  std::vector<uint8_t> stored(static_cast<size_t>(n * k) * 2);
  Check(EncodeArray(bf16, values, stored));
  std::vector<float> widened(static_cast<size_t>(n * k));
  Check(DecodeArray(bf16, stored, widened, {.threads = 1}));
  const std::vector<float> a = Normal(m * k, 29);
  std::vector<float> c(static_cast<size_t>(m * n)), check(c.size());
  const RowBlock block{0, m};
  const int64_t width = GemmTileColumns(n, k);
  std::vector<float> tile(static_cast<size_t>(width * k));
  const auto tiled = [&](std::span<float> out) {
    for (int64_t first = 0; first < n; first += width) {
      const int64_t cols = std::min(width, n - first);
      const std::span<float> t(tile.data(), static_cast<size_t>(cols * k));
      const std::span<const uint8_t> codes =
          std::span<const uint8_t>(stored).subspan(first * k * 2, t.size() * 2);
      Check(DecodeArray(bf16, codes, t, {.threads = 1}));
      lowp::Sgemm(true, m, cols, k, 1.0f, a.data(), k, t.data(), k, out.data() + first, n);
    }
  };
  // The tiles give LinearProduct's bits.
  LinearProduct({&block, 1}, a.data(), k, widened.data(), n, k, nullptr, check.data(), n, 1);
  tiled(c);
  if (c != check) {
    state.SkipWithError("the tiles' products differ from LinearProduct's");
    return;
  }
  for (auto _ : state) {
    if (path == "tile") {
      tiled(c);
    } else {
      if (path == "widen") Check(DecodeArray(bf16, stored, widened, {.threads = 1}));
      LinearProduct({&block, 1}, a.data(), k, widened.data(), n, k, nullptr, c.data(), n, 1);
    }
    benchmark::ClobberMemory();
  }
  state.counters["gflops"] = benchmark::Counter(2.0 * static_cast<double>(m * n * k) / 1e9,
                                                benchmark::Counter::kIsIterationInvariantRate);
}

// Wall-clock time (the paired site cases: their own clock, manual time, at
// least 2 s of emulated forwards per repetition);
// repetitions from --benchmark_repetitions (the README's runs use 3),
// aggregates only.
template <class... Args>
benchmark::internal::Benchmark* Register(bool manual_time, const std::string& name,
                                         Args&&... args) {
  benchmark::internal::Benchmark* b =
      benchmark::RegisterBenchmark(name.c_str(), std::forward<Args>(args)...);
  if (manual_time) {
    b->UseManualTime();
  } else {
    b->UseRealTime();
  }
  return b->MinTime(manual_time ? 2.0 : 0.5)
      ->ReportAggregatesOnly(true)
      ->Unit(benchmark::kMillisecond);
}

// Seeded activation-like values: N(0, sigma^2), every 53rd value x 40.
std::vector<float> Activations(size_t n, float sigma, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, sigma);
  std::vector<float> v(n);
  for (float& x : v) x = normal(rng);
  for (size_t i = 7; i < n; i += 53) v[i] *= 40;
  return v;
}

constexpr int64_t kKernelRows = 64;

void NnCase(benchmark::State& state, std::string kernel, bool simd, int64_t n) {
  const size_t total = static_cast<size_t>(kKernelRows * n);
  const std::vector<float> input = Activations(total, kernel == "softmax" ? 3.0f : 1.0f, 1);
  const std::vector<float> y = Activations(total, 1.0f, 2);
  const std::vector<float> weight(static_cast<size_t>(n), 1.0f);
  const int64_t dim = n / 8;  // rope: 8 heads
  std::vector<float> cos(static_cast<size_t>(dim / 2)), sin(static_cast<size_t>(dim / 2));
  for (int64_t i = 0; i < dim / 2; ++i) {
    const double angle = 37.0 * std::pow(10000.0, -2.0 * static_cast<double>(i) / dim);
    cos[i] = static_cast<float>(std::cos(angle));
    sin[i] = static_cast<float>(std::sin(angle));
  }
  std::vector<float> x(total);
  uint64_t count = 0;
  for (auto _ : state) {
    std::copy(input.begin(), input.end(), x.begin());
    for (int64_t r = 0; r < kKernelRows; ++r) {
      float* row = x.data() + r * n;
      std::span<float> span(row, static_cast<size_t>(n));
      std::span<const float> other(y.data() + r * n, static_cast<size_t>(n));
      if (kernel == "softmax") {
        simd ? Softmax(span) : SoftmaxRef(span);
      } else if (kernel == "rmsnorm") {
        (simd ? RmsNorm : RmsNormRef)(row, row, 1, n, weight.data(), false, 1e-5);
      } else if (kernel == "rope") {
        (simd ? Rope : RopeRef)(row, 8, dim, cos.data(), sin.data());
      } else if (kernel == "silu") {
        simd ? Silu(span) : SiluRef(span);
      } else if (kernel == "add") {
        simd ? AddTo(span, other) : AddToRef(span, other);
      } else if (kernel == "multiply") {
        simd ? MultiplyBy(span, other) : MultiplyByRef(span, other);
      } else if (kernel == "nonfinite") {
        count += simd ? CountNonfinite(span) : CountNonfiniteRef(span);
      } else {
        simd ? ExpF32(span, span) : ExpF32Ref(span, span);
      }
    }
    benchmark::DoNotOptimize(x.data());
    benchmark::DoNotOptimize(count);
    benchmark::ClobberMemory();
  }
  state.counters["values_per_second"] = benchmark::Counter(
      static_cast<double>(state.iterations()) * static_cast<double>(total),
      benchmark::Counter::kIsRate);
}

std::string ForwardName(const std::string& model, const std::string& site, int64_t sequences,
                        int threads) {
  return "forward/" + model + "/" + site + "/seqs:" + std::to_string(sequences) +
         "/tokens:" + std::to_string(kTokens) + "/threads:" + std::to_string(threads);
}

void RegisterAll() {
  const int all = AvailableCpus();
  // The elementwise kernels, reference then SIMD at each width: the bundled
  // models' rows (8- and 32-wide heads, 64- and 256-wide hidden states, 172
  // and 768 intermediate, softmax rows of 128 and 256 keys) and the 1B
  // shape's (2048 hidden, 8192 intermediate).
  const std::pair<const char*, std::vector<int64_t>> kernels[] = {
      {"softmax", {128, 256, 2048}},  {"rmsnorm", {64, 256, 2048}}, {"rope", {64, 256, 512}},
      {"silu", {172, 768, 8192}},     {"add", {64, 256, 2048}},     {"multiply", {172, 768, 8192}},
      {"nonfinite", {256, 2048}},     {"exp", {256, 2048}}};
  for (const auto& [kernel, widths] : kernels) {
    for (int64_t n : widths) {
      for (bool simd : {false, true}) {
        const std::string name = std::string("nn/") + kernel + (simd ? "/simd" : "/reference") +
                                 "/n:" + std::to_string(n);
        benchmark::RegisterBenchmark(name.c_str(), NnCase, kernel, simd, n)
            ->MinTime(0.2)
            ->Unit(benchmark::kMicrosecond);
      }
    }
  }
  // Cheap cases first: the bundled model, then the sgemm shapes, then the
  // wide model (its weights, 1.5 GB, are drawn on first use).
  for (int threads : {1, all}) {
    Register(false, ForwardName(kBundled, "none", 8, threads), ForwardCase, kBundled, "none", 8,
             threads);
  }
  // The linear layers of the 1B shape at 128 tokens (q and o, k and v,
  // gate and up, down, lm_head), the attention's per-head products, and the
  // square.
  struct Shape {
    bool transposed;
    int64_t m, n, k;
  };
  const Shape shapes[] = {{true, 128, 2048, 2048},   {true, 128, 512, 2048},
                          {true, 128, 8192, 2048},   {true, 128, 2048, 8192},
                          {true, 128, 128256, 2048}, {true, 128, 128, 64},
                          {false, 128, 64, 128},     {false, 2048, 2048, 2048}};
  for (int threads : {1, all}) {
    for (const Shape& s : shapes) {
      const std::string name = std::string(s.transposed ? "sgemm/" : "sgemm-nn/") +
                               std::to_string(s.m) + "x" + std::to_string(s.n) + "x" +
                               std::to_string(s.k) + "/threads:" + std::to_string(threads);
      Register(false, name, Sgemm, s.transposed, s.m, s.n, s.k, threads, 1);
    }
  }
  if (all > 1) {
    Register(false, "sgemm-blas-threads:" + std::to_string(all) + "/2048x2048x2048", Sgemm, false,
             int64_t{2048}, int64_t{2048}, int64_t{2048}, 1, all);
  }
  // A layer's products on bf16 weights: q/o, gate/up and down at 256 rows.
  for (const auto& [n, k] : {std::pair<int64_t, int64_t>{2048, 2048}, {8192, 2048}, {2048, 8192}}) {
    for (const char* path : {"widen", "tile", "f32"}) {
      Register(false,
               absl::StrCat("bf16-product/", path, "/256x", n, "x", k, "/threads:1"),
               Bf16ProductCase, std::string(path), int64_t{256}, n, k);
    }
  }
  Register(false, ForwardName(kWide, "none", 1, 1), ForwardCase, kWide, "none", 1, 1);
  if (all > 1) {
    Register(false, ForwardName(kWide, "none", 1, all), ForwardCase, kWide, "none", 1, all);
    Register(false, ForwardName(kWide, "none", all, all), ForwardCase, kWide, "none", all, all);
  }
  for (const char* site : {"activations=int8-channel", "activations=mxfp8", "kv=fp8_e4m3fn",
                           "kv=int8-channel", "compute=fp16", "compute=bf16"}) {
    Register(true, ForwardName(kWide, site, 1, 1), SiteCase, kWide, site);
  }
}

}  // namespace
}  // namespace lowp

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  const lowp::BlasKernels& blas = lowp::BlasSetup();
  benchmark::AddCustomContext("openblas_chosen_by", blas.chosen_by);
  benchmark::AddCustomContext("openblas_core", openblas_get_corename());
  benchmark::AddCustomContext("openblas_config", openblas_get_config());
  const char* coretype = std::getenv("OPENBLAS_CORETYPE");
  benchmark::AddCustomContext("OPENBLAS_CORETYPE", coretype != nullptr ? coretype : "(unset)");
  lowp::RegisterAll();
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
