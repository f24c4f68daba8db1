// The EinDecomp cost model against the paper's worked numbers (Sec. 7) and the enumeration of
// partition vectors (Sec. 6 and 8.1).
#include <gtest/gtest.h>

#include "einsumdb/core/error.hpp"
#include "einsumdb/planner/eindecomp_cost.hpp"

namespace einsumdb {
namespace {

const std::map<char, std::int64_t> kBounds8{{'i', 8}, {'j', 8}, {'k', 8}};

TEST(EinDecompCost, AggregationOfThePapersMatrixProduct) {
  // Z[i,k] <- Σ X[i,j] Y[j,k], 8×8 matrices, d = [2,2,2,4] over [i,j,j,k], p = 16: 64.
  const PartitionVector d{{'i', 2}, {'j', 2}, {'k', 4}};
  EXPECT_EQ(aggregation_cost("ij", "jk", "ik", d, kBounds8, 16), 64.0);
  // d = [4,1,1,4]: nothing to aggregate.
  EXPECT_EQ(aggregation_cost("ij", "jk", "ik", {{'i', 4}, {'j', 1}, {'k', 4}}, kBounds8, 16), 0.0);
  // Into the join: p × (n_X + n_Y) = 16 × (2·8 + 8·2).
  EXPECT_EQ(join_cost("ij", "jk", {{'i', 4}, {'j', 1}, {'k', 4}}, kBounds8, 16), 16.0 * 32);
}

TEST(EinDecompCost, RepartitionBetweenProducerAndConsumer) {
  // Producer d = [2,2,2,4] gives Z[i,k] cut [2,4]; the consumer d = [4,1,1,4] wants its left
  // input X[i,j] cut [4,1]: 128 + 192 = 320.
  EXPECT_EQ(repartition_cost({8, 8}, {2, 4}, {4, 1}), 320.0);
  EXPECT_EQ(repartition_cost({8, 8}, {4, 1}, {4, 1}), 0.0);
}

TEST(EinDecompCost, PartitionVectorsMakeExactlyPPiecesOfWork) {
  // N = 10 doublings into D = 6 labels: (N + D − 1)! / (N! (D − 1)!) = 3003 vectors.
  std::map<char, std::int64_t> big;
  for (char c : std::string("abcdef")) big[c] = 1 << 20;
  const auto all = partition_vectors("abcdef", big, 1024);
  EXPECT_EQ(all.size(), 3003u);
  for (const auto& d : all) {
    std::int64_t product = 1;
    for (const auto& [l, parts] : d) product *= parts;
    ASSERT_EQ(product, 1024);
  }
  // A label is never cut into more parts than its length.
  const auto small = partition_vectors("ij", {{'i', 2}, {'j', 64}}, 16);
  for (const auto& d : small) EXPECT_LE(d.at('i'), 2);
  EXPECT_EQ(small.size(), 2u);  // [1,16] and [2,8]
  EXPECT_THROW(partition_vectors("ij", kBounds8, 12), SpecError);
  EXPECT_TRUE(partition_vectors("ij", {{'i', 2}, {'j', 2}}, 8).empty());  // infeasible
  EXPECT_EQ(join_labels("ij", "jk"), "ijk");
}

}  // namespace
}  // namespace einsumdb
