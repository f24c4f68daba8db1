// The data a plan moves (planner/traffic.hpp) and its time on a network (planner/network.hpp).
#include <algorithm>
#include <map>
#include <random>
#include <set>

#include <gtest/gtest.h>

#include "einsumdb/core/error.hpp"
#include "einsumdb/planner/network.hpp"
#include "einsumdb/planner/plan_file.hpp"
#include "einsumdb/planner/traffic.hpp"
#include "einsumdb/tests/support/planner_graphs.hpp"

namespace einsumdb {
namespace {

const char* const kChain = testing::kSmallChain;
using testing::plan_of;

TEST(Blocking, TheBlocksMeetingARegionAreExactlyThoseThatIntersectIt) {
  std::mt19937_64 rng(7);
  for (int trial = 0; trial < 500; ++trial) {
    Blocking b;
    Region region;
    const int axes = static_cast<int>(rng() % 4);
    for (int a = 0; a < axes; ++a) {
      const std::int64_t bound = 1 + static_cast<std::int64_t>(rng() % 40);
      b.shape.push_back(bound);
      b.parts.push_back(1 + static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(bound)));
      const std::int64_t lo = static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(bound));
      region.start.push_back(lo);
      region.length.push_back(
          1 + static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(bound - lo)));
    }
    std::vector<std::pair<std::int64_t, Region>> expected, found;
    for (std::int64_t k = 0; k < b.blocks(); ++k) {
      Region box;
      if (intersect(b.region(k), region, box)) expected.emplace_back(k, box);
    }
    for_each_block_meeting(b, region,
                           [&](std::int64_t k, const Region& box) { found.emplace_back(k, box); });
    ASSERT_EQ(found.size(), expected.size()) << "trial " << trial;
    for (std::size_t i = 0; i < found.size(); ++i) {
      EXPECT_EQ(found[i].first, expected[i].first) << "trial " << trial;
      EXPECT_EQ(found[i].second.start, expected[i].second.start) << "trial " << trial;
      EXPECT_EQ(found[i].second.length, expected[i].second.length) << "trial " << trial;
    }
  }
}

TEST(Traffic, EveryPieceReceivesItsOperandsExactlyOnceAndGroupsAreItsResultBlocks) {
  const EinGraph g = parse_eingraph_text(kChain);
  for (std::int64_t P : {1, 2, 4, 8, 16})
    for (auto m : {PlanMethod::eindecomp, PlanMethod::sqrt, PlanMethod::data}) {
      const Plan plan = plan_of(g, P, m);
      const Placement p = place(plan);
      for (int v = 0; v < static_cast<int>(plan.graph.steps.size()); ++v) {
        const PlanStep& s = plan.graph.steps[static_cast<std::size_t>(v)];
        const StepPlacement& sp = p.steps[static_cast<std::size_t>(v)];
        std::map<std::pair<int, int>, std::int64_t> received;  // (rank, operand) -> elements
        for (const Transfer& t : join_transfers(plan, p, v)) {
          EXPECT_EQ(t.step, v);
          const Relation& r = p.relations.at(t.tensor);
          EXPECT_EQ(t.src, r.owner[static_cast<std::size_t>(t.block)]);
          received[{t.dst, t.operand}] += t.box.size();
        }
        for (std::int64_t q = 0; q < P; ++q) {
          const int rank = sp.rank[static_cast<std::size_t>(q)];
          EXPECT_EQ(received[std::make_pair(rank, 0)], operand_region(s, sp, q, s.x).size());
          if (!s.y.empty()) {
            EXPECT_EQ(received[std::make_pair(rank, 1)], operand_region(s, sp, q, s.y).size());
          }
          const auto group = aggregation_group(plan, p, v, q);
          EXPECT_EQ(static_cast<std::int64_t>(group.size()), sp.aggregated_parts);
          const Relation& result = p.relations.at(s.name);
          const auto block = result_block(s, sp, result.blocking, q);
          EXPECT_EQ(group.front(), result.owner[static_cast<std::size_t>(block)]);
          EXPECT_EQ(std::set<int>(group.begin(), group.end()).size(), group.size());
          EXPECT_NE(std::find(group.begin(), group.end(), rank), group.end());
        }
      }
    }
}

