#include "model/forward.h"

#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <mutex>
#include <numeric>

#include "absl/strings/str_cat.h"
#include "formats/packing.h"
#include "kernels/convert.h"

namespace lowp {

namespace {

constexpr const char* kSiteNames[kSiteCount] = {
    "embedding", "attn_norm",   "q_proj",         "k_proj",     "v_proj",      "qk_norm",
    "rope",      "scores",      "softmax",        "attn_values", "o_proj",     "post_attn_norm",
    "residual",  "mlp_norm",    "router",         "gate_proj",  "up_proj",     "act",
    "act_mul",   "down_proj",   "post_mlp_norm",  "final_norm", "logits"};

// One BLAS thread: lowp runs sequences on its own pool, and a product's bits
// then never depend on the thread count.
void UseOneBlasThread() {
  static std::once_flag once;
  std::call_once(once, [] { openblas_set_num_threads(1); });
}

// C[m, n] = alpha * A[m, k] * op(B) (+ C when accumulate), row-major;
// op(B) = B^T for B stored [n, k] (a weight), else B stored [k, n].
void Gemm(bool b_transposed, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
          int64_t lda, const float* b, int64_t ldb, float* c, int64_t ldc) {
  if (m == 0 || n == 0) return;
  cblas_sgemm(CblasRowMajor, CblasNoTrans, b_transposed ? CblasTrans : CblasNoTrans,
              static_cast<blasint>(m), static_cast<blasint>(n), static_cast<blasint>(k), alpha, a,
              static_cast<blasint>(lda), b, static_cast<blasint>(ldb), 0.0f, c,
              static_cast<blasint>(ldc));
}

float Silu(float x) { return x / (1.0f + std::exp(-x)); }
float GeluTanh(float x) {
  const float k = 0.7978845608028654f;  // sqrt(2 / pi)
  return 0.5f * x * (1.0f + std::tanh(k * (x + 0.044715f * x * x * x)));
}
float GeluErf(float x) { return 0.5f * x * (1.0f + std::erf(x * 0.7071067811865476f)); }

// The state of one Forward call: the model, the sites, scratch buffers.
class Pass {
 public:
  Pass(const ModelWeights& w, const Emulation& e, Census* census)
      : w_(w), c_(w.config), e_(e), census_(census) {}

  // Rounds `x` to the compute format (when emulated) and counts what the
  // site produced.
  void Round(Site site, std::span<float> x) {
    if (e_.compute.has_value()) {
      // The values before rounding only for the census's counts.
      if (census_ != nullptr) before_.assign(x.begin(), x.end());
      codes_.resize(StorageBytes(*e_.compute, x.size()));
      RunOptions run;
      run.threads = 1;
      // The sizes match and nearest-even is valid for every float format.
      (void)EncodeArray(*e_.compute, x, codes_, {}, run);
      (void)DecodeArray(*e_.compute, codes_, x, run);
    }
    if (census_ == nullptr) return;
    SiteCounts& s = census_->sites[static_cast<int>(site)];
    s.values += x.size();
    uint64_t nonfinite = 0;
    for (float v : x) nonfinite += !std::isfinite(v);
    s.nonfinite += nonfinite;
    if (!e_.compute.has_value()) return;
    const float max_finite = static_cast<float>(e_.compute->max_finite());
    uint64_t overflow = 0, saturated = 0, flushed = 0;
    for (size_t i = 0; i < x.size(); ++i) {
      const float a = std::fabs(before_[i]), q = std::fabs(x[i]);
      const bool finite_in = std::isfinite(a);
      overflow += finite_in & !std::isfinite(q);
      saturated += finite_in & (a > max_finite) & std::isfinite(q);
      flushed += (a != 0) & finite_in & (q == 0);
    }
    s.overflow += overflow;
    s.saturated += saturated;
    s.flushed += flushed;
  }

  // `x` [rows, cols] through `scheme` (rows = tokens, or tokens x kv heads).
  std::span<const float> Quantize(const Scheme* scheme, std::span<const float> x, int64_t cols,
                                  std::vector<float>& out) {
    if (scheme == nullptr) return x;
    out.resize(x.size());
    TensorContext context;
    if (scheme->NeedsTensorPass()) scheme->Observe(x, cols, context);
    SchemeCounts counts;
    scheme->Apply(x, cols, context, out, counts);
    return out;
  }

