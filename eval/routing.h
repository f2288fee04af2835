// Internal to eval/: what quantization does to a mixture of experts' routing
// (RoutingResult, eval/report.h): per candidate
// and layer with experts, each token's top-k experts (in order of router
// weight) against the reference's on the same token, and how many tokens
// each expert takes. Counts over every token of every sequence (routing
// happens at every position, scored or not); batches add in any order.
#ifndef LOWP_EVAL_ROUTING_H_
#define LOWP_EVAL_ROUTING_H_

#include <cstdint>
#include <map>
#include <span>
#include <vector>

#include "eval/report.h"
#include "eval/stream.h"
#include "model/config.h"

namespace lowp {

class RoutingTally {
 public:
  RoutingTally(const ModelConfig& config, size_t candidates);
  // The routes of `layer` (Stream::routes, [rows, k]) of each candidate
  // (streams[1..]) against the reference's (streams[0]).
  void Add(int64_t layer, std::span<const Stream> streams);
  // Candidate `k`'s, by layer.
  std::vector<RoutingResult> Results(size_t k) const;

 private:
  struct Sums {
    uint64_t tokens = 0, shared = 0, ordered = 0, top1_same = 0;
    std::vector<uint64_t> load, reference_load;
  };
  const ModelConfig& config_;
  std::vector<std::map<int64_t, Sums>> sums_;  // [candidate][layer]
};

}  // namespace lowp

#endif  // LOWP_EVAL_ROUTING_H_
