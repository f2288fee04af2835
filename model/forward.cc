#include "model/forward.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <mutex>
#include <numeric>

#include "absl/strings/str_cat.h"
#include "codecs/ggml_vec_dot.h"
#include "kernels/convert.h"
#include "kernels/hadamard.h"
#include "kernels/nn.h"
#include "kernels/thread_pool.h"
#include "model/blas.h"

namespace lowp {

namespace {

constexpr const char* kSiteNames[kSiteCount] = {
    "embedding", "attn_norm", "q_proj",        "k_proj",      "v_proj",  "qk_norm",
    "rope",      "scores",    "softmax",       "attn_values", "o_proj",  "post_attn_norm",
    "residual",  "mlp_norm",  "router",        "gate_proj",   "up_proj", "act",
    "act_mul",   "down_proj", "post_mlp_norm", "final_norm",  "logits"};

float GeluTanh(float x) {
  const float k = 0.7978845608028654f;  // sqrt(2 / pi)
  return 0.5f * x * (1.0f + std::tanh(k * (x + 0.044715f * x * x * x)));
}
float GeluErf(float x) { return 0.5f * x * (1.0f + std::erf(x * 0.7071067811865476f)); }

// Queries per attention task (its scores: this many rows of the keys seen).
constexpr int64_t kAttentionRows = 256;

// Below this many operations, work stays on the calling thread: waking the
// pool's threads costs more.
constexpr int64_t kParallelWork = int64_t{1} << 16;
int Workers(int threads, int64_t work) { return work >= kParallelWork ? threads : 1; }

// Runs body(first, end) over [0, rows) in pieces of whole rows (about 16K
// values each) on the pool.
void ForRows(int64_t rows, int64_t width, int threads,
             const std::function<void(int64_t, int64_t)>& body) {
  const int64_t piece = std::max<int64_t>(1, (int64_t{1} << 14) / std::max<int64_t>(width, 1));
  const int64_t pieces = (rows + piece - 1) / piece;
  ParallelFor(static_cast<size_t>(pieces), Workers(threads, rows * width), [&](size_t i) {
    const int64_t first = static_cast<int64_t>(i) * piece;
    body(first, std::min(rows, first + piece));
  });
}

// The emulated rounding of every site's values and their census. Tasks on
// the pool each count into a Census of their own and merge it once: the
// counts are sums, so they never depend on how work was split.
class Sites {
 public:
  Sites(const Emulation& e, Census* census) : e_(e), census_(census) {
    if (e_.compute.has_value()) {
      // Nearest-even is valid for every floating format.
      rounder_.emplace(*Rounder::Make(*e_.compute));
      max_finite_ = static_cast<float>(e_.compute->max_finite());
    }
  }

  // Rounds `x` to the compute format (when emulated) and counts into `local`.
  void Round(Site site, std::span<float> x, Census& local) const {
    if (rounder_.has_value()) {
      thread_local std::vector<float> before;
      if (census_ != nullptr) before.assign(x.begin(), x.end());
      RunOptions run;
      run.threads = 1;
      rounder_->Round(x, x, run);
      if (census_ != nullptr) {
        SiteCounts& s = local.sites[static_cast<int>(site)];
        for (size_t i = 0; i < x.size(); ++i) {
          const float a = std::fabs(before[i]), q = std::fabs(x[i]);
          const bool finite_in = std::isfinite(a);
          s.overflow += finite_in & !std::isfinite(q);
          s.saturated += finite_in & (a > max_finite_) & std::isfinite(q);
          s.flushed += (a != 0) & finite_in & (q == 0);
        }
      }
    }
    if (census_ == nullptr) return;
    SiteCounts& s = local.sites[static_cast<int>(site)];
    s.values += x.size();
    s.nonfinite += CountNonfinite(x);
  }

  void Merge(const Census& local) const {
    if (census_ == nullptr) return;
    std::lock_guard<std::mutex> lock(mutex_);
    census_->Merge(local);
  }

  // Rounds rows [0, rows) of width `width` (row stride `stride`) at `site`.
  void RoundRows(Site site, float* x, int64_t rows, int64_t width, int64_t stride,
                 int threads) const {
    if (!rounder_.has_value() && census_ == nullptr) return;
    ForRows(rows, width, threads, [&](int64_t first, int64_t end) {
      Census local;
      for (int64_t r = first; r < end; ++r) {
        Round(site, std::span<float>(x + r * stride, static_cast<size_t>(width)), local);
      }
      Merge(local);
    });
  }
  void RoundAll(Site site, std::span<float> x, int64_t width, int threads) const {
    RoundRows(site, x.data(), static_cast<int64_t>(x.size()) / width, width, width, threads);
  }