  // out[n, m.rows] = in[n, m.cols] * m^T + bias, rounded at `site`.
  void Linear(const Matrix& m, std::span<const float> in, int64_t n, std::vector<float>& out,
              Site site) {
    out.resize(static_cast<size_t>(n * m.rows));
    Gemm(true, n, m.rows, m.cols, 1.0f, in.data(), m.cols, m.values->data(), m.cols, out.data(),
         m.rows);
    if (m.bias) {
      for (int64_t t = 0; t < n; ++t) {
        float* row = out.data() + t * m.rows;
        for (int64_t j = 0; j < m.rows; ++j) row[j] += (*m.bias)[j];
      }
    }
    Round(site, out);
  }

  // RMSNorm of each `width`-wide row of `x` into `out` (may be `x`).
  void Norm(std::span<const float> x, int64_t width, const std::vector<float>& weight,
            std::span<float> out, Site site) {
    const size_t rows = x.size() / width;
    for (size_t r = 0; r < rows; ++r) {
      const float* in = x.data() + r * width;
      float* o = out.data() + r * width;
      double ss = 0;
      for (int64_t j = 0; j < width; ++j) ss += static_cast<double>(in[j]) * in[j];
      const float scale = static_cast<float>(1.0 / std::sqrt(ss / width + c_.rms_norm_eps));
      for (int64_t j = 0; j < width; ++j) {
        const float wj = c_.norm_adds_one ? 1.0f + weight[j] : weight[j];
        o[j] = in[j] * scale * wj;
      }
    }
    Round(site, out);
  }

  // Rotates each head_dim-wide vector of `x` ([n, heads * head_dim]) by its
  // position's angles.
  void Rope(std::span<float> x, int64_t n, int64_t heads, int64_t first_position) {
    const int64_t d = c_.head_dim, half = d / 2;
    for (int64_t t = 0; t < n; ++t) {
      const double pos = static_cast<double>(first_position + t);
      for (int64_t i = 0; i < half; ++i) {
        const double angle = pos * inv_freq_[i];
        const float cs = static_cast<float>(std::cos(angle));
        const float sn = static_cast<float>(std::sin(angle));
        for (int64_t h = 0; h < heads; ++h) {
          float* v = x.data() + (t * heads + h) * d;
          const float x1 = v[i], x2 = v[i + half];
          v[i] = x1 * cs - x2 * sn;
          v[i + half] = x2 * cs + x1 * sn;
        }
      }
    }
  }

  void InitRope() {
    const int64_t d = c_.head_dim;
    inv_freq_.resize(d / 2);
    const RopeScaling& r = c_.rope_scaling;
    for (int64_t i = 0; i < d / 2; ++i) {
      double f = std::pow(c_.rope_theta, -2.0 * static_cast<double>(i) / static_cast<double>(d));
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
      inv_freq_[i] = f;
    }
  }

  void Attention(int64_t layer, const LayerWeights& l, std::span<const float> a, int64_t n,
                 KvCache& cache, std::vector<float>& out) {
    const int64_t H = c_.num_heads, KV = c_.num_kv_heads, d = c_.head_dim;
    const int64_t p0 = cache.positions;
    std::span<const float> in = Quantize(e_.activations.get(), a, c_.hidden_size, act_q_);
    Linear(l.q, in, n, q_, Site::kQProj);
    Linear(l.k, in, n, k_, Site::kKProj);
    Linear(l.v, in, n, v_, Site::kVProj);
    if (c_.qk_norm) {
      Norm(q_, d, *l.q_norm, q_, Site::kQkNorm);
      Norm(k_, d, *l.k_norm, k_, Site::kQkNorm);
    }
    Rope(q_, n, H, p0);
    Rope(k_, n, KV, p0);
    Round(Site::kRope, q_);
    Round(Site::kRope, k_);
    std::span<const float> k_stored = Quantize(e_.kv.get(), k_, d, kv_q_);
    std::vector<float>& keys = cache.keys[layer];
    keys.insert(keys.end(), k_stored.begin(), k_stored.end());
    std::span<const float> v_stored = Quantize(e_.kv.get(), v_, d, kv_q_);
    std::vector<float>& values = cache.values[layer];
    values.insert(values.end(), v_stored.begin(), v_stored.end());
    const int64_t T = p0 + n;  // positions in the cache

    const double scalar = c_.query_pre_attn_scalar > 0 ? c_.query_pre_attn_scalar
                                                        : static_cast<double>(d);
    const float scale = static_cast<float>(1.0 / std::sqrt(scalar));
    const int64_t window = SlidingLayer(c_, layer) ? c_.sliding_window : 0;
    const float cap = static_cast<float>(c_.attn_logit_softcapping);
    attn_.assign(static_cast<size_t>(n * H * d), 0.0f);
    scores_.resize(static_cast<size_t>(n * T));
    for (int64_t h = 0; h < H; ++h) {
      const int64_t g = h / (H / KV);
      Gemm(true, n, T, d, scale, q_.data() + h * d, H * d, keys.data() + g * d, KV * d,
           scores_.data(), T);
      for (int64_t i = 0; i < n; ++i) {
        const int64_t pos = p0 + i;
        const int64_t first = window > 0 ? std::max<int64_t>(0, pos - window + 1) : 0;
        float* s = scores_.data() + i * T;
        std::span<float> seen(s + first, static_cast<size_t>(pos + 1 - first));
        if (cap > 0) {
          for (float& x : seen) x = cap * std::tanh(x / cap);
        }
        Round(Site::kScores, seen);
        float max = -std::numeric_limits<float>::infinity();
        for (float x : seen) max = std::max(max, x);
        double sum = 0;
        for (float& x : seen) {
          x = std::exp(x - max);
          sum += x;
        }
        const float inv = static_cast<float>(1.0 / sum);
        for (float& x : seen) x *= inv;
        Round(Site::kSoftmax, seen);
        std::fill(s, s + first, 0.0f);
        std::fill(s + pos + 1, s + T, 0.0f);
      }
      Gemm(false, n, d, T, 1.0f, scores_.data(), T, values.data() + g * d, KV * d,
           attn_.data() + h * d, H * d);
    }
    Round(Site::kAttnValues, attn_);
    std::span<const float> o_in = Quantize(e_.activations.get(), attn_, H * d, act_q_);
    Linear(l.o, o_in, n, out, Site::kOProj);
  }

