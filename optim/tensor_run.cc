#include "optim/tensor_run.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "formats/reference.h"
#include "kernels/convert.h"
#include "kernels/thread_pool.h"
#include "optim/dynamic_map.h"

namespace lowp::internal {


namespace {

// Rounds float32 arrays to a format and back (saturating when asked).
struct RoundTo {
  Format format;
  Rounder rounder;
  static RoundTo Make(const Format& f, Rounding rounding, bool saturate, uint64_t seed) {
    ConvertOptions options;
    options.rounding = rounding;
    options.seed = seed;
    if (saturate) options.overflow = Overflow::kSaturate;
    return {f, *Rounder::Make(f, options)};
  }
  void operator()(std::span<const float> in, std::span<float> out, uint64_t first_index = 0) const {
    RunOptions run;
    run.threads = 1;
    run.first_index = first_index;
    rounder.Round(in, out, run);
  }
};

}  // namespace

// Per recipe, the rounders it needs, made once per tensor.
struct TensorRun::Rounders {
  RoundTo weights, weights_sr, grads, bf16, e4m3;
};

namespace {

// One recipe's state over a chunk.
struct RecipeState {
  std::vector<float> w, w0, master, comp, m, v;
};

// Each block of kDynamicBlock values of `x` (the tensor's blocks) stored as
// e4m3 codes times a float32 scale absmax / 448; returns zeroed nonzeros.
uint64_t RoundTripFp8Blocks(const RoundTo& e4m3, std::span<float> x, std::vector<float>& tmp) {
  uint64_t zeroed = 0;
  for (size_t begin = 0; begin < x.size(); begin += kDynamicBlock) {
    std::span<float> block = x.subspan(begin, std::min<size_t>(kDynamicBlock, x.size() - begin));
    float absmax = 0;
    for (float v : block) absmax = std::max(absmax, std::fabs(v));
    if (absmax == 0) continue;
    const float scale = absmax / 448.0f;
    tmp.resize(block.size());
    for (size_t i = 0; i < block.size(); ++i) tmp[i] = block[i] / scale;
    e4m3(tmp, tmp);
    for (size_t i = 0; i < block.size(); ++i) {
      const float stored = tmp[i] * scale;
      zeroed += block[i] != 0 && stored == 0;
      block[i] = stored;
    }
  }
  return zeroed;
}

// The moments stored in the recipe's format; counts underflow and overflow.
void StoreMoments(const TrainingRecipe& r, const RoundTo& to_bf16, const RoundTo& to_e4m3,
                  std::span<float> m, std::span<float> v, std::vector<float>& tmp,
                  StateCensus& census) {
  using M = TrainingRecipe::Moments;
  auto count = [&](std::span<const float> before, std::span<const float> after) {
    for (size_t i = 0; i < before.size(); ++i) {
      census.moment_underflow += before[i] != 0 && after[i] == 0;
      census.moment_overflow += std::isfinite(before[i]) && !std::isfinite(after[i]);
    }
  };
  switch (r.moments) {
    case M::kFp32:
      return;
    case M::kBf16:
      for (std::span<float> x : {m, v}) {
        tmp.assign(x.begin(), x.end());
        to_bf16(x, x);
        count(tmp, x);
      }
      return;
    case M::kFp8Blocks: {
      std::vector<float> scratch;
      census.moment_underflow += RoundTripFp8Blocks(to_e4m3, m, scratch);
      census.moment_underflow += RoundTripFp8Blocks(to_e4m3, v, scratch);
      return;
    }
    case M::kDynamic8:
      census.moment_underflow += RoundTripDynamic(true, m);
      census.moment_underflow += RoundTripDynamic(false, v);
      return;
  }
}

// The per-step gradient scale of a recipe (1 when unscaled) from the
// gradient's amax at that step.
float GradScale(const TrainingRecipe& r, double amax) {
  if (!r.ScaledGradients() || !(amax > 0)) return 1.0f;
  const double max = r.grads.max_finite();
  if (r.grads.name == "fp16")
    return static_cast<float>(std::exp2(std::floor(std::log2(max / amax))));
  return static_cast<float>(max / amax);
}

}  // namespace

TensorRun::TensorRun(const UpdateErrorOptions& options, std::span<const TrainingRecipe> recipes,
                     int64_t n, uint64_t tensor_index, double rms)
    : options_(options),
      recipes_(recipes),
      n_(n),
      tensor_index_(tensor_index),
      sigma_(options.grad_scale * (rms > 0 ? rms : 1.0)),
      rho_(options.grad_signal),
      noise_(std::sqrt(1 - options.grad_signal * options.grad_signal)),
      checkpoints_(UpdateCheckpoints(options.adamw.steps)),
      lr_(static_cast<size_t>(options.adamw.steps) + 1),
      amax_(static_cast<size_t>(options.adamw.steps) + 1, 0.0) {
  for (int64_t t = 1; t <= options.adamw.steps; ++t) lr_[t] = LearningRate(options.adamw, t);
  const Format bf16 = *FindFormat("bf16"), e4m3 = *FindFormat("fp8_e4m3fn");
  for (size_t r = 0; r < recipes.size(); ++r) {
    const TrainingRecipe& rec = recipes[r];
    rounders_.push_back(std::make_unique<Rounders>(
        Rounders{RoundTo::Make(rec.weights, Rounding::kNearestEven, false, 0),
                 RoundTo::Make(rec.weights, Rounding::kStochastic, false,
                               Mix64(options.seed ^ (tensor_index << 8) ^ r)),
                 RoundTo::Make(rec.grads, Rounding::kNearestEven, true, 0),
                 RoundTo::Make(bf16, Rounding::kNearestEven, false, 0),
                 RoundTo::Make(e4m3, Rounding::kNearestEven, true, 0)}));
  }
}

TensorRun::~TensorRun() = default;

double TensorRun::Gradient(double d, int64_t i, int64_t t) const {
  return sigma_ * (rho_ * d + noise_ * GradientDraw(options_.seed, tensor_index_, i, t));
}

void TensorRun::ScanGradientAmax() {
  bool any_scaled = false;
  for (const TrainingRecipe& r : recipes_) any_scaled |= r.ScaledGradients();
  if (!any_scaled || n_ == 0) return;
  const int64_t T = options_.adamw.steps;
  const int64_t chunks = (n_ + kChunkElements - 1) / kChunkElements;
  std::vector<std::vector<double>> part(static_cast<size_t>(chunks));
  ParallelFor(static_cast<size_t>(chunks), options_.threads, [&](size_t c) {
    std::vector<double>& local = part[c];
    local.assign(static_cast<size_t>(T) + 1, 0.0);
    const int64_t begin = static_cast<int64_t>(c) * kChunkElements,
                  end = std::min(n_, begin + kChunkElements);
    for (int64_t i = begin; i < end; ++i) {
      const double d = GradientDraw(options_.seed, tensor_index_, static_cast<uint64_t>(i), 0);
      for (int64_t t = 1; t <= T; ++t) local[t] = std::max(local[t], std::fabs(Gradient(d, i, t)));
    }
  });
  for (const std::vector<double>& local : part) {
    for (int64_t t = 1; t <= T; ++t) amax_[t] = std::max(amax_[t], local[t]);
  }
}

void TensorRun::Chunk(std::span<const float> values, int64_t base,
                      std::vector<UpdateReport>& out) const {
  const UpdateErrorOptions& o = options_;
  const AdamWOptions& a = o.adamw;
  const std::span<const TrainingRecipe> recipes = recipes_;
  const std::vector<int64_t>& checkpoints = checkpoints_;
  const std::vector<double>&lr = lr_, &amax = amax_;
  const int64_t T = a.steps, n = n_;
  const uint64_t tensor_index = tensor_index_;
  const float one_minus_b1 = static_cast<float>(1 - a.beta1), b1 = static_cast<float>(a.beta1);
  const float one_minus_b2 = static_cast<float>(1 - a.beta2), b2 = static_cast<float>(a.beta2);
  const float eps = static_cast<float>(a.eps);
  auto gradient = [this](double d, int64_t i, int64_t t) { return Gradient(d, i, t); };
  const int64_t begin = 0, end = static_cast<int64_t>(values.size());
  const size_t len = values.size();
  out.resize(recipes.size());
  for (UpdateReport& rep : out) {
    rep.checkpoints = checkpoints;
    rep.error_squared.assign(checkpoints.size(), 0.0);
    rep.movement_squared.assign(checkpoints.size(), 0.0);
    rep.elements = len;
  }
  std::vector<double> d(len), g(len);
  std::vector<AdamWState64> ref(len);
  std::vector<double> p0(len);
  for (size_t i = 0; i < len; ++i) {
    d[i] = GradientDraw(o.seed, tensor_index, static_cast<uint64_t>(base) + i, 0);
    ref[i].p = p0[i] = values[begin + i];
  }
  std::vector<RecipeState> st(recipes.size());
  for (size_t r = 0; r < recipes.size(); ++r) {
    RecipeState& s = st[r];
    s.w.assign(values.begin() + begin, values.begin() + end);
    rounders_[r]->weights(s.w, s.w);
    s.w0 = s.w;
    if (recipes[r].master) s.master.assign(values.begin() + begin, values.begin() + end);
    s.comp.assign(len, 0.0f);
    s.m.assign(len, 0.0f);
    s.v.assign(len, 0.0f);
  }
  std::vector<float> gq(len), mn(len), vn(len), xn(len), update(len), scratch(len), tmp;
  std::vector<uint8_t> moved(len);
  size_t next_checkpoint = 0;
  for (int64_t t = 1; t <= T; ++t) {
    const double rate = lr[t];
    const AdamWCorrections k(a, t);
    for (size_t i = 0; i < len; ++i) {
      g[i] = gradient(d[i], base + static_cast<int64_t>(i), t);
      const double before = ref[i].p;
      AdamWStep64(a, k, rate, g[i], ref[i]);
      moved[i] = ref[i].p != before;
    }
    const double c1 = k.c1, c2 = k.c2;
    const float step_size = static_cast<float>(-rate / c1);
    const float root_c2 = static_cast<float>(std::sqrt(c2));
    const float decay = static_cast<float>(1 - rate * a.weight_decay);
    const bool at_checkpoint =
        next_checkpoint < checkpoints.size() && checkpoints[next_checkpoint] == t;
    for (size_t r = 0; r < recipes.size(); ++r) {
      const TrainingRecipe& rec = recipes[r];
      const Rounders& rr = *rounders_[r];
      RecipeState& s = st[r];
      UpdateReport& rep = out[r];
      // The gradient as stored.
      const float scale = GradScale(rec, amax[t]);
      for (size_t i = 0; i < len; ++i) scratch[i] = static_cast<float>(g[i] * scale);
      rr.grads(scratch, gq);
      // A scaled format's amax lands on its largest value (saturating the
      // rounding of the product at the top): only unscaled ones overflow.
      const float gmax = rec.ScaledGradients() ? std::numeric_limits<float>::infinity()
                                               : static_cast<float>(rec.grads.max_finite());
      for (size_t i = 0; i < len; ++i) {
        rep.census.grad_underflow += scratch[i] != 0 && gq[i] == 0;
        rep.census.grad_overflow += std::fabs(scratch[i]) > gmax;
        gq[i] /= scale;
      }
      // Moments and the update in float32.
      for (size_t i = 0; i < len; ++i) {
        mn[i] = b1 * s.m[i] + one_minus_b1 * gq[i];
        vn[i] = b2 * s.v[i] + one_minus_b2 * (gq[i] * gq[i]);
        const float u = step_size * (mn[i] / (std::sqrt(vn[i]) / root_c2 + eps));
        const float x = rec.master ? s.master[i] : s.w[i];
        update[i] = u;
        xn[i] = x * decay + u;
      }
      // Into the stored weight.
      std::vector<float>& stored = rec.master ? s.master : s.w;
      for (size_t i = 0; i < len; ++i) scratch[i] = stored[i];  // the old values
      if (rec.master) {
        s.master.swap(xn);  // float32 already
        rr.weights(s.master, s.w);
      } else if (rec.update == TrainingRecipe::Update::kKahan) {
        for (size_t i = 0; i < len; ++i) {
          const float y = (xn[i] - s.w[i]) - s.comp[i];
          xn[i] = s.w[i] + y;
          s.comp[i] = y;  // kept for the correction below
        }
        rr.weights(xn, xn);
        for (size_t i = 0; i < len; ++i) s.comp[i] = (xn[i] - s.w[i]) - s.comp[i];
        rr.weights(s.comp, s.comp);
        s.w.swap(xn);
      } else if (rec.update == TrainingRecipe::Update::kStochastic) {
        rr.weights_sr(
            xn, s.w,
            static_cast<uint64_t>(t) * static_cast<uint64_t>(n) + static_cast<uint64_t>(base));
      } else {
        rr.weights(xn, s.w);
      }
      const std::vector<float>& now = rec.master ? s.master : s.w;
      for (size_t i = 0; i < len; ++i) {
        const double old = scratch[i];
        const double intended =
            static_cast<double>(scratch[i] * decay) - old + static_cast<double>(update[i]);
        const double applied = static_cast<double>(now[i]) - old;
        rep.applied_dot_intended += applied * intended;
        rep.intended_squared += intended * intended;
        if (moved[i]) {
          ++rep.reference_moves;
          rep.lost += now[i] == scratch[i];
        }
      }
      StoreMoments(rec, rr.bf16, rr.e4m3, mn, vn, tmp, rep.census);
      s.m.swap(mn);
      s.v.swap(vn);
      mn.resize(len);
      vn.resize(len);
      xn.resize(len);
      if (at_checkpoint) {
        const std::vector<float>& x = rec.master ? s.master : s.w;
        for (size_t i = 0; i < len; ++i) {
          // The master copy starts at the tensor's values, the weights at
          // them rounded to their format.
          const double start = rec.master ? static_cast<double>(values[begin + i]) : s.w0[i];
          const double e = (static_cast<double>(x[i]) - start) - (ref[i].p - p0[i]);
          rep.error_squared[next_checkpoint] += e * e;
          rep.movement_squared[next_checkpoint] += (ref[i].p - p0[i]) * (ref[i].p - p0[i]);
        }
      }
    }
    if (at_checkpoint) ++next_checkpoint;
  }
  for (size_t r = 0; r < recipes.size(); ++r) {
    UpdateReport& rep = out[r];
    for (size_t i = 0; i < len; ++i) {
      const double dm = st[r].m[i] - ref[i].m, dv = st[r].v[i] - ref[i].v;
      rep.m_error_squared += dm * dm;
      rep.m_squared += ref[i].m * ref[i].m;
      rep.v_error_squared += dv * dv;
      rep.v_squared += ref[i].v * ref[i].v;
    }
  }
}

}  // namespace lowp::internal