 private:
  const Emulation& e_;
  Census* census_;
  std::optional<Rounder> rounder_;
  float max_finite_ = 0;
  mutable std::mutex mutex_;
};

// RMSNorm of each `width`-wide row of `x` into `out` (may be `x`), rounded
// at `site`.
void Norm(const ModelConfig& c, const Sites& sites, std::span<const float> x, int64_t width,
          std::span<const float> weight, std::span<float> out, Site site, int threads) {
  const int64_t rows = static_cast<int64_t>(x.size()) / width;
  ForRows(rows, width, threads, [&](int64_t first, int64_t end) {
    Census local;
    float* o = out.data() + first * width;
    RmsNorm(x.data() + first * width, o, end - first, width, weight.data(), c.norm_adds_one,
            c.rms_norm_eps);
    sites.Round(site, std::span<float>(o, static_cast<size_t>((end - first) * width)), local);
    sites.Merge(local);
  });
}

// Each sequence's rows of `x` ([rows, cols]) through `scheme`, one call per
// sequence (a "-tensor" scheme's scale is per sequence): `out` then, or `x`
// itself when there is no scheme.
std::span<const float> QuantizePerSequence(const Scheme* scheme, const Batch& b,
                                           std::span<const float> x, int64_t cols,
                                           std::vector<float>& out, int threads) {
  if (scheme == nullptr) return x;
  out.resize(x.size());
  const int64_t width = static_cast<int64_t>(x.size()) / std::max<int64_t>(b.rows, 1);
  const int workers = Workers(threads, static_cast<int64_t>(x.size()) * 8);
  ParallelFor(b.sequences.size(), workers, [&](size_t s) {
    const SequenceRows& seq = b.sequences[s];
    const size_t first = static_cast<size_t>(seq.first_row * width);
    const size_t n = static_cast<size_t>(seq.rows * width);
    std::span<const float> in = x.subspan(first, n);
    TensorContext context;
    if (scheme->NeedsTensorPass()) scheme->Observe(in, cols, context);
    SchemeCounts counts;
    scheme->Apply(in, cols, context, std::span<float>(out).subspan(first, n), counts);
  });
  return out;
}

// The inverse frequencies of the rotary embedding of `layer`, rope_scaling
// applied (Gemma 3's windowed layers: rope_local_base_freq, unscaled).
std::vector<double> InverseFrequencies(const ModelConfig& c, int64_t layer) {
  const int64_t d = c.head_dim;
  std::vector<double> inv_freq(static_cast<size_t>(d / 2));
  const bool local = c.rope_local_theta > 0 && SlidingLayer(c, layer);
  const RopeScaling none;
  const RopeScaling& r = local ? none : c.rope_scaling;
  const double theta = local ? c.rope_local_theta : c.rope_theta;
  for (int64_t i = 0; i < d / 2; ++i) {
    double f = std::pow(theta, -2.0 * static_cast<double>(i) / static_cast<double>(d));
    if (r.type == "linear") {
      f /= r.factor;
    } else if (r.type == "llama3") {
      const double wavelen = 2 * M_PI / f;
      const double old_context = static_cast<double>(r.original_max_position_embeddings);
      const double low_wavelen = old_context / r.low_freq_factor;
      const double high_wavelen = old_context / r.high_freq_factor;
      if (wavelen > low_wavelen) {
        f /= r.factor;
      } else if (wavelen >= high_wavelen) {
        const double smooth =
            (old_context / wavelen - r.low_freq_factor) / (r.high_freq_factor - r.low_freq_factor);
        f = (1 - smooth) * f / r.factor + smooth * f;
      }
    }
    inv_freq[i] = f;
  }
  return inv_freq;
}

// One decoder layer over one batch: the state of a ForwardLayer call.
class LayerPass {
 public:
  LayerPass(const ModelConfig& c, int64_t layer, const LayerWeights& w, const Emulation& e,
            const Batch& b, std::span<LayerKv* const> kv, ForwardBuffers& buf, int threads,
            Census* census, LinearInputs* inputs, std::span<int32_t> routes)
      : c_(c),
        layer_(layer),
        w_(w),
        e_(e),
        b_(b),
        kv_(kv),
        buf_(buf),
        threads_(threads),
        sites_(e, census),
        inputs_(inputs),
        routes_(routes) {}

  // llama.cpp's KV rotation's block sizes for q and k, and for v (0: none).
  void SetKvRotation(int64_t k, int64_t v) {
    rotate_k_ = k;
    rotate_v_ = v;
  }

