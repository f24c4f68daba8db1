// The distributed executor under real mpirun jobs of 1, 2 and 4 ranks (oversubscribed on small
// machines): results equal one process, measured bytes stay within the planner's prediction,
// measurements reach the database, and bad plans, bad inputs, a killed rank and a stopped rank
// end the job with an error instead of a hang.
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <thread>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "einsumdb/executor/npy.hpp"
#include "einsumdb/tests/support/chain_graph.hpp"
#include "einsumdb/tests/support/run_cli.hpp"
#include "einsumdb/tests/support/temp_dir.hpp"

extern char** environ;

namespace einsumdb {
namespace {

using testing::CliResult;
using testing::shell_quote;
using testing::TempDir;
using Clock = std::chrono::steady_clock;

const std::vector<std::string> kMpiEnv = {
    "OMPI_ALLOW_RUN_AS_ROOT=1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1", "OPENBLAS_NUM_THREADS=1",
    "OMPI_MCA_rmaps_base_oversubscribe=1",
    // Shared memory only: no network interfaces needed, none probed.
    "OMPI_MCA_btl=self,vader", "OMPI_MCA_btl_vader_single_copy_mechanism=none",
    // A job that ends with a non-zero exit ends at once: mpirun otherwise waits a second between
    // the SIGTERM and the SIGKILL of the ranks it ends, even where all have left already, as
    // after a refusal.
    "OMPI_MCA_odls_base_sigkill_timeout=0",
    // OpenMPI's own allocations are not the project's leaks.
    "ASAN_OPTIONS=detect_leaks=0"};

std::vector<std::string> mpirun_argv(int np, const std::vector<std::string>& args) {
  std::vector<std::string> argv = {"mpirun", "--oversubscribe",  "--allow-run-as-root",
                                   "-np",    std::to_string(np), EINSUMDB_BIN};
  argv.insert(argv.end(), args.begin(), args.end());
  return argv;
}

// Runs `argv` with the MPI environment, bounded by `limit` seconds (the test fails rather than
// hangs).
CliResult run_mpirun(const std::vector<std::string>& argv, int limit) {
  const std::string dir = ::testing::TempDir(), tag = std::to_string(getpid());
  const std::string err_path = dir + "/einsumdb_mpi_err_" + tag;
  std::string cmd = "env";
  for (const auto& e : kMpiEnv) cmd += " " + shell_quote(e);
  cmd += " timeout " + std::to_string(limit);
  for (const auto& a : argv) cmd += " " + shell_quote(a);
  cmd += " </dev/null 2>" + shell_quote(err_path);
  CliResult r;
  FILE* pipe = popen(cmd.c_str(), "r");
  char buf[4096];
  for (std::size_t n; (n = fread(buf, 1, sizeof buf, pipe)) > 0;) r.out.append(buf, n);
  const int status = pclose(pipe);
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  {
    std::ifstream err(err_path);
    r.err.assign(std::istreambuf_iterator<char>(err), {});
  }
  std::remove(err_path.c_str());
  return r;
}

// mpirun -np NP einsumdb ARGS, bounded by `limit` seconds.
CliResult mpirun(int np, const std::vector<std::string>& args, int limit = 300) {
  return run_mpirun(mpirun_argv(np, args), limit);
}

// One rank in each of `dirs` (its working directory), all running einsumdb ARGS: ranks that see
// different files under the same relative paths, as ranks on hosts of their own do.
CliResult mpirun_in(const std::vector<std::string>& dirs, const std::vector<std::string>& args,
                    int limit = 120) {
  std::vector<std::string> argv = {"mpirun", "--oversubscribe", "--allow-run-as-root"};
  for (std::size_t k = 0; k < dirs.size(); ++k) {
    if (k > 0) argv.push_back(":");
    argv.insert(argv.end(), {"-np", "1", "-wdir", dirs[k], EINSUMDB_BIN});
    argv.insert(argv.end(), args.begin(), args.end());
  }
  return run_mpirun(argv, limit);
}

nlohmann::json parse(const CliResult& r) {
  try {
    return nlohmann::json::parse(r.out);
  } catch (const nlohmann::json::exception&) {
    ADD_FAILURE() << "not JSON (exit " << r.code << "):\n" << r.out << "\n" << r.err;
    return {};
  }
}

const std::string kChain = testing::chain_graph(96, 80, 64, 12, 200);

// sqdiff/sum, absdiff/max, an n-ary node, reductions to a vector and to a scalar.
const char* kOperators = R"({"inputs": {"X": {"shape": [48, 20]}, "Y": {"shape": [40, 20]},
  "W": {"shape": [40, 16]}, "V": {"shape": [16, 24]}, "U": {"shape": [24, 10]}},
  "nodes": [{"name": "D", "einsum": "ik,jk->ij", "inputs": ["X", "Y"], "join": "sqdiff"},
            {"name": "M", "einsum": "ij,jl->il", "inputs": ["D", "W"], "join": "absdiff",
             "agg": "max"},
            {"name": "T", "einsum": "il,lm,mn->in", "inputs": ["M", "V", "U"]},
            {"name": "R", "einsum": "in->i", "inputs": ["T"]},
            {"name": "S", "einsum": "in->", "inputs": ["T"], "agg": "max"}],
  "outputs": ["D", "T", "R", "S"]})";

