#include "model/forward.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <mutex>
#include <numeric>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "codecs/ggml_vec_dot.h"
#include "kernels/convert.h"
#include "kernels/hadamard.h"
#include "kernels/nn.h"
#include "kernels/thread_pool.h"
#include "model/blas.h"
#include "model/rope.h"

namespace lowp {

namespace {

constexpr const char* kSiteNames[kSiteCount] = {
    "embedding", "attn_norm", "q_proj",        "k_proj",      "v_proj",  "q_a_proj",
    "kv_a_proj", "kv_b_proj", "latent_norm",   "qk_norm",
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
// at `site`; with the config's rms_norm_eps unless `eps` is given.
void Norm(const ModelConfig& c, const Sites& sites, std::span<const float> x, int64_t width,
          std::span<const float> weight, std::span<float> out, Site site, int threads,
          double eps = -1) {
  const int64_t rows = static_cast<int64_t>(x.size()) / width;
  ForRows(rows, width, threads, [&](int64_t first, int64_t end) {
    Census local;
    float* o = out.data() + first * width;
    RmsNorm(x.data() + first * width, o, end - first, width, weight.data(), c.norm_adds_one,
            eps < 0 ? c.rms_norm_eps : eps);
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

// DeepseekV3Attention builds its latents' norms with DeepseekV3RMSNorm's
// default eps, not the config's rms_norm_eps.
constexpr double kLatentNormEps = 1e-6;

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
  const absl::Status& status() const { return status_; }

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
    if (!status_.ok()) return;
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
      if (!status_.ok()) return;
      if (w_.shared.gate.rows > 0) SharedExpert(buf_.normed, buf_.branch);
    } else {
      std::span<const float> in =
          QuantizePerSequence(e_.activations.get(), b_, buf_.normed, D, buf_.in, threads_);
      Mlp(w_.gate, w_.up, w_.down, in, buf_.branch);
    }
    if (!status_.ok()) return;
    if (c_.norms_per_layer == 4) {
      Norm(c_, sites_, buf_.branch, D, w_.post_feedforward_norm, buf_.branch, Site::kPostMlpNorm,
           threads_);
    }
    AddResidual(x, buf_.branch);
  }

 private:
  // out[rows, m.rows] = in[rows, m.cols] m^T + bias, rounded at `site`.
  // `expert`: what LinearInputs is told (-1, or kSharedExpert).
  // A matrix read one at a time (LayerWeights::matrix_source) is loaded
  // here and let go after the product.
  void Linear(const Matrix& given, std::span<const float> in, std::vector<float>& out, Site site,
              int64_t expert = -1) {
    std::shared_ptr<const LoadedMatrix> loaded;
    if (given.values.empty() && given.rows > 0 && w_.matrix_source != nullptr) {
      absl::StatusOr<std::shared_ptr<const LoadedMatrix>> got =
          w_.matrix_source->Load(given, threads_);
      if (!got.ok()) {
        if (status_.ok()) status_ = got.status();
        out.assign(static_cast<size_t>(b_.rows * given.rows), 0.0f);
        return;
      }
      loaded = *std::move(got);
    }
    const Matrix& m = loaded != nullptr ? loaded->matrix : given;
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
  // frequency, in double, times the attention factor, rounded to float)
  // into cos_ and sin_, [rows, RotaryDim / 2] each: computed once for the
  // queries and the keys.
  void RopeAngles() {
    const int64_t half = RotaryDim(c_) / 2;
    // LongRoPE: a sequence longer than original_max_position_embeddings
    // rotates by the long factors throughout, as transformers runs a whole
    // sequence (CheckSequenceLength refuses a longer one continued from a
    // cache).
    std::vector<uint8_t>& long_rows = buf_.long_rope;
    long_rows.assign(static_cast<size_t>(b_.rows), 0);
    bool any_long = false;
    if (!c_.rope_scaling.long_factor.empty()) {
      for (const SequenceRows& s : b_.sequences) {
        if (s.first_position + s.rows > c_.rope_scaling.original_max_position_embeddings) {
          std::fill_n(long_rows.begin() + s.first_row, s.rows, 1);
          any_long = true;
        }
      }
    }
    RopeFrequencies freqs[2] = {InverseFrequencies(c_, layer_), {}};
    if (any_long) freqs[1] = InverseFrequencies(c_, layer_, /*long_factors=*/true);
    cos_.resize(static_cast<size_t>(b_.rows * half));
    sin_.resize(static_cast<size_t>(b_.rows * half));
    ForRows(b_.rows, half * 8, threads_, [&](int64_t first, int64_t end) {
      for (int64_t t = first; t < end; ++t) {
        const RopeFrequencies& freq = freqs[long_rows[static_cast<size_t>(t)]];
        const double pos = static_cast<double>(buf_.positions[t]);
        for (int64_t i = 0; i < half; ++i) {
          const double angle = pos * freq.inv_freq[i];
          cos_[t * half + i] = static_cast<float>(std::cos(angle) * freq.attention_factor);
          sin_[t * half + i] = static_cast<float>(std::sin(angle) * freq.attention_factor);
        }
      }
    });
  }

  // Rotates the first RotaryDim values of each head_dim-wide vector of `x`
  // ([rows, heads * head_dim]) by its row's position (RopeAngles first).
  void Rope(std::span<float> x, int64_t heads) {
    const int64_t d = c_.head_dim, r = RotaryDim(c_), half = r / 2;
    ForRows(b_.rows, heads * d, threads_, [&](int64_t first, int64_t end) {
      for (int64_t t = first; t < end; ++t) {
        float* row = x.data() + t * heads * d;
        if (r == d) {
          lowp::Rope(row, heads, d, cos_.data() + t * half, sin_.data() + t * half);
          continue;
        }
        for (int64_t h = 0; h < heads; ++h) {
          lowp::Rope(row + h * d, 1, r, cos_.data() + t * half, sin_.data() + t * half);
        }
      }
    });
  }

  // q, k and v of every row into buf_.q ([rows, H * dk]), buf_.k and
  // buf_.v ([rows, KV * dk] and [rows, KV * dv]), rotated.
  void Projections(std::span<const float> in) {
    const int64_t H = c_.num_heads, KV = c_.num_kv_heads, d = c_.head_dim;
    Linear(w_.q, in, buf_.q, Site::kQProj);
    Linear(w_.k, in, buf_.k, Site::kKProj);
    Linear(w_.v, in, buf_.v, Site::kVProj);
    if (c_.qk_norm) {
      Norm(c_, sites_, buf_.q, d, w_.q_norm, buf_.q, Site::kQkNorm, threads_);
      Norm(c_, sites_, buf_.k, d, w_.k_norm, buf_.k, Site::kQkNorm, threads_);
    }
    Rope(buf_.q, H);
    Rope(buf_.k, KV);
  }

  // DeepSeek-V3's multi-head latent attention, as DeepseekV3Attention
  // computes it: q = q_b(norm(q_a x)) (or q_proj x); kv_a x is a latent of
  // kv_lora_rank and one rotated key part; kv_b(norm(latent)) gives each
  // head's unrotated key part and its value. A head's key is [nope, rope],
  // its query the same split; the rope parts rotate (interleaved pairs
  // taken apart first when rope_interleave), the key's shared by every head.
  void LatentProjections(std::span<const float> in) {
    const int64_t H = c_.num_heads, nope = c_.qk_nope_head_dim, rope = c_.qk_rope_head_dim;
    const int64_t dk = nope + rope, dv = c_.v_head_dim, latent = c_.kv_lora_rank;
    if (c_.q_lora_rank > 0) {
      Linear(w_.q_a, in, buf_.q_latent, Site::kQaProj);
      Norm(c_, sites_, buf_.q_latent, c_.q_lora_rank, w_.q_a_norm, buf_.q_latent,
           Site::kLatentNorm, threads_, kLatentNormEps);
      std::span<const float> q_in = QuantizePerSequence(
          e_.activations.get(), b_, buf_.q_latent, c_.q_lora_rank, buf_.act_in, threads_);
      Linear(w_.q_b, q_in, buf_.q, Site::kQProj);
    } else {
      Linear(w_.q, in, buf_.q, Site::kQProj);
    }
    Linear(w_.kv_a, in, buf_.kv_latent, Site::kKvaProj);
    const int64_t width = latent + rope;
    std::vector<float>& normed = buf_.gate;  // free until the MLP
    normed.resize(static_cast<size_t>(b_.rows * latent));
    for (int64_t r = 0; r < b_.rows; ++r) {
      std::copy_n(buf_.kv_latent.data() + r * width, latent, normed.data() + r * latent);
    }
    Norm(c_, sites_, normed, latent, w_.kv_a_norm, normed, Site::kLatentNorm, threads_,
         kLatentNormEps);
    const int64_t half = rope / 2;
    auto rotate = [&](float* x, int64_t t, std::vector<float>& pe) {  // a rope part of row t
      pe.resize(static_cast<size_t>(rope));
      if (c_.rope_interleave) {
        for (int64_t i = 0; i < half; ++i) {
          pe[i] = x[2 * i];
          pe[half + i] = x[2 * i + 1];
        }
        std::copy(pe.begin(), pe.end(), x);
      }
      lowp::Rope(x, 1, rope, cos_.data() + t * half, sin_.data() + t * half);
    };
    ForRows(b_.rows, width, threads_, [&](int64_t first, int64_t end) {
      std::vector<float> pe;
      for (int64_t t = first; t < end; ++t) {
        rotate(buf_.kv_latent.data() + t * width + latent, t, pe);
      }
    });
    // What the cache holds, as vLLM and llama.cpp keep it: each token's
    // normed latent and rotated key part, one row of kv_lora_rank +
    // qk_rope_head_dim, in the KV format; the heads' keys and values are
    // expanded from it.
    if (e_.kv != nullptr) {
      for (int64_t r = 0; r < b_.rows; ++r) {
        std::copy_n(normed.data() + r * latent, latent, buf_.kv_latent.data() + r * width);
      }
      StoreAsKv(buf_.kv_latent, width);
      for (int64_t r = 0; r < b_.rows; ++r) {
        std::copy_n(buf_.kv_latent.data() + r * width, latent, normed.data() + r * latent);
      }
    }
    std::span<const float> kv_in =
        QuantizePerSequence(e_.activations.get(), b_, normed, latent, buf_.act_in, threads_);
    std::vector<float>& heads = buf_.up;  // free until the MLP
    Linear(w_.kv_b, kv_in, heads, Site::kKvbProj);
    buf_.k.resize(static_cast<size_t>(b_.rows * H * dk));
    buf_.v.resize(static_cast<size_t>(b_.rows * H * dv));
    ForRows(b_.rows, H * (dk + dv), threads_, [&](int64_t first, int64_t end) {
      std::vector<float> pe;
      for (int64_t t = first; t < end; ++t) {
        const float* k_pe = buf_.kv_latent.data() + t * width + latent;
        for (int64_t h = 0; h < H; ++h) {
          const float* kv = heads.data() + (t * H + h) * (nope + dv);
          float* k = buf_.k.data() + (t * H + h) * dk;
          std::copy_n(kv, nope, k);
          std::copy_n(k_pe, rope, k + nope);
          std::copy_n(kv + nope, dv, buf_.v.data() + (t * H + h) * dv);
          rotate(buf_.q.data() + (t * H + h) * dk + nope, t, pe);
        }
      }
    });
  }

  // One sequence's cached values `x` (rows of `width`, one tensor) as the
  // KV format stores them, in `stored`.
  std::span<const float> AsKvStored(std::span<const float> x, int64_t width,
                                    std::vector<float>& stored) const {
    stored.resize(x.size());
    TensorContext context;
    if (e_.kv->NeedsTensorPass()) e_.kv->Observe(x, width, context);
    SchemeCounts counts;
    e_.kv->Apply(x, width, context, stored, counts);
    return stored;
  }

  // Each sequence's rows of `rows` (`width` values each) replaced by what
  // the KV format stores of them.
  void StoreAsKv(std::vector<float>& rows, int64_t width) {
    ParallelFor(b_.sequences.size(), Workers(threads_, b_.rows * width), [&](size_t s) {
      const SequenceRows& seq = b_.sequences[s];
      thread_local std::vector<float> stored;
      std::span<float> x = std::span<float>(rows).subspan(
          static_cast<size_t>(seq.first_row * width), static_cast<size_t>(seq.rows * width));
      std::span<const float> kept = AsKvStored(x, width, stored);
      std::copy(kept.begin(), kept.end(), x.begin());
    });
  }

  void Attention(std::span<const float> a, std::vector<float>& out) {
    const int64_t H = c_.num_heads, KV = c_.num_kv_heads;
    const int64_t dk = KeyHeadDim(c_), dv = ValueHeadDim(c_);
    std::span<const float> in =
        QuantizePerSequence(e_.activations.get(), b_, a, c_.hidden_size, buf_.in, threads_);
    RopeAngles();
    if (c_.kv_lora_rank > 0) {
      LatentProjections(in);
    } else {
      Projections(in);
    }
    sites_.RoundAll(Site::kRope, buf_.q, H * dk, threads_);
    sites_.RoundAll(Site::kRope, buf_.k, KV * dk, threads_);
    if (rotate_k_ > 0) {
      HadamardBlocks(buf_.q, rotate_k_);
      HadamardBlocks(buf_.k, rotate_k_);
    }
    if (rotate_v_ > 0) HadamardBlocks(buf_.v, rotate_v_);
    // Each sequence's keys and values into its cache, as stored.
    ParallelFor(b_.sequences.size(), Workers(threads_, b_.rows * KV * (dk + dv)), [&](size_t s) {
      const SequenceRows& seq = b_.sequences[s];
      thread_local std::vector<float> stored;
      LayerKv& cache = *kv_[s];
      for (auto [from, to, d] : {std::tuple{&buf_.k, &cache.keys, dk},
                                 std::tuple{&buf_.v, &cache.values, dv}}) {
        const size_t first = static_cast<size_t>(seq.first_row * KV * d);
        const size_t n = static_cast<size_t>(seq.rows * KV * d);
        std::span<const float> x = std::span<const float>(*from).subspan(first, n);
        // Multi-head latent attention's keys and values came from a cache
        // already in the KV format (LatentProjections).
        if (e_.kv != nullptr && c_.kv_lora_rank == 0) x = AsKvStored(x, d, stored);
        to->insert(to->end(), x.begin(), x.end());
      }
      cache.positions += seq.rows;
    });

    const double scalar =
        c_.query_pre_attn_scalar > 0 ? c_.query_pre_attn_scalar : static_cast<double>(dk);
    const float scale = static_cast<float>(AttentionScale(c_) / std::sqrt(scalar));
    const int64_t window = SlidingLayer(c_, layer_) ? c_.sliding_window : 0;
    const float cap = static_cast<float>(c_.attn_logit_softcapping);
    buf_.attn.resize(static_cast<size_t>(b_.rows * H * dv));
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
    const int workers = Workers(threads_, work * H * (dk + dv));
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
      Sgemm(true, n, T, dk, scale, buf_.q.data() + row * H * dk + h * dk, H * dk,
            cache.keys.data() + g * dk, KV * dk, scores.data(), T);
      for (int64_t i = 0; i < n; ++i) {
        const int64_t pos = p0 + i;
        const int64_t first = window > 0 ? std::max<int64_t>(0, pos - window + 1) : 0;
        float* s = scores.data() + i * T;
        std::span<float> seen(s + first, static_cast<size_t>(pos + 1 - first));
        if (cap > 0) {
          for (float& v : seen) v = cap * std::tanh(v / cap);
        }
        sites_.Round(Site::kScores, seen, local);
        if (w_.sinks.empty()) {
          Softmax(seen);
        } else {  // gpt-oss: the head's sink joins the softmax and is dropped
          thread_local std::vector<float> with_sink;
          with_sink.assign(seen.begin(), seen.end());
          with_sink.push_back(w_.sinks[static_cast<size_t>(h)]);
          Softmax(with_sink);
          std::copy_n(with_sink.begin(), seen.size(), seen.begin());
        }
        sites_.Round(Site::kSoftmax, seen, local);
        std::fill(s, s + first, 0.0f);
        std::fill(s + pos + 1, s + T, 0.0f);
      }
      Sgemm(false, n, dv, T, 1.0f, scores.data(), T, cache.values.data() + g * dv, KV * dv,
            buf_.attn.data() + row * H * dv + h * dv, H * dv);
      sites_.Merge(local);
    });
    if (rotate_v_ > 0) HadamardBlocks(buf_.attn, rotate_v_);  // back from v's rotation
    sites_.RoundAll(Site::kAttnValues, buf_.attn, H * dv, threads_);
    std::span<const float> o_in =
        QuantizePerSequence(e_.activations.get(), b_, buf_.attn, H * dv, buf_.act_in, threads_);
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

  // A token's experts from its router logits `r`: order[0, k) the experts
  // taken (by descending weight, ties to the lower index), p[e] their
  // weights.
  //   kSoftmaxTopK  the softmax over all experts, the top k renormalized to
  //                 sum to 1 when norm_topk_prob (Mixtral always)
  //   kTopKSoftmax  the top k logits, the softmax over them (gpt-oss)
  void Route(const float* r, std::vector<double>& p, std::vector<int64_t>& order) const {
    const int64_t E = c_.num_experts, k = c_.experts_per_token;
    std::iota(order.begin(), order.end(), 0);
    if (c_.routing == Routing::kSigmoidGroups) {
      RouteByGroups(r, p, order);
      return;
    }
    if (c_.routing == Routing::kTopKSoftmax) {
      std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return r[a] > r[b]; });
      const float max = r[order[0]];
      double sum = 0;
      for (int64_t j = 0; j < k; ++j) sum += p[order[j]] = std::exp(static_cast<double>(r[order[j]] - max));
      for (int64_t j = 0; j < k; ++j) p[order[j]] /= sum;
      return;
    }
    const float max = *std::max_element(r, r + E);
    double sum = 0;
    for (int64_t e = 0; e < E; ++e) sum += p[e] = std::exp(static_cast<double>(r[e] - max));
    for (double& x : p) x /= sum;
    std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return p[a] > p[b]; });
    if (!c_.norm_topk_prob) return;
    double top = 0;
    for (int64_t j = 0; j < k; ++j) top += p[order[j]];
    for (int64_t j = 0; j < k; ++j) p[order[j]] /= top;
  }

  // DeepSeek-V3's routing (DeepseekV3MoE.route_tokens_to_experts), in
  // double: scores s = sigmoid(logits); choice = s + e_score_correction_bias;
  // each of n_group groups scores the sum of its top 2 choices and the best
  // topk_group groups stay (ties to the lower index), the others' choices
  // become 0 (masked_fill(0.0), as there); the top k choices are taken
  // (ordered by choice), weighted by their s, renormalized by sum + 1e-20
  // when norm_topk_prob, times routed_scaling_factor.
  void RouteByGroups(const float* r, std::vector<double>& p, std::vector<int64_t>& order) const {
    const int64_t E = c_.num_experts, k = c_.experts_per_token, G = c_.n_group;
    const int64_t per = E / G;
    std::vector<double> choice(static_cast<size_t>(E));
    for (int64_t e = 0; e < E; ++e) {
      p[e] = 1.0 / (1.0 + std::exp(-static_cast<double>(r[e])));
      choice[e] = p[e] + (w_.score_bias.empty() ? 0.0 : w_.score_bias[static_cast<size_t>(e)]);
    }
    std::vector<double> group(static_cast<size_t>(G));
    for (int64_t g = 0; g < G; ++g) {
      double first = -INFINITY, second = -INFINITY;
      for (int64_t e = g * per; e < (g + 1) * per; ++e) {
        if (choice[e] > first) {
          second = first;
          first = choice[e];
        } else if (choice[e] > second) {
          second = choice[e];
        }
      }
      group[g] = first + second;
    }
    std::vector<int64_t> groups(static_cast<size_t>(G));
    std::iota(groups.begin(), groups.end(), 0);
    std::stable_sort(groups.begin(), groups.end(),
                     [&](int64_t a, int64_t b) { return group[a] > group[b]; });
    std::vector<bool> kept(static_cast<size_t>(G), false);
    for (int64_t j = 0; j < c_.topk_group; ++j) kept[groups[j]] = true;
    for (int64_t e = 0; e < E; ++e) {
      if (!kept[e / per]) choice[e] = 0.0;
    }
    std::stable_sort(order.begin(), order.end(),
                     [&](int64_t a, int64_t b) { return choice[a] > choice[b]; });
    double sum = 0;
    for (int64_t j = 0; j < k; ++j) sum += p[order[j]];
    const double scale =
        c_.routed_scaling_factor / (c_.norm_topk_prob ? sum + 1e-20 : 1.0);
    for (int64_t j = 0; j < k; ++j) p[order[j]] *= scale;
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
    const size_t S = b_.sequences.size();
    // Per sequence and expert, the sequence's tokens routed to it and
    // their weights.
    std::vector<std::vector<std::vector<int64_t>>> tokens(S, std::vector<std::vector<int64_t>>(E));
    std::vector<std::vector<std::vector<float>>> gains(S, std::vector<std::vector<float>>(E));
    ParallelFor(S, Workers(threads_, b_.rows * E * 8), [&](size_t s) {
      const SequenceRows& seq = b_.sequences[s];
      std::vector<double> p(E);
      std::vector<int64_t> order(E);
      for (int64_t t = 0; t < seq.rows; ++t) {
        Route(router.data() + (seq.first_row + t) * E, p, order);
        for (int64_t j = 0; j < k; ++j) {
          tokens[s][order[j]].push_back(t);
          gains[s][order[j]].push_back(static_cast<float>(p[order[j]]));
          if (!routes_.empty()) {
            routes_[static_cast<size_t>((seq.first_row + t) * k + j)] =
                static_cast<int32_t>(order[j]);
          }
        }
      }
    });
    // Expert by expert (loaded once when read one at a time), each
    // sequence's tokens on a thread of their own: a sequence adds its
    // experts' outputs in expert order, however the work is split.
    const int workers = Workers(threads_, b_.rows * k * 3 * D * ExpertWidth(c_) / E);
    for (int64_t e = 0; e < E; ++e) {
      bool used = false;
      for (size_t s = 0; s < S; ++s) used |= !tokens[s][e].empty();
      if (!used) continue;
      std::shared_ptr<const LoadedExpert> loaded;
      if (w_.expert_source != nullptr) {
        absl::StatusOr<std::shared_ptr<const LoadedExpert>> got = w_.expert_source->Load(e, threads_);
        if (!got.ok()) {
          status_ = got.status();
          return;
        }
        loaded = *std::move(got);
      }
      const Expert& x = loaded != nullptr ? loaded->matrices : w_.experts[e];
      // One sequence's tokens: its products take every thread (their tiles
      // are fixed by the shapes, so the values are the same).
      auto run = [&](size_t s, int threads) {
        const int64_t count = static_cast<int64_t>(tokens[s][e].size());
        if (count == 0) return;
        const SequenceRows& seq = b_.sequences[s];
        thread_local std::vector<float> rows, gate, up, act_in, result;
        rows.resize(static_cast<size_t>(count * D));
        for (int64_t j = 0; j < count; ++j) {
          std::copy_n(in.data() + (seq.first_row + tokens[s][e][j]) * D, D, rows.data() + j * D);
        }
        ExpertMlp(x, e, rows, count, threads, gate, up, act_in, result);
        for (int64_t j = 0; j < count; ++j) {
          float* o = out.data() + (seq.first_row + tokens[s][e][j]) * D;
          const float g = gains[s][e][j];
          for (int64_t i = 0; i < D; ++i) o[i] += g * result[j * D + i];
        }
      };
      size_t active = 0, only = 0;
      for (size_t s = 0; s < S; ++s) {
        if (!tokens[s][e].empty()) active++, only = s;
      }
      if (active == 1) {
        run(only, workers);
      } else {
        ParallelFor(S, workers, [&](size_t s) { run(s, 1); });
      }
    }
  }

  // Qwen2-MoE's shared expert added to `out`: every token's MLP output
  // times sigmoid(shared_expert_gate x), the gate a router of one row.
  void SharedExpert(std::span<const float> m, std::vector<float>& out) {
    const int64_t D = c_.hidden_size;
    std::vector<float> gate, shared;
    const bool gated = w_.shared_gate.rows > 0;  // DeepSeek-V3's shared experts have none
    if (gated) Linear(w_.shared_gate, m, gate, Site::kRouter, kSharedExpert);
    std::span<const float> in =
        QuantizePerSequence(e_.activations.get(), b_, m, D, buf_.in, threads_);
    Mlp(w_.shared.gate, w_.shared.up, w_.shared.down, in, shared, kSharedExpert);
    for (int64_t r = 0; r < b_.rows; ++r) {
      const float g =
          gated ? 1.0f / (1.0f + std::exp(-gate[static_cast<size_t>(r)])) : 1.0f;
      for (int64_t i = 0; i < D; ++i) out[r * D + i] += g * shared[r * D + i];
    }
  }

  // gpt-oss's activation, in float32 as GptOssExperts computes it: gate =
  // min(gate, limit) * sigmoid(alpha min(gate, limit)) (rounded at kAct),
  // then gate * (clamp(up, -limit, limit) + 1) (rounded at kActMul).
  void ClampedSwiglu(std::span<float> gate, std::span<const float> up, Census& local) const {
    const float limit = static_cast<float>(c_.swiglu_limit);
    const float alpha = static_cast<float>(c_.swiglu_alpha);
    for (float& g : gate) {
      const float x = std::min(g, limit);
      g = x * (1.0f / (1.0f + std::exp(-(x * alpha))));
    }
    sites_.Round(Site::kAct, gate, local);
    for (size_t i = 0; i < gate.size(); ++i) gate[i] *= std::clamp(up[i], -limit, limit) + 1.0f;
    sites_.Round(Site::kActMul, gate, local);
  }

  // One expert's MLP over `count` rows, its products on `threads` threads.
  void ExpertMlp(const Expert& x, int64_t expert, std::span<const float> in, int64_t count,
                 int threads, std::vector<float>& gate, std::vector<float>& up,
                 std::vector<float>& act_in, std::vector<float>& out) {
    const RowBlock all[] = {{0, count}};
    Census local;
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
      LinearProduct(all, a.data(), m.cols, m.values.data(), m.rows, m.cols,
                    m.bias.empty() ? nullptr : m.bias.data(), o.data(), m.rows, threads);
      sites_.Round(site, o, local);
    };
    linear(x.gate, in, gate, Site::kGateProj);
    linear(x.up, in, up, Site::kUpProj);
    if (c_.swiglu_limit > 0) {
      ClampedSwiglu(gate, up, local);
    } else {
      Activate(gate);
      sites_.Round(Site::kAct, gate, local);
      MultiplyBy(gate, up);
      sites_.Round(Site::kActMul, gate, local);
    }
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
  absl::Status status_;              // an expert that could not be loaded
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
  if (config.kv_lora_rank > 0 && emulation.kv_rotation.mode != KvRotation::kNone) {
    return absl::InvalidArgumentError(absl::StrCat(
        config.name, ": the KV rotation is llama.cpp's for caches of keys and values; "
                     "DeepSeek-V3's latent attention caches a latent, which lowp does not rotate"));
  }
  BlasSetup();
  absl::StatusOr<std::pair<int64_t, int64_t>> rotation =
      KvRotationBlocks(emulation.kv_rotation, config.head_dim);
  if (!rotation.ok()) return rotation.status();
  LayerPass pass(config, layer, w, emulation, batch, kv, buffers, threads, census, inputs,
                 routes);
  pass.SetKvRotation(rotation->first, rotation->second);
  pass.Run(hidden);
  return pass.status();
}

int64_t MaxSequenceTokens(const ModelConfig& config, bool whole) {
  // longrope's short factors serve this far for a sequence continued from
  // a cache (generation); transformers switches the whole sequence to the
  // long factors beyond, which no cache of earlier keys follows.
  if (config.rope_scaling.type == "longrope" && !whole) {
    return config.rope_scaling.original_max_position_embeddings;
  }
  return config.max_position_embeddings > 0 ? config.max_position_embeddings
                                            : kMaxTokensWithoutPositions;
}

absl::Status CheckSequenceLength(const ModelConfig& c, int64_t length, bool whole) {
  if (length <= MaxSequenceTokens(c, whole)) return absl::OkStatus();
  if (c.rope_scaling.type == "longrope" && !whole) {
    return absl::InvalidArgumentError(absl::StrCat(
        "sequences of ", length, " tokens are longer than ", c.name,
        "'s original_max_position_embeddings (", c.rope_scaling.original_max_position_embeddings,
        "): transformers would rotate the whole sequence by longrope's long_factor, which the "
        "cache of its first tokens does not follow"));
  }
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