  void Run(std::span<float> x) {
    const int64_t D = c_.hidden_size;
    buf_.positions.resize(static_cast<size_t>(b_.rows));
    for (const SequenceRows& s : b_.sequences) {
      for (int64_t r = 0; r < s.rows; ++r) buf_.positions[s.first_row + r] = s.first_position + r;
    }
    buf_.normed.resize(x.size());
    Norm(c_, sites_, x, D, w_.input_norm, buf_.normed, Site::kAttnNorm, threads_);
    Attention(buf_.normed, buf_.branch);
    if (c_.norms_per_layer == 4) {
      Norm(c_, sites_, buf_.branch, D, w_.post_attention_norm, buf_.branch, Site::kPostAttnNorm,
           threads_);
    }
    AddResidual(x, buf_.branch);
    std::span<const float> mlp_norm =
        c_.norms_per_layer == 4 ? w_.pre_feedforward_norm : w_.post_attention_norm;
    Norm(c_, sites_, x, D, mlp_norm, buf_.normed, Site::kMlpNorm, threads_);
    if (!w_.experts.empty()) {
      Moe(buf_.normed, buf_.branch);
      if (w_.shared.gate.rows > 0) SharedExpert(buf_.normed, buf_.branch);
    } else {
      std::span<const float> in =
          QuantizePerSequence(e_.activations.get(), b_, buf_.normed, D, buf_.in, threads_);
      Mlp(w_.gate, w_.up, w_.down, in, buf_.branch);
    }
    if (c_.norms_per_layer == 4) {
      Norm(c_, sites_, buf_.branch, D, w_.post_feedforward_norm, buf_.branch, Site::kPostMlpNorm,
           threads_);
    }
    AddResidual(x, buf_.branch);
  }

 private:
  // out[rows, m.rows] = in[rows, m.cols] m^T + bias, rounded at `site`.
  // `expert`: what LinearInputs is told (-1, or kSharedExpert).
  void Linear(const Matrix& m, std::span<const float> in, std::vector<float>& out, Site site,
              int64_t expert = -1) {
    in = ForVecDot(m, in, buf_.vec_dot);
    if (inputs_ != nullptr) inputs_->Add(layer_, site, expert, in, m.cols);
    out.resize(static_cast<size_t>(b_.rows * m.rows));
    LinearProduct(b_.blocks, in.data(), m.cols, m.values.data(), m.rows, m.cols,
                  m.bias.empty() ? nullptr : m.bias.data(), out.data(), m.rows, threads_);
    sites_.RoundAll(site, out, m.rows, threads_);
  }

  // `in` as llama.cpp's CPU backend converts a product's input for m's
  // stored type (Emulation::ggml_products), in `buffer`; else `in`.
  std::span<const float> ForVecDot(const Matrix& m, std::span<const float> in,
                                   std::vector<float>& buffer) const {
    if (!e_.ggml_products || m.stored_type == nullptr) return in;
    const std::optional<ggml::Type> type = ggml::VecDotType(m.stored_type->type);
    if (!type.has_value() || *type == ggml::Type::kF32) return in;
    buffer.resize(in.size());
    const int64_t rows = static_cast<int64_t>(in.size()) / m.cols;
    ForRows(rows, m.cols, threads_, [&](int64_t first, int64_t end) {
      const size_t at = static_cast<size_t>(first * m.cols), n = static_cast<size_t>((end - first) * m.cols);
      ggml::RoundForVecDot(*type, in.subspan(at, n), std::span<float>(buffer).subspan(at, n));
    });
    return buffer;
  }

  void AddResidual(std::span<float> x, std::span<const float> branch) {
    const int64_t D = c_.hidden_size;
    ForRows(b_.rows, D, threads_, [&](int64_t first, int64_t end) {
      Census local;
      const size_t begin = static_cast<size_t>(first * D), n = static_cast<size_t>((end - first) * D);
      AddTo(x.subspan(begin, n), branch.subspan(begin, n));
      sites_.Round(Site::kResidual, x.subspan(begin, n), local);
      sites_.Merge(local);
    });
  }

  // The cosines and sines of each row's angles (position x inverse
  // frequency, in double, rounded to float) into cos_ and sin_, [rows,
  // head_dim / 2] each: computed once for the queries and the keys.
  void RopeAngles() {
    const int64_t half = c_.head_dim / 2;
    const std::vector<double> inv_freq = InverseFrequencies(c_, layer_);
    cos_.resize(static_cast<size_t>(b_.rows * half));
    sin_.resize(static_cast<size_t>(b_.rows * half));
    ForRows(b_.rows, half * 8, threads_, [&](int64_t first, int64_t end) {
      for (int64_t t = first; t < end; ++t) {
        const double pos = static_cast<double>(buf_.positions[t]);
        for (int64_t i = 0; i < half; ++i) {
          const double angle = pos * inv_freq[i];
          cos_[t * half + i] = static_cast<float>(std::cos(angle));
          sin_[t * half + i] = static_cast<float>(std::sin(angle));
        }
      }
    });
  }