// Single precision, a transposed read and a batch index.
const char* kSingle = R"({"inputs": {"P": {"shape": [6, 32, 24], "dtype": "f32"},
  "Q": {"shape": [6, 40, 24], "dtype": "f32"}, "O": {"shape": [6, 32, 40], "dtype": "f32"}},
  "nodes": [{"name": "PQ", "einsum": "bik,bjk->bij", "inputs": ["P", "Q"]},
            {"name": "Y", "einsum": "bij,bij->bji", "inputs": ["PQ", "O"], "join": "sub"}]})";

void expect_verified_within_prediction(const nlohmann::json& j, const std::string& what) {
  ASSERT_TRUE(j.contains("verify")) << what;
  EXPECT_TRUE(j["verify"]["ok"].get<bool>()) << what << ": " << j["verify"].dump();
  for (const auto& s : j["steps"]) {
    EXPECT_LE(s["sent_bytes"].get<double>(), s["predicted_bytes"].get<double>())
        << what << ", step " << s["name"];
    std::int64_t sent = 0, received = 0;
    for (const auto& r : s["ranks"])
      sent += r["sent_bytes"].get<std::int64_t>(),
          received += r["received_bytes"].get<std::int64_t>();
    EXPECT_EQ(sent, received) << what << ", step " << s["name"];  // every byte sent arrives
    // The time model prices exactly the messages the executor sent (planner/traffic.hpp).
    if (!s["predicted_time"].is_null()) {
      EXPECT_EQ(s["sent_bytes"].get<double>(), s["predicted_time"]["host_bytes"].get<double>() +
                                                   s["predicted_time"]["local_bytes"].get<double>())
          << what << ", step " << s["name"];
    }
  }
  EXPECT_LE(j["sent_bytes"].get<double>(), j["predicted_bytes"].get<double>()) << what;
}

TEST(Distributed, EqualsOneProcessWithinThePredictedBytesForEveryPlan) {
  TempDir dir("mpi_plans");
  const std::string db = dir.path("db.sqlite");
  const std::vector<std::pair<std::string, std::string>> graphs = {
      {"chain", kChain}, {"operators", kOperators}, {"single", kSingle}};
  for (const auto& [name, text] : graphs) {
    const std::string graph = dir.write(name + ".json", text);
    for (int np : {1, 2, 4}) {
      // EinDecomp through a plan file; the baselines planned by run itself.
      const std::string plan = dir.path(name + "_" + std::to_string(np) + ".plan.json");
      const auto planned = testing::run_cli(
          {"plan", graph, "--procs", std::to_string(np), "--output", plan, "--json"});
      ASSERT_EQ(planned.code, 0) << planned.err;
      const std::vector<std::vector<std::string>> runs = {{"--plan", plan},
                                                          {"--method", "sqrt", "--overlap"},
                                                          {"--method", "data", "--no-overlap"}};
      for (const auto& how : runs) {
        std::vector<std::string> args = {"run", graph, "--verify", "--json", "--db", db};
        args.insert(args.end(), how.begin(), how.end());
        if (np > 1 && how[0] == "--plan") {
          args.insert(args.end(), {"--network", "bandwidth=1e9,latency=1e-5,ranks_per_host=2"});
        }
        const auto r = mpirun(np, args);
        const std::string what = name + " np=" + std::to_string(np) + " " + how[0] + " " + how[1];
        ASSERT_EQ(r.code, 0) << what << "\n" << r.err;
        const auto j = parse(r);
        EXPECT_EQ(j["procs"], np);
        // mpirun's ranks inherit this process's cores; one kernel thread each.
        cpu_set_t cpus;
        ASSERT_EQ(sched_getaffinity(0, sizeof cpus, &cpus), 0);
        const bool share = np > CPU_COUNT(&cpus);
        EXPECT_EQ(j["ranks_share_cores"], share) << what;
        // Overlap by default unless the ranks share cores; the flags force either mode.
        const bool overlap = how.size() == 3 ? how[2] == "--overlap" : !share;
        EXPECT_EQ(j["overlap"], overlap) << what;
        expect_verified_within_prediction(j, what);
        if (np > 1 && name == "chain") {  // the others have plans that need no data moved
          EXPECT_GT(j["sent_bytes"].get<double>(), 0) << what;
        }
      }
    }
  }
}

