#include "mix/allocate.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "absl/strings/str_cat.h"

namespace lowp {
namespace {

// A group's options that are worth choosing (none smaller and cheaper),
// smallest first: costs strictly falling.
std::vector<int> Efficient(const std::vector<MixOption>& options) {
  std::vector<int> order(options.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
    return options[a].bytes != options[b].bytes ? options[a].bytes < options[b].bytes
                                                : options[a].cost < options[b].cost;
  });
  std::vector<int> out;
  for (int i : order) {
    if (out.empty() || options[i].cost < options[out.back()].cost) out.push_back(i);
  }
  return out;
}

// One step along a group's lower convex hull, from one vertex to the next:
// `saving` less cost for `bytes` more.
struct Step {
  int group;  // position in the search order
  uint64_t bytes;
  double saving;
};

class Search {
 public:
  Search(std::span<const std::vector<MixOption>> groups, uint64_t budget, int64_t node_limit)
      : groups_(groups), budget_(budget), node_limit_(node_limit) {}

  Allocation Run() {
    const size_t n = groups_.size();
    std::vector<std::vector<int>> efficient(n);
    std::vector<double> range(n);
    for (size_t g = 0; g < n; ++g) {
      efficient[g] = Efficient(groups_[g]);
      range[g] = groups_[g][efficient[g].front()].cost - groups_[g][efficient[g].back()].cost;
    }
    // The groups with the most at stake are decided first.
    order_.resize(n);
    std::iota(order_.begin(), order_.end(), 0);
    std::stable_sort(order_.begin(), order_.end(), [&](int a, int b) { return range[a] > range[b]; });
    options_.resize(n);
    for (size_t d = 0; d < n; ++d) options_[d] = efficient[order_[d]];
    // Suffix sums of the smallest options, for the bound and feasibility.
    min_bytes_.assign(n + 1, 0);
    min_cost_.assign(n + 1, 0);
    for (size_t d = n; d-- > 0;) {
      const MixOption& o = Option(d, 0);
      min_bytes_[d] = min_bytes_[d + 1] + o.bytes;
      min_cost_[d] = min_cost_[d + 1] + o.cost;
    }
    for (size_t d = 0; d < n; ++d) AddHull(static_cast<int>(d));
    std::stable_sort(steps_.begin(), steps_.end(), [](const Step& a, const Step& b) {
      return a.saving * static_cast<double>(b.bytes) > b.saving * static_cast<double>(a.bytes);
    });
    Allocation out;
    const double root = Bound(0, budget_);
    Greedy();
    chosen_.assign(n, 0);
    exact_ = true;
    Descend(0, 0, 0.0);
    out.choice.resize(n);
    for (size_t d = 0; d < n; ++d) out.choice[order_[d]] = options_[d][best_[d]];
    for (size_t g = 0; g < n; ++g) {
      out.bytes += groups_[g][out.choice[g]].bytes;
      out.cost += groups_[g][out.choice[g]].cost;
    }
    out.exact = exact_;
    out.lower_bound = exact_ ? out.cost : std::min(root, out.cost);
    out.nodes = nodes_;
    return out;
  }

 private:
  const MixOption& Option(size_t depth, int k) const {
    return groups_[order_[depth]][options_[depth][k]];
  }

  // The lower convex hull of group `d`'s efficient options as steps.
  void AddHull(int d) {
    const std::vector<int>& o = options_[d];
    std::vector<int> hull = {0};
    for (int k = 1; k < static_cast<int>(o.size()); ++k) {
      while (hull.size() >= 2) {
        const MixOption& a = Option(d, hull[hull.size() - 2]);
        const MixOption& b = Option(d, hull.back());
        const MixOption& c = Option(d, k);
        // b is above the segment a-c (or on it): not a vertex.
        const double lhs = (a.cost - b.cost) * static_cast<double>(c.bytes - a.bytes);
        const double rhs = (a.cost - c.cost) * static_cast<double>(b.bytes - a.bytes);
        if (lhs > rhs) break;
        hull.pop_back();
      }
      hull.push_back(k);
    }
    for (size_t i = 1; i < hull.size(); ++i) {
      const MixOption& a = Option(d, hull[i - 1]);
      const MixOption& b = Option(d, hull[i]);
      steps_.push_back({d, b.bytes - a.bytes, a.cost - b.cost});
    }
  }