  // Rotates each head_dim-wide vector of `x` ([rows, heads * head_dim]) by
  // its row's position (RopeAngles first).
  void Rope(std::span<float> x, int64_t heads) {
    const int64_t d = c_.head_dim, half = d / 2;
    ForRows(b_.rows, heads * d, threads_, [&](int64_t first, int64_t end) {
      for (int64_t t = first; t < end; ++t) {
        lowp::Rope(x.data() + t * heads * d, heads, d, cos_.data() + t * half,
                   sin_.data() + t * half);
      }
    });
  }

  void Attention(std::span<const float> a, std::vector<float>& out) {
    const int64_t H = c_.num_heads, KV = c_.num_kv_heads, d = c_.head_dim;
    std::span<const float> in =
        QuantizePerSequence(e_.activations.get(), b_, a, c_.hidden_size, buf_.in, threads_);
    Linear(w_.q, in, buf_.q, Site::kQProj);
    Linear(w_.k, in, buf_.k, Site::kKProj);
    Linear(w_.v, in, buf_.v, Site::kVProj);
    if (c_.qk_norm) {
      Norm(c_, sites_, buf_.q, d, w_.q_norm, buf_.q, Site::kQkNorm, threads_);
      Norm(c_, sites_, buf_.k, d, w_.k_norm, buf_.k, Site::kQkNorm, threads_);
    }
    RopeAngles();
    Rope(buf_.q, H);
    Rope(buf_.k, KV);
    sites_.RoundAll(Site::kRope, buf_.q, H * d, threads_);
    sites_.RoundAll(Site::kRope, buf_.k, KV * d, threads_);
    if (rotate_k_ > 0) {
      HadamardBlocks(buf_.q, rotate_k_);
      HadamardBlocks(buf_.k, rotate_k_);
    }
    if (rotate_v_ > 0) HadamardBlocks(buf_.v, rotate_v_);
    // Each sequence's keys and values into its cache, as stored.
    ParallelFor(b_.sequences.size(), Workers(threads_, b_.rows * KV * d * 2), [&](size_t s) {
      const SequenceRows& seq = b_.sequences[s];
      const size_t first = static_cast<size_t>(seq.first_row * KV * d);
      const size_t n = static_cast<size_t>(seq.rows * KV * d);
      thread_local std::vector<float> stored;
      LayerKv& cache = *kv_[s];
      for (auto [from, to] : {std::pair{&buf_.k, &cache.keys}, std::pair{&buf_.v, &cache.values}}) {
        std::span<const float> x = std::span<const float>(*from).subspan(first, n);
        if (e_.kv != nullptr) {
          stored.resize(n);
          TensorContext context;
          if (e_.kv->NeedsTensorPass()) e_.kv->Observe(x, d, context);
          SchemeCounts counts;
          e_.kv->Apply(x, d, context, stored, counts);
          x = stored;
        }
        to->insert(to->end(), x.begin(), x.end());
      }
      cache.positions += seq.rows;
    });

    const double scalar =
        c_.query_pre_attn_scalar > 0 ? c_.query_pre_attn_scalar : static_cast<double>(d);
    const float scale = static_cast<float>(1.0 / std::sqrt(scalar));
    const int64_t window = SlidingLayer(c_, layer_) ? c_.sliding_window : 0;
    const float cap = static_cast<float>(c_.attn_logit_softcapping);
    buf_.attn.resize(static_cast<size_t>(b_.rows * H * d));
    // Tasks of (sequence, head, block of queries): a block's scores are
    // [queries, keys it may see], so memory stays kAttentionRows rows of
    // scores per thread however long the sequence.
    struct Block {
      size_t sequence;
      int64_t begin, end;  // queries, relative to the sequence's first row
    };
    std::vector<Block> blocks;
    int64_t work = 0;  // multiply-adds of the scores and values products
    for (size_t s = 0; s < b_.sequences.size(); ++s) {
      const int64_t n = b_.sequences[s].rows;
      for (int64_t i = 0; i < n; i += kAttentionRows) {
        blocks.push_back({s, i, std::min(n, i + kAttentionRows)});
      }
      work += n * kv_[s]->positions;
    }
    const int workers = Workers(threads_, 2 * work * H * d);
    ParallelFor(blocks.size() * static_cast<size_t>(H), workers, [&](size_t task) {
      const Block& block = blocks[task / H];
      const SequenceRows& seq = b_.sequences[block.sequence];
      const int64_t h = static_cast<int64_t>(task % H);
      const LayerKv& cache = *kv_[block.sequence];
      const int64_t n = block.end - block.begin, p0 = seq.first_position + block.begin;
      const int64_t T = p0 + n;  // keys the block's last query sees
      const int64_t g = h / (H / KV);
      const int64_t row = seq.first_row + block.begin;
      thread_local std::vector<float> scores;
      scores.resize(static_cast<size_t>(n * T));
      Census local;
      Sgemm(true, n, T, d, scale, buf_.q.data() + row * H * d + h * d, H * d,
            cache.keys.data() + g * d, KV * d, scores.data(), T);
      for (int64_t i = 0; i < n; ++i) {
        const int64_t pos = p0 + i;
        const int64_t first = window > 0 ? std::max<int64_t>(0, pos - window + 1) : 0;
        float* s = scores.data() + i * T;
        std::span<float> seen(s + first, static_cast<size_t>(pos + 1 - first));
        if (cap > 0) {
          for (float& v : seen) v = cap * std::tanh(v / cap);
        }
        sites_.Round(Site::kScores, seen, local);
        Softmax(seen);
        sites_.Round(Site::kSoftmax, seen, local);
        std::fill(s, s + first, 0.0f);
        std::fill(s + pos + 1, s + T, 0.0f);
      }
      Sgemm(false, n, d, T, 1.0f, scores.data(), T, cache.values.data() + g * d, KV * d,
            buf_.attn.data() + row * H * d + h * d, H * d);
      sites_.Merge(local);
    });
    if (rotate_v_ > 0) HadamardBlocks(buf_.attn, rotate_v_);  // back from v's rotation
    sites_.RoundAll(Site::kAttnValues, buf_.attn, H * d, threads_);
    std::span<const float> o_in =
        QuantizePerSequence(e_.activations.get(), b_, buf_.attn, H * d, buf_.act_in, threads_);
    Linear(w_.o, o_in, out, Site::kOProj);
  }