TEST(Distributed, InputsFromNpyAndOutputsGatheredToNpy) {
  TempDir dir("mpi_npy");
  const std::string graph = dir.write("chain.json", kChain);
  std::filesystem::create_directories(dir.path("in"));
  // Two inputs from files, the rest generated (asked for by name: a missing file is an error).
  for (const auto& [name, shape] : std::vector<std::pair<std::string, std::vector<std::int64_t>>>{
           {"A", {96, 80}}, {"E", {200, 64}}}) {
    Tensor t(Dtype::f64, shape);
    fill_random(t, name == "A" ? 7 : 8);
    write_npy(dir.path("in/" + name + ".npy"), t);
  }
  for (int np : {1, 4}) {
    const auto r = mpirun(
        np, {"run", graph, "--inputs", dir.path("in"), "--generate", "B", "C", "D", "--output",
             dir.path("out" + std::to_string(np)), "--json", "--no-record", "--verify"});
    ASSERT_EQ(r.code, 0) << r.err;
    const auto j = parse(r);
    EXPECT_EQ(j["generated_inputs"], nlohmann::json({"B", "C", "D"}));
    EXPECT_TRUE(j["verify"]["ok"].get<bool>());
  }
  const Tensor one = read_npy(dir.path("out1/Z.npy")), four = read_npy(dir.path("out4/Z.npy"));
  EXPECT_EQ(one.shape(), (std::vector<std::int64_t>{96, 64}));
  EXPECT_LT(max_relative_error(four, one), 1e-12);

  // A different input file changes the result: the files are really read.
  Tensor a(Dtype::f64, {96, 80});
  fill_random(a, 9);
  write_npy(dir.path("in/A.npy"), a);
  ASSERT_EQ(mpirun(2, {"run", graph, "--inputs", dir.path("in"), "--generate", "B", "C", "D",
                       "--output", dir.path("out9"), "--no-record"})
                .code,
            0);
  EXPECT_GT(max_relative_error(read_npy(dir.path("out9/Z.npy")), one), 1e-3);
}

// A sum over j split between two ranks and added afterwards rounds differently from one process's
// single sum: a relative error above 0 that is the same in every run. Asked to pass nothing above
// half of it, the run fails its verification, exits 1 and records nothing.
TEST(Distributed, ARunThatFailsVerificationRecordsNothing) {
  TempDir dir("mpi_wrong");
  const std::string graph = dir.write("split.json", R"({
    "inputs": {"A": {"shape": [8, 200000]}, "B": {"shape": [200000, 8]}},
    "nodes": [{"name": "Z", "einsum": "ij,jk->ik", "inputs": ["A", "B"]}]})");
  const std::string db = dir.path("db.sqlite");
  // Both runs read the same (absent) store, so both run the default kernels.
  const auto passed = mpirun(2, {"run", graph, "--verify", "--json", "--db", db, "--no-record"});
  ASSERT_EQ(passed.code, 0) << passed.err;
  const auto j = parse(passed);
  ASSERT_EQ(j["steps"][0]["partition"]["j"], 2) << passed.out;
  const double err = j["verify"]["max_rel_err"].get<double>();
  ASSERT_GT(err, 0) << "the split sum rounded exactly as one process's: nothing to test";
  const auto failed = mpirun(
      2, {"run", graph, "--verify", "--json", "--db", db, "--tolerance", std::to_string(err / 2)});
  EXPECT_EQ(failed.code, 1) << failed.err;
  EXPECT_NE(failed.err.find("differs from one process"), std::string::npos) << failed.err;
  const auto k = parse(failed);
  EXPECT_FALSE(k["verify"]["ok"].get<bool>());
  EXPECT_EQ(k["verify"]["max_rel_err"].get<double>(), err);  // the same sums, the same rounding
  EXPECT_FALSE(k.contains("recorded")) << failed.out;
  EXPECT_FALSE(std::filesystem::exists(db));  // the store was never opened for writing
  // The same run within the default tolerance records its partitionings.
  const auto recorded = mpirun(2, {"run", graph, "--verify", "--json", "--db", db});
  ASSERT_EQ(recorded.code, 0) << recorded.err;
  EXPECT_EQ(parse(recorded)["recorded"]["partitionings"], 1);
  // The bound is --verify's, and a relative error.
  const auto alone = mpirun(1, {"run", graph, "--tolerance", "1e-9", "--no-record"});
  EXPECT_EQ(alone.code, 2);
  EXPECT_NE(alone.err.find("--verify"), std::string::npos) << alone.err;
}