  // The relaxation's optimum over groups from `depth` on within `room`
  // bytes; infinity when even their smallest options do not fit.
  double Bound(size_t depth, uint64_t room) const {
    if (min_bytes_[depth] > room) return std::numeric_limits<double>::infinity();
    uint64_t left = room - min_bytes_[depth];
    double cost = min_cost_[depth];
    for (const Step& s : steps_) {
      if (static_cast<size_t>(s.group) < depth) continue;
      if (s.bytes <= left) {
        left -= s.bytes;
        cost -= s.saving;
      } else {
        cost -= s.saving * static_cast<double>(left) / static_cast<double>(s.bytes);
        break;
      }
    }
    return cost;
  }

  // A first assignment: the relaxation's whole steps, a group's later steps
  // skipped once one of them does not fit.
  void Greedy() {
    const size_t n = options_.size();
    std::vector<int> at(n, 0);
    std::vector<bool> blocked(n, false);
    uint64_t left = budget_ - min_bytes_[0];
    for (const Step& s : steps_) {
      if (blocked[s.group]) continue;
      if (s.bytes > left) {
        blocked[s.group] = true;
        continue;
      }
      left -= s.bytes;
      // The next hull vertex: the option `bytes` larger.
      const uint64_t target = Option(s.group, at[s.group]).bytes + s.bytes;
      while (Option(s.group, at[s.group]).bytes < target) ++at[s.group];
    }
    best_ = at;
    best_cost_ = 0;
    for (size_t d = 0; d < n; ++d) best_cost_ += Option(d, at[d]).cost;
  }

  void Descend(size_t depth, uint64_t used, double cost) {
    if (nodes_ >= node_limit_) {
      exact_ = false;
      return;
    }
    ++nodes_;
    if (depth == options_.size()) {
      if (cost < best_cost_) {
        best_cost_ = cost;
        best_ = chosen_;
      }
      return;
    }
    // The largest (cheapest) options first: the relaxation leans that way.
    for (int k = static_cast<int>(options_[depth].size()) - 1; k >= 0; --k) {
      const MixOption& o = Option(depth, k);
      if (used + o.bytes + min_bytes_[depth + 1] > budget_) continue;
      const double here = cost + o.cost;
      if (here + Bound(depth + 1, budget_ - used - o.bytes) >= best_cost_) continue;
      chosen_[depth] = k;
      Descend(depth + 1, used + o.bytes, here);
    }
  }

  std::span<const std::vector<MixOption>> groups_;
  const uint64_t budget_;
  const int64_t node_limit_;
  std::vector<int> order_;                  // search position -> group
  std::vector<std::vector<int>> options_;   // per position, efficient options
  std::vector<uint64_t> min_bytes_;
  std::vector<double> min_cost_;
  std::vector<Step> steps_;
  std::vector<int> chosen_, best_;          // per position, index into options_
  double best_cost_ = 0;
  bool exact_ = true;
  int64_t nodes_ = 0;
};

}  // namespace

absl::StatusOr<Allocation> Allocate(std::span<const std::vector<MixOption>> groups,
                                    uint64_t budget, int64_t node_limit) {
  uint64_t smallest = 0;
  for (size_t g = 0; g < groups.size(); ++g) {
    if (groups[g].empty()) {
      return absl::InvalidArgumentError(absl::StrCat("group ", g, " has no option"));
    }
    uint64_t least = std::numeric_limits<uint64_t>::max();
    for (const MixOption& o : groups[g]) {
      if (!std::isfinite(o.cost)) {
        return absl::InvalidArgumentError(absl::StrCat("group ", g, " has a cost of ", o.cost));
      }
      least = std::min(least, o.bytes);
    }
    smallest += least;
  }
  if (smallest > budget) {
    return absl::InvalidArgumentError(absl::StrCat("the budget of ", budget,
                                                   " bytes is below the smallest assignment, ",
                                                   smallest, " bytes"));
  }
  return Search(groups, budget, node_limit).Run();
}

}  // namespace lowp
