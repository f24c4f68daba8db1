// `einsumdb plan` as a user runs it: graph files, inline JSON and stdin, --tree with passes,
// baselines, --explain, plan files, recording into the database, --cost measured, and errors.
#include <gtest/gtest.h>

#include <fstream>

#include "einsumdb/tests/support/chain_graph.hpp"
#include "einsumdb/tests/support/run_cli.hpp"
#include "einsumdb/tests/support/temp_dir.hpp"

namespace {

using einsumdb::testing::run_cli;
using json = nlohmann::json;

const std::string kChain = einsumdb::testing::chain_graph(1000, 100, 1000, 100, 10000);

class CliPlan : public ::testing::Test {
 protected:
  einsumdb::testing::CliResult run(std::vector<std::string> args, const std::string& in = "") {
    args.push_back("--db");
    args.push_back(db());
    return run_cli(args, in);
  }
  std::string db() const { return dir_.path("plan.sqlite"); }
  einsumdb::testing::TempDir dir_{"cliplan"};
};

TEST_F(CliPlan, PlansAGraphFromAFileInlineOrStdin) {
  const std::string file = dir_.path("chain.json");
  std::ofstream(file) << kChain;
  for (const auto& [arg, in] :
       std::vector<std::pair<std::string, std::string>>{{file, ""}, {kChain, ""}, {"-", kChain}}) {
    const auto r = run({"plan", arg, "--procs", "8", "--json"}, in);
    ASSERT_EQ(r.code, 0) << r.err;
    const auto j = json::parse(r.out);
    EXPECT_EQ(j["format"], "einsumdb-plan");
    EXPECT_EQ(j["procs"], 8);
    EXPECT_EQ(j["search"], "exact");
    ASSERT_EQ(j["steps"].size(), 4u);
    EXPECT_EQ(j["steps"][1]["name"], "DE");
    EXPECT_EQ(j["steps"][1]["partition"], (json{{"i", 1}, {"j", 8}, {"k", 1}}));
    double sum = 0;
    for (const auto& s : j["steps"]) sum += s["predicted"]["total"].get<double>();
    EXPECT_DOUBLE_EQ(sum, j["predicted_total"].get<double>());
    EXPECT_LT(j["predicted_total"].get<double>(), j["baselines"]["sqrt"].get<double>());
    EXPECT_LT(j["predicted_total"].get<double>(), j["baselines"]["data"].get<double>());
  }
}

// On a slow stated network with two ranks per host, each method's plan is priced in seconds and
// the fastest is written (here sqrt: EinDecomp moves fewer numbers but loads one link more), its
// prediction per step summing to the total; --baseline keeps the method it names.
TEST_F(CliPlan, OnANetworkThePlanPredictedFastestIsWritten) {
  const std::string square = einsumdb::testing::chain_graph(200, 200, 200, 200, 200);
  const std::string net = "bandwidth=1e6,latency=1e-5,ranks_per_host=2";
  auto r = run({"plan", square, "-P", "4", "--network", net, "--json"});
  ASSERT_EQ(r.code, 0) << r.err;
  auto j = json::parse(r.out);
  const auto& seconds = j["method_seconds"];
  std::string fastest;
  for (const auto& [m, t] : seconds.items())
    if (fastest.empty() || t.get<double>() < seconds[fastest].get<double>()) fastest = m;
  EXPECT_EQ(fastest, "sqrt") << seconds;
  EXPECT_EQ(j["method"], fastest);
  EXPECT_TRUE(j.contains("chosen_by"));
  double sum = 0;
  for (const auto& s : j["steps"]) sum += s["predicted_time"]["seconds"].get<double>();
  EXPECT_DOUBLE_EQ(sum, j["predicted_seconds"].get<double>());
  EXPECT_EQ(j["predicted_seconds"], seconds["sqrt"]);
  EXPECT_TRUE(j["baselines"].contains("eindecomp") && j["baselines"].contains("data"));
  r = run({"plan", square, "-P", "4", "--network", net, "--baseline", "data", "--json"});
  ASSERT_EQ(r.code, 0) << r.err;
  j = json::parse(r.out);
  EXPECT_EQ(j["method"], "data");
  EXPECT_FALSE(j.contains("chosen_by"));
  EXPECT_EQ(j["predicted_seconds"], j["method_seconds"]["data"]);
  // The prediction at several P on a stated network.
  r = run_cli({"bench", "plan", "--s", "200", "--nodes", "12", "--repeat", "1", "--network", net,
               "--simulate", "4", "8", "--db", db()});
  ASSERT_EQ(r.code, 0) << r.err;
  const auto last = r.out.substr(r.out.rfind("\n{") + 1);
  const auto sim = json::parse(last)["simulation"];
  ASSERT_EQ(sim["rows"].size(), 4u);  // the chain and the DAG at P = 4 and 8
  for (const auto& row : sim["rows"])
    for (const char* m : {"eindecomp", "sqrt", "data"})
      EXPECT_GT(row[m]["seconds"].get<double>(), 0);
}

TEST_F(CliPlan, TableBaselineExplainAndPlanFile) {
  const std::string plan = dir_.path("plan.json");
  auto r = run({"plan", kChain, "-P", "4", "--table", "--explain", "CDE", "-o", plan});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("eindecomp (exact)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("alternatives for CDE"), std::string::npos);
  EXPECT_NE(r.out.find("plan written to"), std::string::npos);
  std::ifstream f(plan);
  const auto j = json::parse(f);
  EXPECT_EQ(j["explain"]["step"], "CDE");
  EXPECT_EQ(j["explain"]["alternatives"].size(), 6u);  // 3 labels, 2 doublings
  EXPECT_TRUE(j["explain"]["alternatives"][0]["chosen"].get<bool>());
  EXPECT_EQ(j["graph"]["nodes"].size(), 4u);

  r = run({"plan", kChain, "-P", "8", "--baseline", "sqrt", "--json"});
  ASSERT_EQ(r.code, 0) << r.err;
  const auto s = json::parse(r.out);
  EXPECT_EQ(s["method"], "sqrt");
  EXPECT_EQ(s["steps"][0]["partition"], (json{{"i", 2}, {"j", 2}, {"k", 2}}));
}

TEST_F(CliPlan, TreesWithPasses) {
  const std::string tree =
      "[[8,4],[7,3,8]->[7,3,4]],[[[2,6,7],[1,5,6]->[1,2,5,7]],[0,5]->[0,1,2,7]]->[0,1,2,3,4]";
  const auto r = run({"plan", "--tree", tree, "--sizes", "100,72,128,128,3,71,305,32,3", "-P", "4",
                      "--passes", "all", "--json"});
  ASSERT_EQ(r.code, 0) << r.err;
  const auto j = json::parse(r.out);
  EXPECT_EQ(j["tree_flops"], 39609704448.0);
  EXPECT_TRUE(j["passes"]["applied"].get<bool>());
  EXPECT_EQ(j["steps"].size(), 4u);
  const auto none =
      run({"plan", "--tree", tree, "--sizes", "100,72,128,128,3,71,305,32,3", "-P", "4", "--json"});
  ASSERT_EQ(none.code, 0) << none.err;
  EXPECT_FALSE(json::parse(none.out).contains("passes"));
}

TEST_F(CliPlan, ContractionTreeOptions) {
  const std::string g = R"({"inputs": {"A": {"shape": [100, 10]}, "B": {"shape": [10, 200]},
    "C": {"shape": [200, 5]}, "D": {"shape": [5, 300]}},
    "nodes": [{"name": "Z", "einsum": "ij,jk,kl,lm->im", "inputs": ["A", "B", "C", "D"]}]})";
  auto tree = [&](std::vector<std::string> extra) {
    std::vector<std::string> args{"plan", g, "-P", "2", "--json"};
    args.insert(args.end(), extra.begin(), extra.end());
    const auto r = run(args);
    EXPECT_EQ(r.code, 0) << r.err;
    return json::parse(r.out)["trees"]["Z"];
  };
  const auto exact = tree({});
  EXPECT_TRUE(exact["exact"].get<bool>());
  EXPECT_EQ(exact["steps"].size(), 3u);
  EXPECT_FALSE(tree({"--exact-limit", "3"})["exact"].get<bool>());  // greedy beyond 3 operands
  // A chain whose cheapest order keeps a 1×1000 intermediate; under a limit of 999 elements the
  // other order (a 2×2 intermediate, 8 more FLOPs) is chosen.
  const std::string chain = R"({"inputs": {"A": {"shape": [1, 2]}, "B": {"shape": [2, 1000]},
    "C": {"shape": [1000, 2]}}, "nodes": [{"name": "Z", "einsum": "ij,jk,kl->il",
    "inputs": ["A", "B", "C"]}]})";
  auto chain_tree = [&](std::vector<std::string> extra) {
    std::vector<std::string> args{"plan", chain, "-P", "1", "--json"};
    args.insert(args.end(), extra.begin(), extra.end());
    const auto r = run(args);
    EXPECT_EQ(r.code, 0) << r.err;
    return json::parse(r.out)["trees"]["Z"];
  };
  const auto fastest = chain_tree({});
  EXPECT_EQ(fastest["largest_intermediate"], 1000.0);
  EXPECT_EQ(fastest["flops"], 8000.0);
  const auto limited = chain_tree({"--memory-limit", "999"});
  EXPECT_EQ(limited["largest_intermediate"], 4.0);
  EXPECT_EQ(limited["flops"], 8008.0);
  const auto none = run({"plan", g, "-P", "2", "--memory-limit", "1"});
  EXPECT_EQ(none.code, 2);
  EXPECT_NE(none.err.find("memory limit"), std::string::npos) << none.err;
}