  // act(gate x) * up x -> down, for `n` rows of `in` (already quantized).
  void Mlp(const Matrix& gate, const Matrix& up, const Matrix& down, std::span<const float> in,
           int64_t n, std::vector<float>& out) {
    Linear(gate, in, n, gate_, Site::kGateProj);
    Linear(up, in, n, up_, Site::kUpProj);
    // The activation chosen once, not per element.
    const std::string& act = c_.activation;
    float (*const f)(float) = act == "gelu_pytorch_tanh" ? GeluTanh : act == "gelu" ? GeluErf : Silu;
    for (float& x : gate_) x = f(x);
    Round(Site::kAct, gate_);
    for (size_t i = 0; i < gate_.size(); ++i) gate_[i] *= up_[i];
    Round(Site::kActMul, gate_);
    std::span<const float> down_in =
        Quantize(e_.activations.get(), gate_, gate.rows, act_q_);
    Linear(down, down_in, n, out, Site::kDownProj);
  }

  void Moe(const LayerWeights& l, std::span<const float> m, int64_t n, std::vector<float>& out) {
    const int64_t E = c_.num_experts, k = c_.experts_per_token, D = c_.hidden_size;
    std::vector<float> router;
    Linear(l.router, m, n, router, Site::kRouter);
    std::span<const float> in = Quantize(e_.activations.get(), m, D, moe_in_q_);
    // Per expert, the tokens routed to it and their weights.
    std::vector<std::vector<int64_t>> tokens(E);
    std::vector<std::vector<float>> gains(E);
    std::vector<double> p(E);
    std::vector<int64_t> order(E);
    for (int64_t t = 0; t < n; ++t) {
      const float* r = router.data() + t * E;
      const float max = *std::max_element(r, r + E);
      double sum = 0;
      for (int64_t e = 0; e < E; ++e) sum += p[e] = std::exp(static_cast<double>(r[e] - max));
      for (double& x : p) x /= sum;
      std::iota(order.begin(), order.end(), 0);
      std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return p[a] > p[b]; });
      double top = 0;
      for (int64_t j = 0; j < k; ++j) top += p[order[j]];
      for (int64_t j = 0; j < k; ++j) {
        tokens[order[j]].push_back(t);
        gains[order[j]].push_back(static_cast<float>(p[order[j]] / top));
      }
    }
    out.assign(static_cast<size_t>(n * D), 0.0f);
    std::vector<float> rows, result;
    for (int64_t e = 0; e < E; ++e) {
      const int64_t count = static_cast<int64_t>(tokens[e].size());
      if (count == 0) continue;
      rows.resize(static_cast<size_t>(count * D));
      for (int64_t j = 0; j < count; ++j) {
        std::copy_n(in.data() + tokens[e][j] * D, D, rows.data() + j * D);
      }
      const Expert& x = l.experts[e];
      Mlp(x.gate, x.up, x.down, rows, count, result);
      for (int64_t j = 0; j < count; ++j) {
        float* o = out.data() + tokens[e][j] * D;
        for (int64_t i = 0; i < D; ++i) o[i] += gains[e][j] * result[j * D + i];
      }
    }
  }