// ij,jk->ik with j far the longest: EinDecomp splits j, the inputs are placed where they are read,
// and the one cost is the reduction: rank 1's 4×4 partial result sent to rank 0 and added there.
TEST(Network, ASplitSumCostsOneMessageAndOneAdditionPricedByHand) {
  const EinGraph g = parse_eingraph_text(
      R"({"inputs": {"A": {"shape": [4, 100000]}, "B": {"shape": [100000, 4]}},
          "nodes": [{"name": "Z", "einsum": "ij,jk->ik", "inputs": ["A", "B"]}]})");
  const Plan plan = plan_of(g, 2);
  ASSERT_EQ(plan.choice[0].d.at('j'), 2);
  const Placement p = place(plan);
  Network n;
  n.latency_s = 1e-3;
  n.bandwidth = 1e6;
  n.local_latency_s = 1e-5;
  n.local_bandwidth = 1e8;
  std::vector<std::string> shapes;
  const KernelSeconds kernel = [&](const BatchedEinsum& e) {
    shapes.push_back(e.einsum_string());
    return 0.25;
  };
  const double bytes = 4 * 4 * 8, combine = 3 * bytes / n.local_bandwidth;
  for (std::int64_t per_host : {1, 2}) {
    n.ranks_per_host = per_host;
    const auto t = predict_times(plan, p, n, kernel);
    ASSERT_EQ(t.size(), 1u);
    EXPECT_EQ(t[0].transfer, 0);
    EXPECT_EQ(t[0].kernel, 0.25);
    EXPECT_EQ(t[0].messages, 1);
    if (per_host == 1) {
      EXPECT_DOUBLE_EQ(t[0].reduce, n.latency_s + bytes / n.bandwidth + combine);
      EXPECT_EQ(t[0].host_bytes, bytes);
      EXPECT_EQ(t[0].link_bytes, bytes);
    } else {
      EXPECT_DOUBLE_EQ(t[0].reduce, n.local_latency_s + bytes / n.local_bandwidth + combine);
      EXPECT_EQ(t[0].local_bytes, bytes);
      EXPECT_EQ(t[0].host_bytes, 0);
    }
  }
  EXPECT_EQ(shapes.size(), 2u);  // both pieces have one shape: asked once per prediction
}

// Two steps whose pieces have the same block shapes but not the same einsum are priced apart.
TEST(Network, KernelsOfTheSameShapesButAnotherEinsumArePricedApart) {
  const EinGraph g = parse_eingraph_text(
      R"({"inputs": {"A": {"shape": [32, 32]}, "B": {"shape": [32, 32]}},
          "nodes": [{"name": "P", "einsum": "ij,jk->ik", "inputs": ["A", "B"]},
                    {"name": "S", "einsum": "ij,ij->ij", "inputs": ["A", "B"], "join": "add"}]})");
  const Plan plan = plan_of(g, 1);
  Network n;
  n.latency_s = n.local_latency_s = 1e-6;
  n.bandwidth = n.local_bandwidth = 1e9;
  const auto t = predict_times(plan, place(plan), n, [](const BatchedEinsum& e) {
    return e.einsum_string().find("->") != std::string::npos && e.join == JoinOp::mul ? 1.0 : 0.5;
  });
  ASSERT_EQ(t.size(), 2u);
  EXPECT_EQ(t[0].kernel, 1.0);
  EXPECT_EQ(t[1].kernel, 0.5);
}

// A step that moves data between hosts: the busiest link's bytes at the link's bandwidth.
TEST(Network, TransfersArePricedByTheBusiestHostLink) {
  const EinGraph g = parse_eingraph_text(kChain);
  const Plan plan = plan_of(g, 4, PlanMethod::data);
  const Placement p = place(plan);
  Network n;
  n.latency_s = 1e-6, n.bandwidth = 1e6, n.local_latency_s = 1e-7, n.local_bandwidth = 1e12;
  n.ranks_per_host = 2;
  const auto t = predict_times(plan, p, n, [](const BatchedEinsum&) { return 0.0; });
  for (int v = 0; v < static_cast<int>(plan.graph.steps.size()); ++v) {
    std::map<int, double> out, in;
    const auto& s = plan.graph.steps[static_cast<std::size_t>(v)];
    for (const Transfer& x : join_transfers(plan, p, v))
      if (x.src / 2 != x.dst / 2) {
        out[x.src / 2] += static_cast<double>(x.box.size() * 8);
        in[x.dst / 2] += static_cast<double>(x.box.size() * 8);
      }
    double busiest = 0;
    for (auto* m : {&out, &in})
      for (const auto& [h, b] : *m) busiest = std::max(busiest, b);
    EXPECT_GE(t[static_cast<std::size_t>(v)].transfer, busiest / n.bandwidth) << s.name;
    EXPECT_LE(t[static_cast<std::size_t>(v)].transfer, busiest / n.bandwidth + 1e-3) << s.name;
  }
}