TEST(Distributed, MeasurementsAreRecordedForThePlannerToUse) {
  TempDir dir("mpi_record");
  const std::string graph = dir.write("chain.json", kChain), db = dir.path("db.sqlite");
  const auto r = mpirun(2, {"run", graph, "--repeat", "3", "--json", "--db", db});
  ASSERT_EQ(r.code, 0) << r.err;
  const auto j = parse(r);
  EXPECT_EQ(j["seconds"].size(), 3u);
  EXPECT_EQ(j["recorded"]["partitionings"], 4);
  // The planner now finds measured costs for the plan that ran.
  const auto p =
      testing::run_cli({"plan", graph, "--procs", "2", "--cost", "measured", "--json", "--db", db});
  ASSERT_EQ(p.code, 0) << p.err;
  const auto pj = nlohmann::json::parse(p.out);
  // Every step's measured partitioning is found, converted at a measured bandwidth; vectors never
  // run are estimated from them and cannot displace them, so the plan is the one that ran.
  EXPECT_EQ(pj["measured"]["partitionings_on_this_machine"], 4) << p.out;
  EXPECT_GE(pj["measured"]["steps_with_measured_partitionings"].get<int>(), 4) << p.out;
  EXPECT_GT(pj["measured"]["vectors_estimated_from_measured_ones"].get<int>(), 0) << p.out;
  EXPECT_GT(pj["measured"]["bandwidth_gbs"].get<double>(), 0) << p.out;
  ASSERT_EQ(pj["steps"].size(), j["steps"].size());
  for (std::size_t v = 0; v < j["steps"].size(); ++v) {
    EXPECT_EQ(pj["steps"][v]["partition"], j["steps"][v]["partition"]) << p.out;
    EXPECT_TRUE(pj["steps"][v].contains("measured_objective")) << p.out;
  }
}

TEST(Distributed, OverlapAndNoOverlapTogetherAreRefused) {
  TempDir dir("mpi_overlap");
  const std::string graph = dir.write("chain.json", kChain);
  const auto r = testing::run_cli({"run", graph, "--overlap", "--no-overlap", "--no-record"});
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.err.find("--overlap excludes --no-overlap"), std::string::npos) << r.err;
}

// --trace: a Chrome trace-event file with one track per rank and, for every run, each step's
// phases on each rank, in order, none overlapping another on the same rank.
TEST(Distributed, TraceHasEveryRanksTimeline) {
  TempDir dir("mpi_trace");
  const std::string graph = dir.write("chain.json", kChain), trace = dir.path("t.json");
  for (const char* overlap : {"--overlap", "--no-overlap"}) {
    std::vector<std::string> args = {"run",         graph,     "--repeat", "2",
                                     "--no-record", "--trace", trace,      overlap};
    const auto r = mpirun(2, args);
    ASSERT_EQ(r.code, 0) << r.err;
    std::ifstream in(trace);
    const auto j = nlohmann::json::parse(in);
    ASSERT_FALSE(std::filesystem::exists(trace + ".partial"));
    std::map<int, std::vector<std::pair<double, double>>> spans;  // rank -> (start, end)
    std::map<int, std::map<std::string, int>> kernels;            // rank -> step -> count
    std::set<std::string> names;
    for (const auto& e : j.at("traceEvents")) {
      if (e.at("ph") == "M") {
        names.insert(e.at("args").at("name").get<std::string>());
        continue;
      }
      ASSERT_EQ(e.at("ph"), "X") << e;
      const int rank = e.at("tid");
      const double ts = e.at("ts"), dur = e.at("dur");
      EXPECT_GE(ts, 0) << e;
      EXPECT_GE(dur, 0) << e;
      spans[rank].emplace_back(ts, ts + dur);
      if (e.at("cat") == "kernel") ++kernels[rank][e.at("args").at("step").get<std::string>()];
    }
    EXPECT_TRUE(names.count("rank 0") && names.count("rank 1")) << j.dump();
    ASSERT_EQ(spans.size(), 2u) << overlap;
    for (auto& [rank, s] : spans) {
      std::sort(s.begin(), s.end());
      for (std::size_t k = 1; k < s.size(); ++k) EXPECT_LE(s[k - 1].second, s[k].first + 1e-3);
      // The chain's four steps, each run twice on every rank.
      ASSERT_EQ(kernels[rank].size(), 4u) << overlap;
      for (const auto& [step, n] : kernels[rank]) EXPECT_EQ(n, 2) << step;
    }
  }
  // Not a graph: refused.
  const auto r = testing::run_cli({"run", "ij,jk->ik", "--shape", "A=4x4", "B=4x4", "--trace",
                                   trace, "--db", dir.path("x.sqlite")});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("--trace is for a graph"), std::string::npos) << r.err;
}

