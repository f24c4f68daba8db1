// einsumdb tune and run through the real executable: the tune → best → run round trip on a
// renamed, re-ordered spelling, .npy inputs and outputs checked against numpy, functional
// operands, the fallback notice, and bad input.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <fstream>
#include <limits>
#include <regex>
#include <set>
#include <thread>

#include <gtest/gtest.h>

#include "einsumdb/tests/support/run_cli.hpp"
#include "einsumdb/tests/support/temp_dir.hpp"

namespace {

using einsumdb::testing::run_cli;
using json = nlohmann::json;

class CliTune : public ::testing::Test {
 protected:
  einsumdb::testing::CliResult run(std::vector<std::string> args) {
    args.push_back("--db");
    args.push_back(db_);
    return run_cli(args, "", {"OPENBLAS_NUM_THREADS=1"});
  }
  int python(const std::string& script) {
    const std::string path = dir_.path("script.py");
    std::ofstream(path) << "import numpy as np\n" << script;
    return std::system((std::string(EINSUMDB_PYTHON) + " " + path).c_str());
  }
  einsumdb::testing::TempDir dir_{"clitune"};
  std::string db_ = dir_.path("facts.sqlite");
};

const std::vector<std::string> kQuick = {"--warmup", "1", "--min-reps", "3", "--min-time", "0"};

std::vector<std::string> with(std::vector<std::string> a, const std::vector<std::string>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

TEST_F(CliTune, TuneBestRunRoundTripOnARenamedSpelling) {
  const std::string spec =
      R"({"einsum":"ik,kj->ij","batch":[["A","B"]],"shapes":{"A":[48,40],"B":[40,56]}})";
  auto r = run(with({"tune", spec, "--json", "--threads", "1,2"}, kQuick));
  ASSERT_EQ(r.code, 0) << r.err;
  const json tuned = json::parse(r.out);
  EXPECT_EQ(tuned["measured"], tuned["candidates"]);
  EXPECT_GT(tuned["candidates"].get<int>(), 10);
  EXPECT_EQ(tuned["time_limit_reached"], false);  // a small workload: no probe, no time limit
  EXPECT_EQ(tuned["not_measured"], 0);
  const json winner = tuned["results"][0];
  ASSERT_EQ(winner["status"], "ok");
  EXPECT_GT(winner["gflops"].get<double>(), 0);
  EXPECT_GT(winner["roofline_fraction"].get<double>(), 0);
  for (const auto& row : tuned["results"]) EXPECT_NE(row["status"], "failed") << row;

  // The same product as Z[p,q] = Σ_r X[r,q] · Y[p,r]: operands swapped, every name changed.
  const std::string respelled =
      R"({"einsum":"rq,pr->pq","batch":[["X","Y"]],"shapes":{"X":[40,56],"Y":[48,40]}})";
  r = run({"best", respelled, "--json"});
  ASSERT_EQ(r.code, 0) << r.err;
  const json best = json::parse(r.out);
  EXPECT_EQ(best["transform"], winner["strategy"]);
  // Its parameters are in the new names: no index of the tuned spelling survives.
  const std::string params = best["params"].dump();
  for (const char* old : {"\"index\":\"i\"", "\"index\":\"j\"", "\"index\":\"k\""})
    EXPECT_EQ(params.find(old), std::string::npos) << params;

  ASSERT_EQ(python("np.random.seed(4)\n"
                   "np.save('" +
                   dir_.path("X.npy") +
                   "', np.random.rand(40, 56))\n"
                   "np.save('" +
                   dir_.path("Y.npy") + "', np.random.rand(48, 40))\n"),
            0);
  r = run({"run", respelled, "--inputs", dir_.path("X.npy"), "Y=" + dir_.path("Y.npy"), "--output",
           dir_.path("Z.npy"), "--repeat", "3", "--verify", "--json"});
  ASSERT_EQ(r.code, 0) << r.err;
  const json ran = json::parse(r.out);
  EXPECT_EQ(ran["source"], "best known");
  EXPECT_EQ(ran["transform"]["strategy"], winner["strategy"]);
  EXPECT_EQ(ran["transform"]["params"], best["params"]);
  EXPECT_TRUE(ran["verified"].get<bool>());
  EXPECT_TRUE(ran["generated_inputs"].empty());
  EXPECT_EQ(python("X = np.load('" + dir_.path("X.npy") +
                   "')\n"
                   "Y = np.load('" +
                   dir_.path("Y.npy") +
                   "')\n"
                   "Z = np.load('" +
                   dir_.path("Z.npy") +
                   "')\n"
                   "assert Z.shape == (48, 56), Z.shape\n"
                   "assert np.allclose(Z, np.einsum('rq,pr->pq', X, Y), rtol=1e-12), 'differs'\n"),
            0);
}

// numpy's forms from the command line: "..." and a size-1 axis that broadcasts, with .npy inputs
// as numpy holds them (the broadcast axis included), complex128 data, and an axis of length 0;
// each checked against numpy.einsum on the same files.
TEST_F(CliTune, EllipsisBroadcastingComplexAndEmptyAxesRunAsNumpy) {
  ASSERT_EQ(python("rng = np.random.default_rng(5)\n"
                   "np.save('" +
                   dir_.path("A.npy") +
                   "', rng.standard_normal((6, 1, 3, 4)))\n"
                   "np.save('" +
                   dir_.path("B.npy") +
                   "', rng.standard_normal((5, 4, 2)))\n"
                   "np.save('" +
                   dir_.path("C.npy") +
                   "', rng.standard_normal((3, 4)) + "
                   "1j * rng.standard_normal((3, 4)))\n"
                   "np.save('" +
                   dir_.path("D.npy") +
                   "', rng.standard_normal((4, 2)) - "
                   "1j * rng.standard_normal((4, 2)))\n"),
            0);
  auto r = run({"run", "...ij,...jk->...ik", "--shape", "A=6x1x3x4", "B=5x4x2", "--inputs",
                dir_.path("A.npy"), dir_.path("B.npy"), "--output", dir_.path("Z.npy"), "--verify",
                "--json"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(json::parse(r.out)["verified"].get<bool>());
  EXPECT_EQ(python("Z = np.load('" + dir_.path("Z.npy") +
                   "')\n"
                   "W = np.einsum('...ij,...jk->...ik', np.load('" +
                   dir_.path("A.npy") + "'), np.load('" + dir_.path("B.npy") +
                   "'))\n"
                   "assert Z.shape == W.shape == (6, 5, 3, 2), (Z.shape, W.shape)\n"
                   "assert np.allclose(Z, W, rtol=1e-12)\n"),
            0);
  r = run({"run", "ij,jk->ik", "--shape", "C=3x4", "D=4x2", "--batch", "C,D", "--dtype", "c128",
           "--inputs", dir_.path("C.npy"), dir_.path("D.npy"), "--output", dir_.path("Y.npy"),
           "--verify", "--json"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(
      python("Y = np.load('" + dir_.path("Y.npy") +
             "')\n"
             "assert Y.dtype == np.complex128\n"
             "assert np.allclose(Y, np.load('" +
             dir_.path("C.npy") + "') @ np.load('" + dir_.path("D.npy") + "'), rtol=1e-12)\n"),
      0);
  r = run({"run", "ij,jk->ik", "--shape", "A=2x0", "B=0x3", "--verify", "--json"});
  ASSERT_EQ(r.code, 0) << r.err;
  // The broadcast spelling and the one without the size-1 axis are one computation, one key.
  const auto k1 = run_cli({"canon", "ij,ij->j", "--shape", "A=10x2", "B=1x2"});
  const auto k2 = run_cli({"canon", "ij,j->j", "--shape", "A=10x2", "B=2"});
  const auto k3 = run_cli({"canon", "ij,ij->j", "--shape", "A=10x2", "B=10x2"});
  ASSERT_EQ(k1.code, 0) << k1.err;
  EXPECT_EQ(json::parse(k1.out)["key"], json::parse(k2.out)["key"]);
  EXPECT_NE(json::parse(k1.out)["key"], json::parse(k3.out)["key"]);
}

// Complex and mixed workloads are facts like any other: a c128 product is tuned (every strategy
// measured and verified, held to a roofline), found again under another spelling, and not under
// the same spelling in f64; a product of an f64 and a c128 operand (computed in c128) is found
// with its operands swapped and renamed, and not with the dtypes the other way round (then the
// real operand shares the output's other index: another computation); each runs verified.
TEST_F(CliTune, ComplexAndMixedWorkloadsAreStoredFoundAndRunUnderTheirOwnKeys) {
  auto r = run(with(
      {"tune", "ik,kj->ij", "--shape", "A=24x20", "B=20x28", "--dtype", "c128", "--json"}, kQuick));
  ASSERT_EQ(r.code, 0) << r.err;
  const json tuned = json::parse(r.out);
  std::set<std::string> strategies;  // measured: verified, or stopped by the race
  for (const auto& row : tuned["results"]) {
    EXPECT_NE(row["status"], "failed") << row;
    strategies.insert(row["strategy"].get<std::string>());
  }
  for (const char* s : {"loop_nest", "ttgt", "loop_over_gemm", "tensor_gemm"})
    EXPECT_TRUE(strategies.count(s)) << s << " measured";
  EXPECT_EQ(tuned["roofline"]["dtype"], "c128");
  const json winner = tuned["results"][0];
  EXPECT_GT(winner["roofline_fraction"].get<double>(), 0);
  r = run({"best", "rq,pr->pq", "--shape", "X=20x28", "Y=24x20", "--batch", "X,Y", "--dtype",
           "c128", "--json"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(json::parse(r.out)["transform"], winner["strategy"]);
  r = run({"best", "rq,pr->pq", "--shape", "X=20x28", "Y=24x20", "--batch", "X,Y", "--json"});
  EXPECT_EQ(r.code, 3) << "an f64 product is another workload: " << r.out;

  r = run(with({"tune", "ik,kj->ij", "--shape", "A=24x20", "B=20x28", "--dtype", "A=f64", "--dtype",
                "B=c128", "--json"},
               kQuick));
  ASSERT_EQ(r.code, 0) << r.err;
  const json mixed = json::parse(r.out);
  EXPECT_EQ(mixed["roofline"]["dtype"], "c128");
  r = run({"best", "rq,pr->pq", "--shape", "X=20x28", "Y=24x20", "--batch", "X,Y", "--dtype",
           "X=c128", "--dtype", "Y=f64", "--json"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(json::parse(r.out)["transform"], mixed["results"][0]["strategy"]);
  r = run({"best", "rq,pr->pq", "--shape", "X=20x28", "Y=24x20", "--batch", "X,Y", "--dtype",
           "X=f64", "--dtype", "Y=c128", "--json"});
  EXPECT_EQ(r.code, 3) << "the real operand on the other side is another workload: " << r.out;
  r = run({"run", "rq,pr->pq", "--shape", "X=20x28", "Y=24x20", "--batch", "X,Y", "--dtype",
           "X=c128", "--dtype", "Y=f64", "--verify", "--json"});
  ASSERT_EQ(r.code, 0) << r.err;
  const json ran = json::parse(r.out);
  EXPECT_EQ(ran["source"], "best known");
  EXPECT_TRUE(ran["verified"].get<bool>());
  // The table's rate says how a complex multiply-add is counted; a real one's says nothing.
  r = run({"run", "ik,kj->ij", "--shape", "A=24x20", "B=20x28", "--dtype", "c128", "--table"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("GFLOP/s (a complex multiply-add counts 8 FLOPs)"), std::string::npos)
      << r.out;
  r = run({"run", "ik,kj->ij", "--shape", "A=24x20", "B=20x28", "--table"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out.find("complex"), std::string::npos) << r.out;
}

TEST_F(CliTune, ASymbolicWorkloadTunedOnceServesEveryLength) {
  // A DG-FEM style operator: Ne elements, each u_e = Σ_k M[i,k] v_e[k]; Ne known at run time.
  const std::string symbolic =
      R"({"einsum":"ik,ek->ei","batch":[["M","V"]],"shapes":{"M":[6,4],"V":["Ne",4]}})";
  auto r = run(with(
      {"tune", symbolic, "--bind", "Ne=2000", "--strategies", "loop_nest,ttgt", "--json"}, kQuick));
  ASSERT_EQ(r.code, 0) << r.err;
  const json tuned = json::parse(r.out);
  EXPECT_EQ(tuned["binding"], (json{{"Ne", 2000}}));
  EXPECT_DOUBLE_EQ(tuned["work_flops"].get<double>(), 2.0 * 2000 * 6 * 4);
  const std::string winner = tuned["results"][0]["strategy"];

  // A concrete length, respelled: answered by the symbolic fact, which says so.
  const std::string concrete =
      R"({"einsum":"xq,yq->xy","batch":[["W","P"]],"shapes":{"W":[777,4],"P":[6,4]}})";
  r = run({"best", concrete, "--json"});
  ASSERT_EQ(r.code, 0) << r.err;
  const json best = json::parse(r.out);
  EXPECT_EQ(best["match"], "symbolic");
  EXPECT_EQ(best["binding"], (json{{"N0", 777}}));
  EXPECT_EQ(best["measured_at"], (json::array({{{"N0", 2000}}})));
  EXPECT_EQ(best["transform"], winner);
  // The symbolic spec asked for one size: the same answer.
  r = run({"best", symbolic, "--bind", "Ne=777", "--json"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(json::parse(r.out)["match"], "symbolic");
  EXPECT_EQ(json::parse(r.out)["binding"], (json{{"N0", 777}}));
  r = run({"best", concrete, "--table"});
  EXPECT_NE(r.out.find("symbolic: measured on the symbolic form"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("N0=2000"), std::string::npos) << r.out;

  // run: the concrete spec, the symbolic one with --bind, and the symbolic one bound by its data.
  r = run({"run", concrete, "--verify", "--json"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(json::parse(r.out)["source"], "best known for its symbolic form");
  EXPECT_EQ(json::parse(r.out)["transform"]["strategy"], winner);
  r = run({"run", symbolic, "--bind", "Ne=300", "--verify", "--json"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(json::parse(r.out)["source"], "best known for its symbolic form");
  ASSERT_EQ(python("np.save('" + dir_.path("V.npy") + "', np.random.rand(123, 4))\n"), 0);
  r = run({"run", symbolic, "--inputs", dir_.path("V.npy"), "--output", dir_.path("U.npy"),
           "--verify", "--json"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(json::parse(r.out)["generated_inputs"], (json::array({"M"})));
  EXPECT_EQ(python("U = np.load('" + dir_.path("U.npy") + "')\nassert U.shape == (123, 6)\n"), 0);
  // A length given twice, differently.
  r = run({"run", symbolic, "--bind", "Ne=5", "--inputs", dir_.path("V.npy")});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("axis 0 has length 123 but the spec says 5"), std::string::npos) << r.err;
  // Nothing binds Ne: said so, with the way out.
  r = run({"run", symbolic});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("--bind Ne=N"), std::string::npos) << r.err;
}

TEST_F(CliTune, TuneTableShowsRatesAndTheRoofline) {
  auto r = run(with({"tune", "ij,j->i", "--shape", "A=64x32", "B=32", "--table", "--strategies",
                     "loop_nest,ttgt"},
                    kQuick));
  ASSERT_EQ(r.code, 0) << r.err;
  for (const char* s : {"GFLOP/s", "roofline", "loop_nest", "ttgt", "ok", "per core"})
    EXPECT_NE(r.out.find(s), std::string::npos) << s << "\n" << r.out;
  // Progress: the current candidate, done/total and the best so far.
  r = run(with({"tune", "ij,j->i", "--shape", "A=64x32", "B=32", "--json", "--progress",
                "--strategies", "ttgt"},
               kQuick));
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.err.find("[1/"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("best"), std::string::npos) << r.err;
}

// A memory-shaped workload (a large operand and result, four summed elements): the tune runs its
// winner and the untuned default in processes of their own, as `einsumdb run` would, and says how
// far each was from its time in the tune; the winner is not slower there than the default beyond
// the spread of the processes' own times. Those times and `einsumdb run` of the store's answer
// are what a user gets, so the store's answer must not be slower than no answer.
TEST_F(CliTune, TheWinnerInAProcessOfItsOwnIsNoSlowerThanTheDefault) {
  const std::vector<std::string> spec = {"abk,kc->abc", "--shape", "A=256x256x4", "B=4x8"};
  auto r = run(with(with({"tune"}, spec), {"--json", "--standalone", "3", "--warmup", "2",
                                           "--min-reps", "5", "--min-time", "0.05"}));
  ASSERT_EQ(r.code, 0) << r.err;
  const json tuned = json::parse(r.out);
  const json& s = tuned["standalone"];
  ASSERT_TRUE(s.is_object()) << tuned.dump(1);
  ASSERT_TRUE(s.contains("winner")) << s.dump(1);
  for (const char* who : {"winner", "default"}) {
    if (!s.contains(who)) continue;  // the winner is the default
    const json& w = s[who];
    ASSERT_EQ(w["runs"].size(), 3u) << w.dump();
    EXPECT_GT(w["standalone_median_s"].get<double>(), 0) << w.dump();
    EXPECT_GT(w["in_tune_over_standalone"].get<double>(), 0) << w.dump();
  }
  if (s.contains("default")) {
    const auto winner = s["winner"]["runs"].get<std::vector<double>>();
    const auto fallback = s["default"]["runs"].get<std::vector<double>>();
    EXPECT_LE(*std::min_element(winner.begin(), winner.end()),
              *std::max_element(fallback.begin(), fallback.end()))
        << "the store's answer is slower than the untuned default in every process: " << s.dump(1);
  }
  // The answer `run` takes from the store is the winner.
  r = run(with(with({"run"}, spec), {"--json"}));
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(json::parse(r.out)["transform"]["strategy"], s["winner"]["strategy"]);

  // --standalone 0 skips the check; the table shows it.
  r = run(with(with({"tune"}, spec), with({"--json", "--standalone", "0"}, kQuick)));
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(json::parse(r.out)["standalone"].is_null()) << r.out;
  r = run(
      with(with({"tune"}, spec), with({"--table", "--strategies", "tensor_gemm,ttgt"}, kQuick)));
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("in processes of their own"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("winner"), std::string::npos) << r.out;
  r = run(with(with({"tune"}, spec), {"--standalone", "-1"}));
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.err.find("--standalone"), std::string::npos) << r.err;
}

// A large workload's time limit is the whole command's: the standalone check runs in what the
// search leaves of it, and where it would not fit it is skipped, saying why. Without a limit it
// runs.
TEST_F(CliTune, TheStandaloneCheckRunsWithinTheTimeLimit) {
  const std::vector<std::string> spec = {"ij,jk->ik", "--shape", "A=600x600", "B=600x600",
                                         "--dtype",   "f32"};  // 2^27.7 iterations: probed
  const std::vector<std::string> quick = {
      "--json",     "--strategies", "tensor_gemm,ttgt", "--warmup", "1", "--min-reps", "3",
      "--min-time", "0.05"};
  auto r = run(with(with({"tune"}, spec), with(quick, {"--time-limit", "0.01"})));
  ASSERT_EQ(r.code, 0) << r.err;
  json tuned = json::parse(r.out);
  ASSERT_GT(tuned["probed"].get<int>(), 0) << tuned.dump(1);
  const json& s = tuned["standalone"];
  ASSERT_TRUE(s.is_object() && s.contains("skipped")) << tuned.dump(1);
  EXPECT_NE(s["skipped"].get<std::string>().find("time limit"), std::string::npos) << s.dump();
  EXPECT_GT(s["expected_s"].get<double>(), s["left_s"].get<double>()) << s.dump();
  EXPECT_FALSE(s.contains("winner")) << s.dump();
  EXPECT_NE(r.err.find("the standalone check was skipped"), std::string::npos) << r.err;

  r = run(with(with({"tune"}, spec), with(quick, {"--time-limit", "0"})));
  ASSERT_EQ(r.code, 0) << r.err;
  tuned = json::parse(r.out);
  EXPECT_TRUE(tuned["standalone"].contains("winner")) << tuned.dump(1);
  EXPECT_EQ(r.err.find("skipped"), std::string::npos) << r.err;
  EXPECT_TRUE(tuned["search_time_limit_s"].is_null()) << tuned.dump(1);
}

// Of a large workload's time limit, the search's share leaves half a second (a twentieth of a limit
// under 10 s) for the process's start and end, and what the set-up before the search took.
TEST_F(CliTune, TheSearchLeavesPartOfTheTimeLimitForTheProcesssStartAndEnd) {
  const std::vector<std::string> spec = {"ij,jk->ik", "--shape", "A=600x600", "B=600x600",
                                         "--dtype",   "f32"};  // 2^27.7 iterations: probed
  for (const auto& [limit, reserve] : {std::pair{100.0, 0.5}, {4.0, 0.2}}) {
    const auto t0 = std::chrono::steady_clock::now();
    auto r = run(
        with(with({"tune"}, spec),
             {"--json", "--strategies", "tensor_gemm,ttgt", "--warmup", "1", "--min-reps", "3",
              "--min-time", "0.05", "--standalone", "0", "--time-limit", std::to_string(limit)}));
    const double wall =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    ASSERT_EQ(r.code, 0) << r.err;
    const json tuned = json::parse(r.out);
    ASSERT_GT(tuned["probed"].get<int>(), 0) << tuned.dump(1);
    ASSERT_TRUE(tuned["search_time_limit_s"].is_number()) << tuned.dump(1);
    const double share = tuned["search_time_limit_s"].get<double>();
    EXPECT_LE(share, limit - reserve) << "limit " << limit;
    EXPECT_GT(share, limit - reserve - wall) << "limit " << limit;
  }
}

// The skipped check's estimate: each process generates the arrays, then takes five runs at the
// candidate's median in the tune (its four timed runs and the first run's fresh pages); a run of
// 0.1 s and more makes five runs the larger term.
TEST_F(CliTune, TheStandaloneChecksEstimateCountsFiveRunsAProcess) {
  const std::vector<std::string> spec = {"ij,jk->ik",   "--shape", "A=2000x2000",
                                         "B=2000x2000", "--dtype", "f32"};  // 16 GFLOP a run
  auto r = run(with(with({"tune"}, spec),
                    {"--json", "--strategies", "tensor_gemm,ttgt", "--warmup", "1", "--min-reps",
                     "3", "--min-time", "0.05", "--time-limit", "0.01"}));
  ASSERT_EQ(r.code, 0) << r.err;
  const json tuned = json::parse(r.out);
  const json& s = tuned["standalone"];
  ASSERT_TRUE(s.is_object() && s.contains("processes")) << tuned.dump(1);
  const int rounds = s["rounds"].get<int>();
  EXPECT_GE(rounds, 1);
  double total = 0;
  for (const json& p : s["processes"]) {
    const double m = p["median_s"].get<double>();
    ASSERT_GT(m, 0.025) << "a run this short makes 0.1 s the larger term: " << p.dump();
    EXPECT_NEAR(p["expected_s"].get<double>(), p["arrays_s"].get<double>() + 5 * m, 1e-9)
        << p.dump();
    total += rounds * p["expected_s"].get<double>();
  }
  EXPECT_NEAR(s["expected_s"].get<double>(), total, 1e-9) << s.dump();
  // The winner's process counts at its median in the tune.
  const json& winner = s["processes"][0];
  EXPECT_EQ(winner["who"], "winner");
  double best = std::numeric_limits<double>::infinity();
  for (const json& x : tuned["results"])
    if (x["status"] == "ok") best = std::min(best, x["median_s"].get<double>());
  EXPECT_DOUBLE_EQ(winner["median_s"].get<double>(), best);
}

TEST_F(CliTune, RunFallsBackToADefaultWithANotice) {
  auto r = run({"run", "ij,jk->ik", "--shape", "A=20x30", "B=30x10", "--verify", "--json"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.err.find("no verified transform is known"), std::string::npos) << r.err;
  const json ran = json::parse(r.out);
  EXPECT_EQ(ran["source"], "default");
  EXPECT_EQ(ran["transform"]["strategy"], "tensor_gemm");  // the first by priority
  EXPECT_EQ(ran["generated_inputs"], json({"A", "B"}));
  EXPECT_TRUE(ran["verified"].get<bool>());

  // --min-time: past --repeat's count until the runs add up to it; "repeat" says how many ran.
  // A run takes microseconds, so two runs reach 0.2 s only if the process is stalled that long.
  r = run({"run", "ij,jk->ik", "--shape", "A=20x30", "B=30x10", "--repeat", "2", "--min-time",
           "0.2", "--json"});
  ASSERT_EQ(r.code, 0) << r.err;
  const json timed = json::parse(r.out);
  EXPECT_GT(timed["repeat"].get<int>(), 2);
  EXPECT_GE(timed["repeat"].get<double>() * timed["median_s"].get<double>(), 0.01);

  r = run({"run", "ij,jk->ik", "--shape", "A=20x30", "B=30x10", "--transform", "loop_nest",
           "--param", "order=kij", "--param", "threads=2", "--verify", "--json"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(json::parse(r.out)["transform"]["params"]["order"][0]["index"], "k");

  // index:size parameters: a tiled contraction tree and a blocked loop nest, verified.
  r = run({"run", "xre,rij,ej->xei", "--shape", "A=2x3x40", "B=3x4x5", "C=40x5", "--transform",
           "contraction_tree", "--param", "tile=e:16", "--verify", "--table"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("contraction_tree tile=e:16"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("verify: max relative error"), std::string::npos) << r.out;
  r = run({"run", "ij,jk->ik", "--shape", "A=20x30", "B=30x10", "--transform", "loop_nest",
           "--param", "block=i:8,k:4", "--verify", "--json"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(json::parse(r.out)["transform"]["params"]["block"],
            json::parse(R"([[{"index": "i"}, 8], [{"index": "k"}, 4]])"));
  r = run({"run", "xre,rij,ej->xei", "--shape", "A=2x3x40", "B=3x4x5", "C=40x5", "--transform",
           "contraction_tree", "--param", "tile=j:16"});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("cannot tile index 'j'"), std::string::npos) << r.err;
}

TEST_F(CliTune, RunsFunctionalOperandsAndBatches) {
  const std::string spec =
      R"({"einsum":"ij,j->i","batch":[["A","S"],["A","T"]],"shapes":{"A":[30,20],"q":[20],"r":[20]},)"
      R"J("functions":{"S":"sin(q)","T":"2*r+1"}})J";
  ASSERT_EQ(python("np.save('" + dir_.path("A.npy") +
                   "', np.random.rand(30, 20))\n"
                   "np.save('" +
                   dir_.path("q.npy") +
                   "', np.random.rand(20))\n"
                   "np.save('" +
                   dir_.path("r.npy") + "', np.random.rand(20))\n"),
            0);
  auto r = run({"run", spec, "--inputs", dir_.path("A.npy"), dir_.path("q.npy"), dir_.path("r.npy"),
                "--output", dir_.path("y.npy"), "--verify", "--json"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(json::parse(r.out)["transform"]["strategy"], "batch_fused");
  EXPECT_EQ(python("A = np.load('" + dir_.path("A.npy") +
                   "')\n"
                   "q = np.load('" +
                   dir_.path("q.npy") +
                   "')\n"
                   "r = np.load('" +
                   dir_.path("r.npy") +
                   "')\n"
                   "assert np.allclose(np.load('" +
                   dir_.path("y.0.npy") +
                   "'), A @ np.sin(q))\n"
                   "assert np.allclose(np.load('" +
                   dir_.path("y.1.npy") + "'), A @ (2*r+1))\n"),
            0);
  // The functional einsum tunes and looks up as its idealized form.
  r = run(with({"tune", spec, "--json", "--strategies", "batch_fused"}, kQuick));
  ASSERT_EQ(r.code, 0) << r.err;
  r = run({"run", spec, "--json"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(json::parse(r.out)["source"], "best known");
}

// Ctrl-C: the tune stops after the candidate being measured, keeps what it measured, exits 130.
TEST_F(CliTune, AnInterruptedTuneKeepsItsMeasurements) {
  const std::string err_path = dir_.path("tune.err");
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    std::freopen(err_path.c_str(), "w", stderr);
    std::freopen("/dev/null", "w", stdout);
    setenv("OPENBLAS_NUM_THREADS", "1", 1);
    execl(EINSUMDB_BIN, EINSUMDB_BIN, "tune", "ik,kj->ij", "--shape", "A=160x160", "B=160x160",
          "--min-time", "0.3", "--warmup", "1", "--db", db_.c_str(), "--json", "--progress",
          static_cast<char*>(nullptr));
    _exit(127);
  }
  // Interrupted once it has verified a candidate (however loaded the machine is), mid-search:
  // the progress line then names the best so far.
  for (int i = 0; i < 300; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    std::ifstream progress(err_path);
    if (std::string((std::istreambuf_iterator<char>(progress)), {}).find("| best") !=
        std::string::npos)
      break;
  }
  kill(pid, SIGINT);
  int status = 0;
  for (int i = 0; i < 600 && waitpid(pid, &status, WNOHANG) == 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  ASSERT_TRUE(WIFEXITED(status)) << "tune did not end within 30 s of SIGINT";
  EXPECT_EQ(WEXITSTATUS(status), 130);
  std::ifstream err(err_path);
  const std::string text((std::istreambuf_iterator<char>(err)), {});
  EXPECT_NE(text.find("interrupted"), std::string::npos) << text;
  const auto r = run({"show", "ik,kj->ij", "--shape", "A=160x160", "B=160x160", "--json"});
  ASSERT_EQ(r.code, 0) << r.err;
  const json shown = json::parse(r.out);
  EXPECT_NE(shown.dump().find("\"status\":\"ok\""), std::string::npos) << r.out;
}

// `einsumdb tune ... | READER` through a real shell pipe whose reader exits early. `head -1` may
// or may not leave before tune writes (timing); `true` leaves at once, so tune surely writes into
// a closed pipe. Either way every measurement taken is in the database, which passes db check.
TEST_F(CliTune, AClosedStdoutLosesNoMeasurement) {
  const std::string spec = "ik,kj->ij";
  struct Reader {
    std::string command;
    std::vector<int> codes;  // the exit codes the pipeline may report
  };
  for (const Reader& reader : {Reader{"head -1", {0, 141}}, Reader{"true", {141}}}) {
    SCOPED_TRACE(reader.command);
    const std::string db = dir_.path("pipe_" + std::to_string(reader.codes.size()) + ".sqlite");
    const std::string err = dir_.path("pipe.err");
    std::string cmd = "set -o pipefail; OPENBLAS_NUM_THREADS=1 " +
                      einsumdb::testing::shell_quote(EINSUMDB_BIN) + " tune " +
                      einsumdb::testing::shell_quote(spec) +
                      " --shape A=24x16 --shape B=16x20 --warmup 1 --min-reps 2 --min-time 0 "
                      "--table --progress --db " +
                      einsumdb::testing::shell_quote(db) + " 2>" +
                      einsumdb::testing::shell_quote(err) + " | " + reader.command + " >/dev/null";
    const int status = std::system(("bash -c " + einsumdb::testing::shell_quote(cmd)).c_str());
    ASSERT_TRUE(WIFEXITED(status));
    const int code = WEXITSTATUS(status);
    std::ifstream in(err);
    const std::string progress((std::istreambuf_iterator<char>(in)), {});
    EXPECT_NE(std::find(reader.codes.begin(), reader.codes.end(), code), reader.codes.end())
        << "exit " << code << "\n"
        << progress;
    EXPECT_EQ(progress.find("error"), std::string::npos) << progress;
    // The last progress line "[done/total] ..." says how many candidates were measured.
    const std::regex line(R"(\[(\d+)/(\d+)\])");
    int measured = 0, total = -1;
    for (auto m = std::sregex_iterator(progress.begin(), progress.end(), line);
         m != std::sregex_iterator(); ++m)
      measured = std::stoi((*m)[1]), total = std::stoi((*m)[2]);
    EXPECT_EQ(measured, total) << progress;
    ASSERT_GT(measured, 0) << progress;

    auto r = run_cli({"show", spec, "--shape", "A=24x16", "B=16x20", "--json", "--db", db});
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_EQ(json::parse(r.out)["measurements"].size(), static_cast<std::size_t>(measured));
    r = run_cli({"db", "check", "--json", "--db", db});
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_EQ(json::parse(r.out)["ok"], true) << r.out;
  }
}

// Writing into a pipe nobody reads ends einsumdb with exit code 141 of its own (SIGPIPE is
// ignored, the write fails with EPIPE), not by the signal, and with no error message.
TEST_F(CliTune, ABrokenPipeIsExitCode141NotASignal) {
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  close(fds[0]);  // no reader, ever
  const std::string err_path = dir_.path("epipe.err");
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    dup2(fds[1], STDOUT_FILENO);
    std::freopen(err_path.c_str(), "w", stderr);
    std::signal(SIGPIPE, SIG_DFL);
    execl(EINSUMDB_BIN, EINSUMDB_BIN, "canon", "ik,kj->ij", "--shape", "A=2x3", "--shape", "B=3x4",
          static_cast<char*>(nullptr));
    _exit(127);
  }
  close(fds[1]);
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status)) << "ended by signal " << WTERMSIG(status);
  EXPECT_EQ(WEXITSTATUS(status), 141);
  std::ifstream err(err_path);
  const std::string text((std::istreambuf_iterator<char>(err)), {});
  EXPECT_EQ(text, "");
}

// --top N shows the N fastest candidates and says how many more were recorded.
TEST_F(CliTune, TopLimitsTheRowsShownNotTheRowsRecorded) {
  auto r =
      run(with({"tune", "ij,j->i", "--shape", "A=32x16", "B=16", "--table", "--top", "2"}, kQuick));
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("more candidate(s) recorded, not shown"), std::string::npos) << r.out;
  r = run(with({"tune", "ij,j->i", "--shape", "A=32x16", "B=16", "--json", "--top", "1"}, kQuick));
  ASSERT_EQ(r.code, 0) << r.err;
  const json tuned = json::parse(r.out);
  EXPECT_EQ(tuned["results"].size(), 1u);
  EXPECT_EQ(tuned["not_shown"].get<std::size_t>() + 1, tuned["measured"].get<std::size_t>());
}

TEST_F(CliTune, BadInputIsNamedAndRefused) {
  ASSERT_EQ(python("np.save('" + dir_.path("A.npy") +
                   "', np.random.rand(5, 4))\n"
                   "np.save('" +
                   dir_.path("I.npy") + "', np.arange(3))\n"),
            0);
  std::ofstream(dir_.path("bad.npy")) << "\x93NUMPY garbage";
  struct Case {
    std::vector<std::string> args;
    int code;
    std::string message;
  };
  const std::vector<Case> cases = {
      {{"run", "ij,j->i", "--shape", "A=5x3", "B=3", "--inputs", dir_.path("A.npy")},
       2,
       "array 'A' axis 1 has length 4 but the spec says 3"},
      {{"run", "ij,j->i", "--shape", "A=5x4", "B=4", "--inputs", "C=" + dir_.path("A.npy")},
       2,
       "no array 'C'"},
      {{"run", "ij,j->i", "--shape", "A=5x4", "B=4", "--inputs", "A=" + dir_.path("bad.npy")},
       2,
       "bad.npy"},
      {{"run", "ij,j->i", "--shape", "A=5x4", "B=4", "--inputs", "A=" + dir_.path("I.npy")},
       2,
       "not supported"},
      {{"run", "ij,j->i", "--shape", "A=5x4", "B=4", "--transform", "warp"},
       2,
       "unknown strategy 'warp'"},
      {{"run", "ij,j->i", "--shape", "A=5x4", "B=4", "--transform", "contraction_tree"},
       2,
       "3 or more operands"},
      {{"run", "ij,j->i", "--shape", "A=Nx4", "B=4"}, 2, "symbolic length 'N'"},
      {{"tune", "ij,j->i", "--shape", "A=Nx4", "B=4", "--bind", "M=4"},
       2,
       "binding names the symbol 'M', which the einsum does not have (its symbols: N)"},
      {{"tune", "ij,j->i", "--shape", "A=Nx4", "B=4", "--bind", "N=0"}, 2, "--bind 'N=0'"},
      {{"tune", "ij,j->i", "--shape", "A=Nx4", "B=4", "--bind", "N"}, 2, "SYMBOL=LENGTH"},
      {{"tune", "ij,j->i", "--shape", "A=5x4", "B=4", "--strategies", "warp"},
       2,
       "unknown strategy 'warp'"},
      {{"tune", "ij,j->i", "--shape", "A=5x4", "B=4", "--threads", "0"}, 2, "--threads"},
      {{"tune", "ij,j->i", "--shape", "A=5x4", "B=4", "--time-limit", "-1"}, 2, "--time-limit"},
      {{"run", "ij,j->i", "--shape", "A=5x4", "B=4", "--min-time", "-1"}, 2, "--min-time"},
      {{"run", R"J({"einsum":"i->","batch":[["F"]],"shapes":{"A":[3]},"functions":{"F":"2*A+"}})J"},
       2,
       "functions.F"},
  };
  for (const auto& c : cases) {
    const auto r = run(c.args);
    EXPECT_EQ(r.code, c.code) << c.args[1] << "\n" << r.err;
    EXPECT_NE(r.err.find(c.message), std::string::npos) << r.err;
  }
  for (const char* sub : {"tune", "run"}) {
    const auto r = run_cli({sub, "--help"});
    EXPECT_EQ(r.code, 0);
    EXPECT_NE(r.out.find("--db"), std::string::npos);
  }
}

}  // namespace