TEST_F(CliPlan, RecordsAndUsesMeasuredCosts) {
  auto r = run({"plan", kChain, "-P", "4", "--record", "--json"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(json::parse(r.out)["recorded"]["partitionings"], 4);
  const auto stats = run({"stats", "--json"});
  ASSERT_EQ(stats.code, 0) << stats.err;
  EXPECT_EQ(json::parse(stats.out)["partitionings"], 4);
  // Nothing has been measured yet: --cost measured falls back to the model, same plan.
  r = run({"plan", kChain, "-P", "4", "--cost", "measured", "--json"});
  ASSERT_EQ(r.code, 0) << r.err;
  const auto j = json::parse(r.out);
  EXPECT_EQ(j["measured"]["partitionings_on_this_machine"], 0);
  EXPECT_EQ(j["measured"]["pairwise_steps_with_measured_times"], 0);
  EXPECT_EQ(j["cost"], "measured");
  // Without a database, a notice and the model.
  const auto nodb = run_cli({"plan", kChain, "-P", "4", "--cost", "measured", "--json", "--db",
                             dir_.path("absent.sqlite")});
  ASSERT_EQ(nodb.code, 0) << nodb.err;
  EXPECT_NE(nodb.err.find("no database"), std::string::npos);
}

TEST_F(CliPlan, BadInputIsAClearErrorWithExitCode2) {
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"plan", kChain, "-P", "6"}, "power of two"},
      {{"plan", R"({"inputs": {}, "nodes": [{"name": "T", "einsum": "ij->i", "inputs": ["Q"]}]})",
        "-P", "2"},
       "node 'T': input 'Q'"},
      {{"plan", kChain, "-P", "2", "--explain", "NOPE"}, "no step named 'NOPE'"},
      {{"plan", kChain, "-P", "2", "--cost", "fast"}, "--cost must be comm or measured"},
      {{"plan", kChain, "-P", "2", "--baseline", "eindecomp"}, "--baseline must be sqrt or data"},
      {{"plan", "--tree", "[0,1],[1,2]->[0,2]", "-P", "2"}, "--tree needs --sizes"},
      {{"plan", "--tree", "[0,1],[1,2]->[0,2]", "--sizes", "4,x,6", "-P", "2"}, "'x'"},
      {{"plan", "--tree", "[0,1],[1,2]->[0,2]", "--sizes", "4,5,6", "-P", "2", "--passes", "zap"},
       "unknown pass 'zap'"},
      {{"plan", kChain, "-P", "2", "--passes", "swap"}, "give it with --tree"},
      {{"plan", "-P", "2"}, "give a GRAPH"},
  };
  for (const auto& [args, message] : cases) {
    const auto r = run(args);
    EXPECT_EQ(r.code, 2) << args[1] << "\n" << r.err;
    EXPECT_NE(r.err.find(message), std::string::npos) << r.err << "\nwanted: " << message;
  }
  const auto absent = run({"plan", dir_.path("missing.json"), "-P", "2"});
  EXPECT_EQ(absent.code, 1);  // like every command, a file that cannot be read is a runtime error
  EXPECT_NE(absent.err.find("cannot open"), std::string::npos) << absent.err;
  const auto missing = run({"plan", kChain});  // --procs is required
  EXPECT_EQ(missing.code, 2);
  const auto help = run_cli({"plan", "--help"});
  EXPECT_EQ(help.code, 0);
  EXPECT_NE(help.out.find("--explain"), std::string::npos);
  EXPECT_NE(run_cli({"bench", "plan", "--help"}).out.find("--nodes"), std::string::npos);
}

}  // namespace