TEST(Distributed, KernelsUseTheBestTransformKnownForTheirBlocks) {
  TempDir dir("mpi_kernels");
  const std::string graph = dir.write("chain.json", kChain), db = dir.path("db.sqlite");
  auto r = mpirun(2, {"run", graph, "--method", "data", "--json", "--no-record", "--db", db});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(parse(r)["steps"][0]["kernel"]["source"], "default");
  // The data plan cuts AB's rows in two: its kernel is a 48×80 by 80×64 product. Tune that
  // (in other names), and the next run's kernel is the tuned winner.
  const auto t = testing::run_cli({"tune", "xy,yz->xz", "--shape", "P=48x80", "Q=80x64", "--batch",
                                   "P,Q", "--strategies", "loop_nest,ttgt", "--min-reps", "1",
                                   "--min-time", "0", "--warmup", "1", "--json", "--db", db});
  ASSERT_EQ(t.code, 0) << t.err;
  r = mpirun(2, {"run", graph, "--method", "data", "--json", "--no-record", "--db", db});
  ASSERT_EQ(r.code, 0) << r.err;
  const auto j = parse(r);
  EXPECT_EQ(j["steps"][0]["name"], "AB");
  EXPECT_EQ(j["steps"][0]["kernel"]["source"], "best known") << j["steps"][0].dump();
}

TEST(Distributed, AStoredTransformTheExecutorRefusesFallsBackToTheDefault) {
  TempDir dir("mpi_refused_transform");
  const std::string graph = dir.write("chain.json", kChain), db = dir.path("db.sqlite");
  // A hand-written record whose parameters ttgt does not take, for a product of this structure.
  const std::string record = dir.write(
      "record.jsonl",
      R"({"spec": {"einsum": "ik,kj->ij", "batch": [["A","B"]], "shapes": {"A": [64,32], )"
      R"("B": [32,48]}}, "transform": {"name": "ttgt", "params": {"m": {"index": "i"}, )"
      R"("n": {"index": "j"}, "k": {"index": "k"}, "lhs": {"array": "A"}}}, )"
      R"("seconds": [1e-5, 1.2e-5, 1.1e-5], "status": "ok", "max_rel_err": 1e-15})"
      "\n");
  ASSERT_EQ(testing::run_cli({"record", "--file", record, "--db", db}).code, 0);
  const auto one = testing::run_cli(
      {"run", "ik,kj->ij", "--shape", "A=64x32", "B=32x48", "--db", db, "--verify", "--json"});
  ASSERT_EQ(one.code, 0) << one.err;
  EXPECT_EQ(nlohmann::json::parse(one.out)["source"], "default (the stored transform was refused)");
  EXPECT_NE(one.err.find("unknown parameter 'lhs'"), std::string::npos) << one.err;

  const auto r = mpirun(2, {"run", graph, "--verify", "--json", "--no-record", "--db", db});
  ASSERT_EQ(r.code, 0) << r.err;
  const auto j = parse(r);
  EXPECT_TRUE(j["verify"]["ok"].get<bool>());
  EXPECT_EQ(j["steps"][0]["kernel"]["source"], "default (the stored transform was refused)");
}