  // act(gate x) * up x -> down, for the batch's rows of `in` (quantized).
  void Mlp(const Matrix& gate, const Matrix& up, const Matrix& down, std::span<const float> in,
           std::vector<float>& out, int64_t expert = -1) {
    Linear(gate, in, buf_.gate, Site::kGateProj, expert);
    Linear(up, in, buf_.up, Site::kUpProj, expert);
    ActMul(buf_.gate, buf_.up, gate.rows, b_.rows, threads_, Census());
    std::span<const float> down_in =
        QuantizePerSequence(e_.activations.get(), b_, buf_.gate, gate.rows, buf_.act_in, threads_);
    Linear(down, down_in, out, Site::kDownProj, expert);
  }

  // gate = act(gate) (rounded at kAct), then gate * up (rounded at kActMul).
  void ActMul(std::span<float> gate, std::span<const float> up, int64_t width, int64_t rows,
              int threads, Census) {
    ForRows(rows, width, threads, [&](int64_t first, int64_t end) {
      Census local;
      const size_t begin = static_cast<size_t>(first * width);
      std::span<float> g = gate.subspan(begin, static_cast<size_t>((end - first) * width));
      Activate(g);
      sites_.Round(Site::kAct, g, local);
      MultiplyBy(g, up.subspan(begin, g.size()));
      sites_.Round(Site::kActMul, g, local);
      sites_.Merge(local);
    });
  }

  // x = act(x), the config's activation (SiLU by default).
  void Activate(std::span<float> x) const {
    const std::string& act = c_.activation;
    if (act == "gelu_pytorch_tanh") {
      for (float& v : x) v = GeluTanh(v);
    } else if (act == "gelu") {
      for (float& v : x) v = GeluErf(v);
    } else {
      Silu(x);
    }
  }