// The data plan of a product splits A's rows and gives both pieces all of B. A large B is cut
// into one share per reader, so each host sends half of B and receives the other half, and the
// busiest link carries half of B where one owner of all of it would send all of it; a small B is
// left whole (its messages would cost about what sharing saves).
TEST(Network, ABlockEveryPieceReadsIsSharedAmongItsReadersWhenLarge) {
  for (std::int64_t n : {64, 512}) {
    const std::string shape = "[" + std::to_string(n) + ", " + std::to_string(n) + "]";
    const EinGraph g = parse_eingraph_text(R"({"inputs": {"A": {"shape": )" + shape +
                                           R"(}, "B": {"shape": )" + shape + R"(}},
            "nodes": [{"name": "Z", "einsum": "ij,jk->ik", "inputs": ["A", "B"]}]})");
    const Plan plan = plan_of(g, 2, PlanMethod::data);
    const Placement p = place(plan);
    const Relation& b = p.relations.at("B");
    Network net;
    net.latency_s = 1e-6, net.bandwidth = 1e9, net.local_latency_s = 1e-7;
    net.local_bandwidth = 1e10, net.ranks_per_host = 1;
    const auto t = predict_times(plan, p, net, [](const BatchedEinsum&) { return 0.0; });
    const double all_of_b = static_cast<double>(n * n * 8);
    if (n * n < (1 << 16)) {
      EXPECT_EQ(b.blocking.blocks(), 1) << n;
      EXPECT_EQ(t[0].link_bytes, all_of_b) << n;
    } else {
      ASSERT_EQ(b.blocking.blocks(), 2) << n;
      EXPECT_NE(b.owner[0], b.owner[1]) << n;
      EXPECT_EQ(t[0].link_bytes, all_of_b / 2) << n;
      EXPECT_EQ(t[0].host_bytes, all_of_b) << n;  // the same bytes in all, both ways at once
    }
  }
}

TEST(Network, StatedAndWrittenNetworksReadBackAndBadOnesAreNamed) {
  const Network n = parse_network("bandwidth=25e9,latency=2e-6,ranks_per_host=64");
  EXPECT_EQ(n.bandwidth, 25e9);
  EXPECT_EQ(n.latency_s, 2e-6);
  EXPECT_EQ(n.local_bandwidth, 250e9);
  EXPECT_EQ(n.ranks_per_host, 64);
  EXPECT_EQ(n.host_of(127), 1);
  const Network back = network_from_json(to_json(n), "here");
  EXPECT_DOUBLE_EQ(back.bandwidth, n.bandwidth);
  EXPECT_EQ(back.ranks_per_host, 64);
  auto refusal = [](const std::string& text) -> std::string {
    try {
      parse_network(text);
    } catch (const SpecError& e) {
      return e.what();
    }
    return "accepted";
  };
  EXPECT_NE(refusal("bandwidth=1e9").find("latency"), std::string::npos);
  EXPECT_NE(refusal("bandwidth=fast,latency=1").find("bandwidth must be a number"),
            std::string::npos);
  EXPECT_NE(refusal("bandwidth=1e9,latency=-1").find("latency must be positive"),
            std::string::npos);
  EXPECT_NE(refusal("bw=1e9,latency=1").find("'bw=1e9'"), std::string::npos);
  EXPECT_NE(refusal("bandwidth=1e9,latency=1,ranks_per_host=1.5").find("whole"), std::string::npos);
  EXPECT_THROW(network_from_json({{"latency_s", 1}}, "f"), SpecError);
}

}  // namespace
}  // namespace einsumdb