TEST(Distributed, PlansThatDoNotFitAreRefusedBeforeRunning) {
  TempDir dir("mpi_refuse");
  const std::string graph = dir.write("chain.json", kChain);
  const std::string other = dir.write("ops.json", kOperators);
  const std::string plan4 = dir.path("plan4.json"), plan_other = dir.path("other.json");
  ASSERT_EQ(testing::run_cli({"plan", graph, "--procs", "4", "--output", plan4, "--json"}).code, 0);
  ASSERT_EQ(
      testing::run_cli({"plan", other, "--procs", "2", "--output", plan_other, "--json"}).code, 0);
  auto r = mpirun(2, {"run", graph, "--plan", plan4, "--no-record"});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("the plan is for 4 ranks, but this job has 2"), std::string::npos) << r.err;
  r = mpirun(2, {"run", graph, "--plan", plan_other, "--no-record"});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("is not in the plan"), std::string::npos) << r.err;
  r = mpirun(3, {"run", graph, "--no-record"});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("power of two"), std::string::npos) << r.err;
  r = mpirun(1, {"run", graph, "--inputs", dir.path("missing"), "--no-record"});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("is not a directory"), std::string::npos) << r.err;
  r = mpirun(1, {"run", graph, "--timeout", "0", "--no-record"});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("--timeout must be positive"), std::string::npos) << r.err;
  const auto timed = testing::run_cli({"run", graph, "--min-time", "1"});
  EXPECT_EQ(timed.code, 2);
  EXPECT_NE(timed.err.find("--min-time times one einsum"), std::string::npos) << timed.err;
  const auto not_graph = testing::run_cli({"run", "ij,jk->ik", "--plan", plan4});
  EXPECT_EQ(not_graph.code, 2);
  EXPECT_NE(not_graph.err.find("is not a graph"), std::string::npos) << not_graph.err;
  r = mpirun(1, {"run", graph, "--plan", dir.write("junk.json", "{\"format\": 1}")});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("not a plan file"), std::string::npos) << r.err;
}

TEST(Distributed, ACorruptInputEndsTheJobWithTheFileNamed) {
  TempDir dir("mpi_corrupt");
  const std::string graph = dir.write("chain.json", kChain);
  std::filesystem::create_directories(dir.path("in"));
  Tensor b(Dtype::f64, {80, 64});
  write_npy(dir.path("in/B.npy"), b);
  std::filesystem::resize_file(dir.path("in/B.npy"), 4000);  // truncated
  const auto t0 = Clock::now();
  const std::vector<std::string> args = {
      "run", graph, "--inputs", dir.path("in"), "--generate", "A", "C", "D", "E", "--no-record"};
  const auto r = mpirun(4, args, 120);
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.code, 124) << "timed out";
  EXPECT_NE(r.err.find("B.npy: truncated"), std::string::npos) << r.err;
  EXPECT_LT(std::chrono::duration<double>(Clock::now() - t0).count(), 60);

  Tensor wrong(Dtype::f64, {64, 80});
  write_npy(dir.path("in/B.npy"), wrong);
  const auto s = mpirun(2, args, 120);
  EXPECT_NE(s.code, 0);
  EXPECT_NE(s.err.find("has shape [64,80] in the file, but the graph says [80,64]"),
            std::string::npos)
      << s.err;
}