  // A mixture of experts (Mixtral, the Qwen MoEs): the softmax of the router's
  // logits, the top k (ties to the lower index), their weights renormalized
  // to sum to 1 unless norm_topk_prob is false (Qwen3-MoE's default);
  // sequence by sequence on the pool (each sequence's products on its own
  // thread, as the activations' per-call scales are).
  void Moe(std::span<const float> m, std::vector<float>& out) {
    const int64_t E = c_.num_experts, k = c_.experts_per_token, D = c_.hidden_size;
    std::vector<float> router;
    Linear(w_.router, m, router, Site::kRouter);
    std::span<const float> in =
        QuantizePerSequence(e_.activations.get(), b_, m, D, buf_.in, threads_);
    out.assign(static_cast<size_t>(b_.rows * D), 0.0f);
    const int workers = Workers(threads_, b_.rows * k * 3 * D * ExpertWidth(c_));
    ParallelFor(b_.sequences.size(), workers, [&](size_t s) {
      const SequenceRows& seq = b_.sequences[s];
      const int64_t n = seq.rows;
      // Per expert, the tokens routed to it and their weights.
      std::vector<std::vector<int64_t>> tokens(E);
      std::vector<std::vector<float>> gains(E);
      std::vector<double> p(E);
      std::vector<int64_t> order(E);
      for (int64_t t = 0; t < n; ++t) {
        const float* r = router.data() + (seq.first_row + t) * E;
        const float max = *std::max_element(r, r + E);
        double sum = 0;
        for (int64_t e = 0; e < E; ++e) sum += p[e] = std::exp(static_cast<double>(r[e] - max));
        for (double& x : p) x /= sum;
        std::iota(order.begin(), order.end(), 0);
        std::stable_sort(order.begin(), order.end(),
                         [&](int64_t a, int64_t b) { return p[a] > p[b]; });
        double top = 0;
        for (int64_t j = 0; j < k; ++j) top += p[order[j]];
        if (!c_.norm_topk_prob) top = 1;
        for (int64_t j = 0; j < k; ++j) {
          tokens[order[j]].push_back(t);
          gains[order[j]].push_back(static_cast<float>(p[order[j]] / top));
          if (!routes_.empty()) {
            routes_[static_cast<size_t>((seq.first_row + t) * k + j)] =
                static_cast<int32_t>(order[j]);
          }
        }
      }
      std::vector<float> rows, gate, up, act_in, result;
      for (int64_t e = 0; e < E; ++e) {
        const int64_t count = static_cast<int64_t>(tokens[e].size());
        if (count == 0) continue;
        rows.resize(static_cast<size_t>(count * D));
        for (int64_t j = 0; j < count; ++j) {
          std::copy_n(in.data() + (seq.first_row + tokens[e][j]) * D, D, rows.data() + j * D);
        }
        const Expert& x = w_.experts[e];
        ExpertMlp(x, rows, count, gate, up, act_in, result);
        for (int64_t j = 0; j < count; ++j) {
          float* o = out.data() + (seq.first_row + tokens[e][j]) * D;
          for (int64_t i = 0; i < D; ++i) o[i] += gains[e][j] * result[j * D + i];
        }
      }
    });
  }

  // Qwen2-MoE's shared expert added to `out`: every token's MLP output
  // times sigmoid(shared_expert_gate x), the gate a router of one row.
  void SharedExpert(std::span<const float> m, std::vector<float>& out) {
    const int64_t D = c_.hidden_size;
    std::vector<float> gate, shared;
    Linear(w_.shared_gate, m, gate, Site::kRouter, kSharedExpert);
    std::span<const float> in =
        QuantizePerSequence(e_.activations.get(), b_, m, D, buf_.in, threads_);
    Mlp(w_.shared.gate, w_.shared.up, w_.shared.down, in, shared, kSharedExpert);
    for (int64_t r = 0; r < b_.rows; ++r) {
      const float g = 1.0f / (1.0f + std::exp(-gate[static_cast<size_t>(r)]));
      for (int64_t i = 0; i < D; ++i) out[r * D + i] += g * shared[r * D + i];
    }
  }

  // One expert's MLP over `count` rows on the calling thread.
  void ExpertMlp(const Expert& x, std::span<const float> in, int64_t count,
                 std::vector<float>& gate, std::vector<float>& up, std::vector<float>& act_in,
                 std::vector<float>& out) {
    const RowBlock all[] = {{0, count}};
    Census local;
    const int64_t expert = &x - w_.experts.data();
    std::vector<float> converted;
    auto linear = [&](const Matrix& m, std::span<const float> a, std::vector<float>& o, Site site) {
      if (e_.ggml_products && m.stored_type != nullptr) {  // ForVecDot, on this thread
        if (const std::optional<ggml::Type> t = ggml::VecDotType(m.stored_type->type)) {
          converted.resize(a.size());
          ggml::RoundForVecDot(*t, a, converted);
          a = converted;
        }
      }
      if (inputs_ != nullptr) inputs_->Add(layer_, site, expert, a, m.cols);
      o.resize(static_cast<size_t>(count * m.rows));
      LinearProduct(all, a.data(), m.cols, m.values.data(), m.rows, m.cols, nullptr, o.data(),
                    m.rows, 1);
      sites_.Round(site, o, local);
    };
    linear(x.gate, in, gate, Site::kGateProj);
    linear(x.up, in, up, Site::kUpProj);
    Activate(gate);
    sites_.Round(Site::kAct, gate, local);
    MultiplyBy(gate, up);
    sites_.Round(Site::kActMul, gate, local);
    std::span<const float> down_in = gate;
    if (const Scheme* scheme = e_.activations.get(); scheme != nullptr) {
      act_in.resize(gate.size());
      TensorContext context;
      if (scheme->NeedsTensorPass()) scheme->Observe(gate, x.gate.rows, context);
      SchemeCounts counts;
      scheme->Apply(gate, x.gate.rows, context, act_in, counts);
      down_in = act_in;
    }
    linear(x.down, down_in, out, Site::kDownProj);
    sites_.Merge(local);
  }