  absl::Status Run(std::span<const int32_t> tokens, KvCache& cache, std::span<float> logits,
                   LayerTrace* trace) {
    const int64_t n = static_cast<int64_t>(tokens.size()), D = c_.hidden_size;
    const int64_t V = c_.vocab_size;
    for (int64_t t = 0; t < n; ++t) {
      if (tokens[t] < 0 || tokens[t] >= V) {
        return absl::InvalidArgumentError(absl::StrCat("token ", tokens[t], " at index ", t,
                                                       " is not below vocab_size (", V, ")"));
      }
    }
    if (static_cast<int64_t>(logits.size()) != n * V) {
      return absl::InvalidArgumentError(
          absl::StrCat("logits hold ", logits.size(), " values, not ", n, " x ", V));
    }
    UseOneBlasThread();
    InitRope();
    if (cache.keys.empty()) {
      cache.keys.resize(c_.num_layers);
      cache.values.resize(c_.num_layers);
    }
    x_.resize(static_cast<size_t>(n * D));
    const float embed_scale = static_cast<float>(std::sqrt(static_cast<double>(D)));
    for (int64_t t = 0; t < n; ++t) {
      const float* row = w_.embed.values->data() + static_cast<int64_t>(tokens[t]) * D;
      for (int64_t j = 0; j < D; ++j) {
        x_[t * D + j] = c_.scale_embeddings ? row[j] * embed_scale : row[j];
      }
    }
    Round(Site::kEmbedding, x_);
    if (trace != nullptr) trace->hidden.resize(c_.num_layers);
    std::vector<float> normed(x_.size()), branch;
    for (int64_t li = 0; li < c_.num_layers; ++li) {
      const LayerWeights& l = w_.layers[li];
      Norm(x_, D, *l.input_norm, normed, Site::kAttnNorm);
      Attention(li, l, normed, n, cache, branch);
      if (c_.norms_per_layer == 4) Norm(branch, D, *l.post_attention_norm, branch, Site::kPostAttnNorm);
      for (size_t i = 0; i < x_.size(); ++i) x_[i] += branch[i];
      Round(Site::kResidual, x_);
      const Values& mlp_norm = c_.norms_per_layer == 4 ? l.pre_feedforward_norm : l.post_attention_norm;
      Norm(x_, D, *mlp_norm, normed, Site::kMlpNorm);
      if (c_.num_experts > 0) {
        Moe(l, normed, n, branch);
      } else {
        std::span<const float> in = Quantize(e_.activations.get(), normed, D, act_q_);
        // `in` may alias act_q_, which Mlp reuses for down_proj's input.
        mlp_in_.assign(in.begin(), in.end());
        Mlp(l.gate, l.up, l.down, mlp_in_, n, branch);
      }
      if (c_.norms_per_layer == 4) Norm(branch, D, *l.post_feedforward_norm, branch, Site::kPostMlpNorm);
      for (size_t i = 0; i < x_.size(); ++i) x_[i] += branch[i];
      Round(Site::kResidual, x_);
      if (trace != nullptr) trace->hidden[li] = x_;
    }
    Norm(x_, D, *w_.final_norm, normed, Site::kFinalNorm);
    Gemm(true, n, V, D, 1.0f, normed.data(), D, w_.lm_head.values->data(), D, logits.data(), V);
    if (c_.final_logit_softcapping > 0) {
      const float cap = static_cast<float>(c_.final_logit_softcapping);
      for (float& x : logits) x = cap * std::tanh(x / cap);
    }
    Round(Site::kLogits, logits);
    cache.positions += n;
    return absl::OkStatus();
  }

 private:
  const ModelWeights& w_;
  const ModelConfig& c_;
  const Emulation& e_;
  Census* census_;
  std::vector<double> inv_freq_;
  std::vector<float> x_, q_, k_, v_, attn_, scores_, gate_, up_, act_q_, kv_q_, mlp_in_,
      moe_in_q_, before_;
  std::vector<uint8_t> codes_;
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

absl::Status Forward(const ModelWeights& weights, const Emulation& emulation,
                     std::span<const int32_t> tokens, KvCache& cache, std::span<float> logits,
                     Census* census, LayerTrace* trace) {
  Pass pass(weights, emulation, census);
  return pass.Run(tokens, cache, logits, trace);
}

}  // namespace lowp