TEST(Distributed, WhatOneRankLacksIsRefusedNamingTheRankBeforeAnythingRuns) {
  TempDir dir("mpi_per_rank_files");
  // Rank 0's directory has the graph, the plan and every input; rank 1's only some of them.
  const std::string r0 = dir.path("r0"), r1 = dir.path("r1");
  for (const auto& d : {r0, r1}) std::filesystem::create_directories(d + "/in");
  const nlohmann::json graph = nlohmann::json::parse(kChain);
  for (const auto& d : {r0, r1}) std::ofstream(d + "/chain.json") << kChain;
  for (const auto& [name, t] : graph["inputs"].items()) {
    Tensor x(Dtype::f64, t["shape"].get<std::vector<std::int64_t>>());
    for (std::int64_t k = 0; k < x.size(); ++k) x.set(k, 0.001 * static_cast<double>(k % 997));
    write_npy(r0 + "/in/" + name + ".npy", x);
    if (name != "E") write_npy(r1 + "/in/" + name + ".npy", x);
  }
  const auto t0 = Clock::now();
  // Rank 1 lacks E: refused, never generated, whichever rank owns what.
  auto r = mpirun_in({r0, r1}, {"run", "chain.json", "--inputs", "in", "--no-record"});
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find("rank 1 of 2 on "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("input 'E': no file '" + r1 + "/in/E.npy'"), std::string::npos) << r.err;
  // Asked for by name, it is generated; the rest are read on each rank.
  r = mpirun_in({r0, r1}, {"run", "chain.json", "--inputs", "in", "--generate", "E", "--verify",
                           "--json", "--no-record"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(parse(r)["generated_inputs"], nlohmann::json::array({"E"}));
  // Read by rank 0 for every rank: rank 1 needs none of the files.
  std::filesystem::remove_all(r1 + "/in");
  r = mpirun_in({r0, r1}, {"run", "chain.json", "--inputs", "in", "--read-inputs", "root",
                           "--verify", "--json", "--no-record"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(parse(r)["verify"]["ok"].get<bool>());
  EXPECT_EQ(parse(r)["generated_inputs"], nlohmann::json::array());
  r = mpirun_in({r0, r1}, {"run", "chain.json", "--inputs", "in", "--no-record"});
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find("rank 1 of 2 on "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("'in' is not a directory here"), std::string::npos) << r.err;
  // A plan or a graph that one rank's directory lacks.
  ASSERT_EQ(testing::run_cli({"plan", r0 + "/chain.json", "--procs", "2", "--output",
                              r0 + "/plan.json", "--json"})
                .code,
            0);
  r = mpirun_in({r0, r1}, {"run", "chain.json", "--plan", "plan.json", "--no-record"});
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find("rank 1 of 2 on "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("cannot read the plan file 'plan.json'"), std::string::npos) << r.err;
  std::filesystem::remove(r1 + "/chain.json");
  r = mpirun_in({r0, r1}, {"run", "chain.json", "--no-record"});
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find("rank 1 of 2 on "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("no graph file 'chain.json' here"), std::string::npos) << r.err;
  EXPECT_LT(std::chrono::duration<double>(Clock::now() - t0).count(), 60) << "no refusal waits";
}

TEST(Distributed, EveryRankRunsRank0sChoiceOfKernelAndTheTableSaysWhatRan) {
  TempDir dir("mpi_choice");
  const std::string r0 = dir.path("r0"), r1 = dir.path("r1");
  for (const auto& d : {r0, r1}) {
    std::filesystem::create_directories(d);
    std::ofstream(d + "/chain.json") << kChain;
  }
  // Only rank 0's store knows the data plan's AB kernel (a 48×80 by 80×64 product).
  const auto t =
      testing::run_cli({"tune", "xy,yz->xz", "--shape", "P=48x80", "Q=80x64", "--batch", "P,Q",
                        "--strategies", "loop_nest,ttgt", "--min-reps", "1", "--min-time", "0",
                        "--warmup", "1", "--json", "--db", r0 + "/db.sqlite"});
  ASSERT_EQ(t.code, 0) << t.err;
  const auto r = mpirun_in({r0, r1}, {"run", "chain.json", "--method", "data", "--json",
                                      "--no-record", "--db", "db.sqlite"});
  ASSERT_EQ(r.code, 0) << r.err;
  const auto step = parse(r)["steps"][0];
  EXPECT_EQ(step["name"], "AB");
  EXPECT_TRUE(step["kernels_agree"].get<bool>()) << step.dump();
  ASSERT_EQ(step["rank_kernels"].size(), 2u);
  for (const auto& k : step["rank_kernels"]) EXPECT_EQ(k["source"], "best known") << step.dump();
  EXPECT_FALSE(std::filesystem::exists(r1 + "/db.sqlite"));
}

// Starts mpirun in the background; returns its pid.
pid_t spawn_mpirun(int np, const std::vector<std::string>& args) {
  std::vector<std::string> argv = mpirun_argv(np, args);
  std::vector<char*> cargv;
  for (auto& a : argv) cargv.push_back(a.data());
  cargv.push_back(nullptr);
  std::vector<std::string> env;
  for (char** e = environ; *e; ++e) {
    const std::string entry = *e, key = entry.substr(0, entry.find('=') + 1);
    bool replaced = false;
    for (const auto& m : kMpiEnv) replaced = replaced || m.rfind(key, 0) == 0;
    if (!replaced) env.push_back(entry);
  }
  env.insert(env.end(), kMpiEnv.begin(), kMpiEnv.end());
  std::vector<char*> cenv;
  for (auto& e : env) cenv.push_back(e.data());
  cenv.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
  pid_t pid = -1;
  posix_spawnp(&pid, "mpirun", &fa, nullptr, cargv.data(), cenv.data());
  posix_spawn_file_actions_destroy(&fa);
  return pid;
}

// The einsumdb ranks mpirun started (its children running einsumdb).
std::vector<pid_t> ranks_of(pid_t mpirun) {
  std::vector<pid_t> out;
  for (const auto& e : std::filesystem::directory_iterator("/proc")) {
    const std::string name = e.path().filename();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream stat(e.path() / "stat");
    std::string line;
    std::getline(stat, line);
    const auto close = line.rfind(')');
    if (close == std::string::npos) continue;
    std::istringstream rest(line.substr(close + 2));
    char state;
    pid_t ppid;
    rest >> state >> ppid;
    if (ppid == mpirun && line.find("(einsumdb)") != std::string::npos)
      out.push_back(static_cast<pid_t>(std::stoi(name)));
  }
  return out;
}

// Whether `pid` still runs after up to `limit` seconds (a zombie does not count).
bool alive(pid_t pid, double limit) {
  const auto t0 = Clock::now();
  for (;;) {
    std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
    std::string line;
    if (!std::getline(stat, line)) return false;
    const auto close = line.rfind(')');
    if (close != std::string::npos && close + 2 < line.size() && line[close + 2] == 'Z')
      return false;
    if (std::chrono::duration<double>(Clock::now() - t0).count() > limit) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

// Waits up to `limit` seconds for `pid`; returns its exit code, or -1 if it is still running
// (then killed) and 128 + signal if it was killed.
int wait_for(pid_t pid, double limit, double* seconds) {
  const auto t0 = Clock::now();
  for (;;) {
    int status = 0;
    if (waitpid(pid, &status, WNOHANG) == pid) {
      *seconds = std::chrono::duration<double>(Clock::now() - t0).count();
      return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    }
    if (std::chrono::duration<double>(Clock::now() - t0).count() > limit) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      return -1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

// A graph that runs for a while: many repetitions of a chain of products.
std::string long_graph(const TempDir& dir) {
  return dir.write("long.json", R"({"inputs": {"A": {"shape": [400, 400]},
    "B": {"shape": [400, 400]}}, "nodes": [
    {"name": "C", "einsum": "ij,jk->ik", "inputs": ["A", "B"]},
    {"name": "D", "einsum": "ij,jk->ik", "inputs": ["C", "A"]},
    {"name": "E", "einsum": "ij,jk->ki", "inputs": ["D", "B"]}]})");
}

std::vector<pid_t> wait_for_ranks(pid_t mpirun, std::size_t n) {
  for (int k = 0; k < 200; ++k) {
    auto r = ranks_of(mpirun);
    if (r.size() == n) return r;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return {};
}

TEST(Distributed, AKilledRankEndsTheJob) {
  TempDir dir("mpi_kill");
  const std::string graph = long_graph(dir);
  const pid_t job = spawn_mpirun(4, {"run", graph, "--repeat", "100000", "--no-record"});
  ASSERT_GT(job, 0);
  const auto ranks = wait_for_ranks(job, 4);
  ASSERT_EQ(ranks.size(), 4u);
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));  // well into the runs
  kill(ranks[2], SIGKILL);
  double seconds = 0;
  const int code = wait_for(job, 60, &seconds);
  EXPECT_NE(code, -1) << "the job did not end within 60 s of a rank's death";
  EXPECT_NE(code, 0);
  for (pid_t r : ranks) EXPECT_FALSE(alive(r, 10)) << "rank " << r << " survived";
}

TEST(Distributed, AStoppedRankEndsTheJobAtTheTimeout) {
  TempDir dir("mpi_stop");
  const std::string graph = long_graph(dir);
  const pid_t job =
      spawn_mpirun(2, {"run", graph, "--repeat", "100000", "--timeout", "3", "--no-record"});
  ASSERT_GT(job, 0);
  const auto ranks = wait_for_ranks(job, 2);
  ASSERT_EQ(ranks.size(), 2u);
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  kill(ranks[1], SIGSTOP);  // alive but silent: only the time-out can tell
  double seconds = 0;
  const int code = wait_for(job, 60, &seconds);
  EXPECT_NE(code, -1) << "the job did not end within 60 s of a rank stopping";
  EXPECT_NE(code, 0);
  for (pid_t r : ranks) {
    if (alive(r, 0)) kill(r, SIGKILL);  // the stopped one, should the job have left it behind
    kill(r, SIGCONT);
  }
  EXPECT_GT(seconds, 2.5) << "ended before the time-out could have fired";
}

}  // namespace
}  // namespace einsumdb
