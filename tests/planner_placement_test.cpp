// Placement of plans on ranks, and plan files read back against their graph.
#include <algorithm>
#include <set>

#include <gtest/gtest.h>

#include "einsumdb/core/error.hpp"
#include "einsumdb/planner/plan_file.hpp"
#include "einsumdb/tests/support/planner_graphs.hpp"

namespace einsumdb {
namespace {

const char* const kChain = testing::kSmallChain;
using testing::plan_of;

std::string refusal(const nlohmann::json& j, const EinGraph& g, std::int64_t procs) {
  try {
    read_plan(j, g, procs);
  } catch (const SpecError& e) {
    return e.what();
  }
  return "accepted";
}

TEST(Placement, EveryRankRunsOnePieceAndOwnsResultBlocksItComputes) {
  const EinGraph g = parse_eingraph_text(kChain);
  for (std::int64_t P : {1, 2, 4, 8})
    for (auto m : {PlanMethod::eindecomp, PlanMethod::sqrt, PlanMethod::data}) {
      const Plan plan = plan_of(g, P, m);
      const Placement p = place(plan);
      ASSERT_EQ(p.steps.size(), plan.graph.steps.size());
      for (std::size_t v = 0; v < p.steps.size(); ++v) {
        std::vector<int> ranks = p.steps[v].rank;
        std::sort(ranks.begin(), ranks.end());
        for (int k = 0; k < P; ++k) EXPECT_EQ(ranks[static_cast<std::size_t>(k)], k);
        const Relation& r = p.relations.at(plan.graph.steps[v].name);
        EXPECT_EQ(r.blocking.blocks() * p.steps[v].aggregated_parts, P);
        // Result blocks go to distinct ranks.
        std::set<int> owners(r.owner.begin(), r.owner.end());
        EXPECT_EQ(owners.size(), r.owner.size());
      }
      for (const auto& [name, t] : g.inputs) {
        const Relation& r = p.relations.at(name);
        EXPECT_EQ(r.blocking.shape, t.shape);
        for (int o : r.owner) EXPECT_TRUE(o >= 0 && o < P);
      }
      // The plan file round trip keeps the placement.
      const PlanFile back = read_plan(plan_file_json(plan, p), g, P);
      EXPECT_TRUE(back.placement_given);
      for (std::size_t v = 0; v < p.steps.size(); ++v)
        EXPECT_EQ(back.placement.steps[v].rank, p.steps[v].rank);
      for (const auto& [name, r] : p.relations) {
        EXPECT_EQ(back.placement.relations.at(name).owner, r.owner) << name;
        EXPECT_EQ(back.placement.relations.at(name).blocking, r.blocking) << name;
      }
      EXPECT_DOUBLE_EQ(back.plan.total, plan.total);
    }
}

TEST(Placement, PrefersRanksThatAlreadyHoldTheData) {
  // Z reads AB and CDE cut as Z is: with the data plan every piece finds its rows locally.
  const EinGraph g = parse_eingraph_text(kChain);
  const Plan plan = plan_of(g, 4, PlanMethod::data);
  const Placement p = place(plan);
  const int z = plan.graph.producer("Z"), ab = plan.graph.producer("AB");
  const auto& sz = p.steps[static_cast<std::size_t>(z)];
  const Relation& rab = p.relations.at("AB");
  for (std::int64_t q = 0; q < 4; ++q) {
    const Region need = operand_region(plan.graph.steps[static_cast<std::size_t>(z)], sz, q, "ij");
    // The block of AB holding these rows is owned by the piece's rank.
    const std::int64_t rows_part = need.start[0] * rab.blocking.parts[0] / 64;
    EXPECT_EQ(rab.owner[static_cast<std::size_t>(rab.blocking.index({rows_part, 0}))],
              sz.rank[static_cast<std::size_t>(q)]);
  }
  EXPECT_EQ(ab, 0);
}

TEST(Blocking, BalancedPartsCoverTheAxis) {
  Blocking b{{10, 7}, {4, 2}};
  EXPECT_EQ(b.blocks(), 8);
  std::int64_t covered = 0;
  for (std::int64_t k = 0; k < 4; ++k) covered += b.length(0, k);
  EXPECT_EQ(covered, 10);
  EXPECT_EQ(b.block_shape(b.index({3, 1})), (std::vector<std::int64_t>{3, 4}));
  EXPECT_EQ(b.coords(5), (std::vector<std::int64_t>{2, 1}));
  const Region r = b.region(b.index({3, 1}));
  EXPECT_EQ(r.start, (std::vector<std::int64_t>{7, 3}));
  EXPECT_EQ(r.length, (std::vector<std::int64_t>{3, 4}));
  Region both;
  EXPECT_TRUE(intersect(r, Region{{8, 0}, {10, 5}}, both));
  EXPECT_EQ(both.start, (std::vector<std::int64_t>{8, 3}));
  EXPECT_EQ(both.length, (std::vector<std::int64_t>{2, 2}));
  EXPECT_FALSE(intersect(r, Region{{0, 0}, {7, 7}}, both));
}

TEST(PlanFile, RefusesPlansThatDoNotFitWithTheMismatchNamed) {
  const EinGraph g = parse_eingraph_text(kChain);
  const Plan plan = plan_of(g, 4);
  const auto good = plan_file_json(plan, place(plan));
  EXPECT_EQ(refusal(good, g, 4), "accepted");
  EXPECT_NE(refusal(good, g, 2).find("the plan is for 4 ranks, but this job has 2"),
            std::string::npos);

  auto j = nlohmann::json::parse(good.dump());
  j["inputs"]["A"]["shape"] = {64, 49};
  EXPECT_NE(refusal(j, g, 4).find("'A' has shape [64,49], but the graph's has [64,48]"),
            std::string::npos);

  j = nlohmann::json::parse(good.dump());
  j["steps"][0]["einsum"] = "ij,jk->ki";
  EXPECT_NE(refusal(j, g, 4).find("but the graph needs 'AB' computing ij,jk->ik"),
            std::string::npos);

  j = nlohmann::json::parse(good.dump());
  j["steps"][0]["partition"] = {{"i", 2}, {"j", 1}, {"k", 1}};
  EXPECT_NE(refusal(j, g, 4).find("makes 2 pieces of work; a plan for 4 ranks needs exactly 4"),
            std::string::npos);

  j = nlohmann::json::parse(good.dump());
  j["steps"][0]["partition"] = {{"i", 3}, {"j", 1}, {"k", 1}};
  EXPECT_NE(refusal(j, g, 4).find("cannot be cut into 3 parts"), std::string::npos);

  j = nlohmann::json::parse(good.dump());
  j["trees"]["CDE"]["steps"][0]["left"] = 7;
  EXPECT_NE(refusal(j, g, 4).find("contraction tree of node 'CDE'"), std::string::npos);

  j = nlohmann::json::parse(good.dump());
  j["placement"]["steps"][1]["ranks"] = {0, 0, 1, 2};
  EXPECT_NE(refusal(j, g, 4).find("each rank one piece"), std::string::npos);

  j = nlohmann::json::parse(good.dump());
  j["placement"]["inputs"]["B"]["owners"][0] = 9;
  EXPECT_NE(refusal(j, g, 4).find("names rank 9"), std::string::npos);

  const EinGraph other = parse_eingraph_text(
      R"({"inputs": {"P": {"shape": [4, 4]}}, "nodes": [{"name": "Q", "einsum": "ij->ji",
      "inputs": ["P"]}]})");
  EXPECT_NE(refusal(good, other, 4).find("'P' is not in the plan"), std::string::npos);
  EXPECT_NE(refusal(nlohmann::json{{"format", "x"}}, g, 4).find("not a plan file"),
            std::string::npos);
}

TEST(PlanFile, WithoutPlacementPlacesTheFilesVectors) {
  const EinGraph g = parse_eingraph_text(kChain);
  const Plan plan = plan_of(g, 2, PlanMethod::sqrt);
  const auto pf = read_plan(to_json(plan), g, 2);
  EXPECT_FALSE(pf.placement_given);
  ASSERT_EQ(pf.plan.choice.size(), plan.choice.size());
  for (std::size_t v = 0; v < plan.choice.size(); ++v)
    EXPECT_EQ(pf.plan.choice[v].d, plan.choice[v].d);
  EXPECT_EQ(pf.placement.steps.size(), plan.graph.steps.size());
}

}  // namespace
}  // namespace einsumdb
