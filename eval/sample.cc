#include "eval/sample.h"

#include <cmath>
#include <mutex>

#include "absl/strings/str_cat.h"
#include "eval/metrics.h"
#include "formats/option_error.h"
#include "formats/reference.h"
#include "kernels/thread_pool.h"
#include "model/forward.h"

namespace lowp {
namespace {

// A uniform double in [0, 1) from 53 bits of (seed, sequence, position).
double Uniform(uint64_t seed, uint64_t sequence, uint64_t position) {
  const uint64_t hi = RandomBits(seed ^ (sequence * 0x9E3779B97F4A7C15ull), 2 * position);
  const uint64_t lo = RandomBits(seed ^ (sequence * 0x9E3779B97F4A7C15ull), 2 * position + 1);
  const uint64_t bits = ((hi << 32) | lo) >> 11;
  return static_cast<double>(bits) * 0x1.0p-53;
}

}  // namespace

absl::StatusOr<std::vector<int32_t>> SampleTokens(const ModelWeights& model,
                                                  const SampleOptions& o) {
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
  const ModelConfig& c = model.config;
  if (c.bos_token_id >= c.vocab_size) {
    return absl::InvalidArgumentError(absl::StrCat(c.name, ": bos_token_id ", c.bos_token_id,
                                                   " is not below vocab_size (", c.vocab_size,
                                                   ")"));
  }
  std::vector<int32_t> tokens(static_cast<size_t>(o.count * o.length));
  std::vector<absl::Status> errors(static_cast<size_t>(o.count));
  ParallelFor(static_cast<size_t>(o.count), ResolveThreads(o.threads), [&](size_t s) {
    int32_t* row = tokens.data() + s * o.length;
    row[0] = static_cast<int32_t>(c.bos_token_id);
    KvCache cache;
    std::vector<float> logits(static_cast<size_t>(c.vocab_size));
    std::vector<double> p;
    for (int64_t t = 1; t < o.length; ++t) {
      absl::Status status = Forward(model, {}, std::span<const int32_t>(row + t - 1, 1), cache,
                                    logits);
      if (!status.ok()) {
        errors[s] = status;
        return;
      }
      int64_t next = ArgMax(logits);
      if (o.temperature > 0) {
        p.resize(logits.size());
        double max = -INFINITY, sum = 0;
        for (float x : logits) max = std::max(max, static_cast<double>(x) / o.temperature);
        for (size_t i = 0; i < logits.size(); ++i) {
          sum += p[i] = std::exp(static_cast<double>(logits[i]) / o.temperature - max);
        }
        const double u = Uniform(o.seed, s, static_cast<uint64_t>(t)) * sum;
        double acc = 0;
        next = static_cast<int64_t>(p.size()) - 1;
        for (size_t i = 0; i < p.size(); ++i) {
          acc += p[i];
          if (u < acc) {
            next = static_cast<int64_t>(i);
            break;
          }
        }
      }
      row[t] = static_cast<int32_t>(next);
    }
  });
  for (const absl::Status& s : errors) {
    if (!s.ok()) return s;
  }
  return tokens;
}

}  // namespace lowp
