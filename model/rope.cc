// The rotary embedding's frequencies (model/rope.h), as Hugging Face's
// modeling_rope_utils computes them, in double.
#include "model/rope.h"

#include <algorithm>
#include <cmath>

namespace lowp {

namespace {

// YaRN's mscale: 1 + 0.1 m ln(s) above a scale of 1.
double YarnMscale(double scale, double m) {
  return scale <= 1 ? 1.0 : 0.1 * m * std::log(scale) + 1.0;
}

}  // namespace

RopeFrequencies InverseFrequencies(const ModelConfig& c, int64_t layer, bool long_factors) {
  const int64_t d = RotaryDim(c);
  RopeFrequencies out;
  out.inv_freq.resize(static_cast<size_t>(d / 2));
  const bool local = c.rope_local_theta > 0 && SlidingLayer(c, layer);
  const RopeScaling none;
  const RopeScaling& r = local ? none : c.rope_scaling;
  const double theta = local ? c.rope_local_theta : c.rope_theta;
  // yarn: the dimensions between the correction range's ends blend
  // interpolated (divided by factor) and extrapolated frequencies.
  double low = 0, high = 0;
  const double factor = r.factor;
  if (r.type == "yarn") {
    const double context = static_cast<double>(r.original_max_position_embeddings);
    auto correction_dim = [&](double rotations) {
      return static_cast<double>(d) * std::log(context / (rotations * 2 * M_PI)) /
             (2 * std::log(theta));
    };
    low = correction_dim(r.beta_fast);
    high = correction_dim(r.beta_slow);
    if (r.truncate) {
      low = std::floor(low);
      high = std::ceil(high);
    }
    low = std::max(low, 0.0);
    high = std::min(high, static_cast<double>(d - 1));
    if (low == high) high += 0.001;
    out.attention_factor =
        r.attention_factor > 0 ? r.attention_factor
        : r.mscale > 0 && r.mscale_all_dim > 0
            ? YarnMscale(factor, r.mscale) / YarnMscale(factor, r.mscale_all_dim)
            : YarnMscale(factor, 1);
  } else if (r.type == "longrope") {
    const double context = static_cast<double>(r.original_max_position_embeddings);
    out.attention_factor =
        r.attention_factor > 0 ? r.attention_factor
        : factor <= 1          ? 1.0
                               : std::sqrt(1 + std::log(factor) / std::log(context));
  }
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
    } else if (r.type == "yarn") {
      const double ramp = std::clamp((static_cast<double>(i) - low) / (high - low), 0.0, 1.0);
      const double extrapolation = 1 - ramp;
      f = f / factor * (1 - extrapolation) + f * extrapolation;
    } else if (r.type == "longrope") {
      const std::vector<double>& factors =
          long_factors && !r.long_factor.empty() ? r.long_factor : r.short_factor;
      f /= factors[static_cast<size_t>(i)];
    }
    out.inv_freq[i] = f;
  }
  return out;
}

// What the scores' 1/sqrt(key width) is multiplied by: DeepSeek-V3's
// mscale(factor, mscale_all_dim)^2 under yarn; else 1.
double AttentionScale(const ModelConfig& c) {
  const RopeScaling& r = c.rope_scaling;
  if (c.kv_lora_rank <= 0 || r.type != "yarn" || r.mscale_all_dim <= 0) return 1;
  const double m = YarnMscale(r.factor, r.mscale_all_dim);
  return m * m;
}

}  // namespace lowp
