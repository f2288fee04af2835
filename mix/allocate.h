// The cheapest assignment of one option per group under a byte budget: the
// multiple-choice knapsack that `lowp mix` solves, each group a tensor (or
// tensors that share storage), each option a type with its exact storage
// bytes and its predicted cost (a KL divergence).
//
// Branch and bound over the groups with the linear relaxation as the bound:
// the relaxation takes each group's upgrades along the lower convex hull of
// its (bytes, cost) options, the most cost saved per byte first, the last
// one fractionally. It is solved exactly unless `node_limit` nodes are not
// enough, and the result then states the bound it is known to be within.
#ifndef LOWP_MIX_ALLOCATE_H_
#define LOWP_MIX_ALLOCATE_H_

#include <cstdint>
#include <span>
#include <vector>

#include "absl/status/statusor.h"

namespace lowp {

struct MixOption {
  uint64_t bytes = 0;
  double cost = 0;  // finite
};

struct Allocation {
  std::vector<int> choice;  // per group, an index into its options
  uint64_t bytes = 0;
  double cost = 0;
  // No assignment within the budget costs less than this: `cost` when
  // exact, else the relaxation's optimum.
  double lower_bound = 0;
  bool exact = false;   // the search finished: `cost` is the minimum
  int64_t nodes = 0;    // search nodes visited
};

// InvalidArgument when a group has no option, a cost is not finite, or the
// budget is below the smallest assignment (the message gives that size).
absl::StatusOr<Allocation> Allocate(std::span<const std::vector<MixOption>> groups,
                                    uint64_t budget, int64_t node_limit = 2'000'000);

}  // namespace lowp

#endif  // LOWP_MIX_ALLOCATE_H_
