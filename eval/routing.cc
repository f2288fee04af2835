#include "eval/routing.h"

#include <algorithm>
#include <cstdlib>

namespace lowp {

RoutingTally::RoutingTally(const ModelConfig& config, size_t candidates)
    : config_(config), sums_(candidates) {}

void RoutingTally::Add(int64_t layer, std::span<const Stream> streams) {
  const int64_t k = config_.experts_per_token, E = config_.num_experts;
  const std::vector<int32_t>& reference = streams[0].routes;
  if (k <= 0 || reference.empty()) return;
  const size_t rows = reference.size() / static_cast<size_t>(k);
  for (size_t c = 1; c < streams.size(); ++c) {
    const std::vector<int32_t>& mine = streams[c].routes;
    if (mine.size() != reference.size()) continue;
    Sums& s = sums_[c - 1][layer];
    s.load.resize(static_cast<size_t>(E));
    s.reference_load.resize(static_cast<size_t>(E));
    for (size_t r = 0; r < rows; ++r) {
      const int32_t* a = mine.data() + r * k;
      const int32_t* b = reference.data() + r * k;
      ++s.tokens;
      s.top1_same += a[0] == b[0];
      s.ordered += std::equal(a, a + k, b);
      for (int64_t i = 0; i < k; ++i) {
        s.shared += std::find(b, b + k, a[i]) != b + k;
        ++s.load[static_cast<size_t>(a[i])];
        ++s.reference_load[static_cast<size_t>(b[i])];
      }
    }
  }
}

std::vector<RoutingResult> RoutingTally::Results(size_t k) const {
  std::vector<RoutingResult> out;
  const double per = static_cast<double>(std::max<int64_t>(1, config_.experts_per_token));
  for (const auto& [layer, s] : sums_[k]) {
    RoutingResult r;
    r.layer = layer;
    r.tokens = s.tokens;
    const double tokens = static_cast<double>(s.tokens);
    r.set_agreement = static_cast<double>(s.shared) / (tokens * per);
    r.order_agreement = static_cast<double>(s.ordered) / tokens;
    r.top1_changed = 1.0 - static_cast<double>(s.top1_same) / tokens;
    r.load = s.load;
    r.reference_load = s.reference_load;
    for (size_t e = 0; e < s.load.size(); ++e) {
      const double change =
          std::abs(static_cast<double>(s.load[e]) - static_cast<double>(s.reference_load[e]));
      r.max_load_change = std::max(r.max_load_change, change / tokens);
    }
    out.push_back(std::move(r));
  }
  return out;
}

}  // namespace lowp
