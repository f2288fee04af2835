// eval/routing.h by hand: each token's top-k experts of a candidate against
// the reference's, counted exactly.
#include "eval/routing.h"

#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace lowp {
namespace {

using ::testing::ElementsAre;

TEST(RoutingTallyTest, CountsAgreementOrderTopOneAndLoad) {
  ModelConfig config;
  config.num_experts = 4;
  config.experts_per_token = 2;
  std::vector<Stream> streams(3);
  // Three tokens, top-2 each: the reference, a candidate that swaps the
  // order of token 0's, replaces one expert of token 1's and keeps token
  // 2's, and one that agrees everywhere.
  streams[0].routes = {0, 1, /**/ 2, 3, /**/ 1, 2};
  streams[1].routes = {1, 0, /**/ 2, 0, /**/ 1, 2};
  streams[2].routes = streams[0].routes;
  RoutingTally tally(config, 2);
  tally.Add(5, streams);
  tally.Add(5, streams);  // a second batch adds to the same layer
  const std::vector<RoutingResult> changed = tally.Results(0);
  ASSERT_EQ(changed.size(), 1u);
  const RoutingResult& r = changed[0];
  EXPECT_EQ(r.layer, 5);
  EXPECT_EQ(r.tokens, 6u);
  EXPECT_DOUBLE_EQ(r.set_agreement, (2 + 1 + 2) / 6.0);  // per token, shared / k
  EXPECT_DOUBLE_EQ(r.order_agreement, 1 / 3.0);          // token 2 only
  EXPECT_DOUBLE_EQ(r.top1_changed, 1 / 3.0);             // token 0's first expert
  EXPECT_THAT(r.load, ElementsAre(4, 4, 4, 0));
  EXPECT_THAT(r.reference_load, ElementsAre(2, 4, 4, 2));
  EXPECT_DOUBLE_EQ(r.max_load_change, 2 / 6.0);
  const RoutingResult same = tally.Results(1)[0];
  EXPECT_EQ(same.set_agreement, 1.0);
  EXPECT_EQ(same.order_agreement, 1.0);
  EXPECT_EQ(same.top1_changed, 0.0);
  EXPECT_EQ(same.load, same.reference_load);
}

// Layers without experts report nothing.
TEST(RoutingTallyTest, DenseLayersReportNothing) {
  ModelConfig config;
  config.num_experts = 4;
  config.experts_per_token = 2;
  std::vector<Stream> streams(2);  // no routes: a dense layer
  RoutingTally tally(config, 1);
  tally.Add(0, streams);
  EXPECT_TRUE(tally.Results(0).empty());
}

}  // namespace
}  // namespace lowp