  const ModelConfig& c_;
  const int64_t layer_;
  const LayerWeights& w_;
  const Emulation& e_;
  const Batch& b_;
  std::span<LayerKv* const> kv_;
  ForwardBuffers& buf_;
  const int threads_;
  Sites sites_;
  LinearInputs* const inputs_;
  const std::span<int32_t> routes_;  // [rows, experts_per_token] or empty
  int64_t rotate_k_ = 0, rotate_v_ = 0;
  std::vector<float> cos_, sin_;  // RopeAngles
};

}  // namespace

absl::string_view SiteName(Site site) {
  const int i = static_cast<int>(site);
  return i >= 0 && i < kSiteCount ? kSiteNames[i] : "unknown";
}

void SiteCounts::Merge(const SiteCounts& o) {
  values += o.values;
  overflow += o.overflow;
  saturated += o.saturated;
  flushed += o.flushed;
  nonfinite += o.nonfinite;
}

void Census::Merge(const Census& o) {
  for (int i = 0; i < kSiteCount; ++i) sites[i].Merge(o.sites[i]);
}

uint64_t Census::nonfinite() const {
  uint64_t n = 0;
  for (const SiteCounts& s : sites) n += s.nonfinite;
  return n;
}

absl::Status Embed(const ModelConfig& c, const Emulation& emulation, std::span<float> hidden,
                   int threads, Census* census) {
  const int64_t D = c.hidden_size;
  if (hidden.size() % static_cast<size_t>(D) != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("a hidden state of ", hidden.size(), " values is not rows of ", D));
  }
  if (c.scale_embeddings) {
    const float scale = static_cast<float>(std::sqrt(static_cast<double>(D)));
    for (float& v : hidden) v *= scale;
  }
  Sites(emulation, census).RoundAll(Site::kEmbedding, hidden, D, threads);
  return absl::OkStatus();
}

absl::StatusOr<std::pair<int64_t, int64_t>> KvRotationBlocks(const KvRotation& rotation,
                                                             int64_t head_dim) {
  switch (rotation.mode) {
    case KvRotation::kNone:
      return std::pair<int64_t, int64_t>{0, 0};
    case KvRotation::kLlamaCpp:
      // llama-kv-cache.cpp: rotated only when the head size is a multiple of
      // 64; K by the largest power of two dividing it, V by 64.
      if (head_dim <= 0 || head_dim % 64 != 0) return std::pair<int64_t, int64_t>{0, 0};
      return std::pair<int64_t, int64_t>{LargestPowerOfTwoDividing(head_dim), 64};
    case KvRotation::kBlocks:
      if (!IsPowerOfTwo(rotation.block) || head_dim % rotation.block != 0) {
        return absl::InvalidArgumentError(
            absl::StrCat("the KV rotation's block of ", rotation.block,
                         " is not a power of two dividing the head size ", head_dim));
      }
      return std::pair<int64_t, int64_t>{rotation.block, rotation.block};
  }
  return absl::InternalError("unknown KV rotation");
}

absl::Status ForwardLayer(const ModelConfig& config, int64_t layer, const LayerWeights& w,
                          const Emulation& emulation, const Batch& batch, std::span<float> hidden,
                          std::span<LayerKv* const> kv, ForwardBuffers& buffers, int threads,
                          Census* census, LinearInputs* inputs, std::span<int32_t> routes) {
  const int64_t D = config.hidden_size;
  if (!routes.empty() && static_cast<int64_t>(routes.size()) !=
                             batch.rows * std::max<int64_t>(1, config.experts_per_token)) {
    return absl::InvalidArgumentError(absl::StrCat("layer ", layer, ": ", routes.size(),
                                                   " route slots for ", batch.rows, " rows"));
  }
  if (static_cast<int64_t>(hidden.size()) != batch.rows * D ||
      kv.size() != batch.sequences.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "layer ", layer, ": a hidden state of ", hidden.size(), " values and ", kv.size(),
        " caches for ", batch.sequences.size(), " sequences of ", batch.rows, " rows"));
  }
  for (size_t s = 0; s < kv.size(); ++s) {
    if (kv[s]->positions != batch.sequences[s].first_position) {
      return absl::InvalidArgumentError(absl::StrCat(
          "layer ", layer, ": sequence ", s, " starts at position ",
          batch.sequences[s].first_position, " but its cache holds ", kv[s]->positions));
    }
  }
  BlasSetup();
  absl::StatusOr<std::pair<int64_t, int64_t>> rotation =
      KvRotationBlocks(emulation.kv_rotation, config.head_dim);
  if (!rotation.ok()) return rotation.status();
  LayerPass pass(config, layer, w, emulation, batch, kv, buffers, threads, census, inputs,
                 routes);
  pass.SetKvRotation(rotation->first, rotation->second);
  pass.Run(hidden);
  return absl::OkStatus();
}

int64_t MaxSequenceTokens(const ModelConfig& config) {
  return config.max_position_embeddings > 0 ? config.max_position_embeddings
                                            : kMaxTokensWithoutPositions;
}

absl::Status CheckSequenceLength(const ModelConfig& c, int64_t length) {
  if (length <= MaxSequenceTokens(c)) return absl::OkStatus();
  if (c.max_position_embeddings > 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("sequences of ", length, " tokens are longer than ", c.name,
                     "'s max_position_embeddings (", c.max_position_embeddings, ")"));
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "sequences of ", length, " tokens are longer than ", kMaxTokensWithoutPositions,
      ", the most lowp runs for a model whose config gives no max_position_embeddings (", c.name,
      ")"));
}

bool SmallLayer(const ModelConfig& c) {
  const int64_t d = c.head_dim;
  const int64_t widths = (c.num_heads + 2 * c.num_kv_heads) * d + c.hidden_size +
                         3 * c.intermediate_size * std::max<int64_t>(1, c.experts_per_token);
  return c.hidden_size * widths < (int64_t{1} << 22);
}

int64_t ProductGroupRows(const ModelConfig& config) { return SmallLayer(config) ? 1 : kGroupRows; }

absl::Status RunLayerTasks(const ModelConfig& config, int64_t layer,
                           std::span<const LayerTask> tasks, ForwardBuffers& buffers, int threads) {
  if (!SmallLayer(config) || threads <= 1 || tasks.size() <= 1) {
    for (const LayerTask& t : tasks) {
      if (absl::Status s = ForwardLayer(config, layer, *t.weights, *t.emulation, *t.batch, t.hidden,
                                        t.kv, buffers, threads, t.census, t.inputs, t.routes);
          !s.ok()) {
        return s;
      }
    }
    return absl::OkStatus();
  }
  std::vector<absl::Status> errors(tasks.size());
  std::vector<Census> censuses(tasks.size());
  ParallelFor(tasks.size(), threads, [&](size_t i) {
    const LayerTask& t = tasks[i];
    thread_local ForwardBuffers mine;
    errors[i] = ForwardLayer(config, layer, *t.weights, *t.emulation, *t.batch, t.hidden, t.kv,
                             mine, 1, t.census != nullptr ? &censuses[i] : nullptr, t.inputs,
                             t.routes);
  });
  for (size_t i = 0; i < tasks.size(); ++i) {
    if (!errors[i].ok()) return errors[i];
    if (tasks[i].census != nullptr) tasks[i].census->Merge(censuses[i]);
  }
  return absl::OkStatus();
}

void FinalNorm(const ModelConfig& config, std::span<const float> weight, const Emulation& emulation,
               std::span<const float> hidden, std::span<float> normed, int threads,
               Census* census) {
  Norm(config, Sites(emulation, census), hidden, config.hidden_size, weight, normed,
       Site::kFinalNorm, threads);
}

void Logits(const ModelConfig& config, const Emulation& emulation, const Batch& batch,
            std::span<const float> normed, std::span<const float> head, int64_t count, float* out,
            int64_t ldc, int threads, Census* census) {
  const int64_t D = config.hidden_size;
  LinearProduct(batch.blocks, normed.data(), D, head.data(), count, D, nullptr, out, ldc, threads);
  if (config.final_logit_softcapping > 0) {
    const float cap = static_cast<float>(config.final_logit_softcapping);
    ForRows(batch.rows, count, threads, [&](int64_t first, int64_t end) {
      for (int64_t r = first; r < end; ++r) {
        for (int64_t j = 0; j < count; ++j)
          out[r * ldc + j] = cap * std::tanh(out[r * ldc + j] / cap);
      }
    });
  }
  Sites(emulation, census).RoundRows(Site::kLogits, out, batch.rows, count, ldc, threads);
}

}  // namespace lowp
