// The einsumdb executable: canon on both spec forms, --file with a bad line, bench canon, and
// errors with exit codes. Runs the real binary.
#include <cstdio>
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "einsumdb/tests/support/run_cli.hpp"
#include "einsumdb/tests/support/temp_dir.hpp"

namespace {

using Result = einsumdb::testing::CliResult;
Result run(const std::vector<std::string>& args, const std::string& stdin_text = "") {
  return einsumdb::testing::run_cli(args, stdin_text);
}
std::vector<nlohmann::json> lines(const std::string& text) {
  return einsumdb::testing::json_lines(text);
}

TEST(Cli, CanonFlagsAndJsonGiveOneKey) {
  const auto a = run({"canon", "ij,j->i", "--batch", "A,B;A,C", "--shape", "A=96x4", "--shape",
                      "B=4", "--shape", "C=4", "--dtype", "f64"});
  ASSERT_EQ(a.code, 0) << a.err;
  const auto b = run({"canon", R"({"einsum":"qp,p->q","batch":[["M","y"],["M","x"]],)"
                               R"("shapes":{"M":[96,4],"x":[4],"y":[4]},"dtype":"f64"})"});
  ASSERT_EQ(b.code, 0) << b.err;
  const auto ja = nlohmann::json::parse(a.out), jb = nlohmann::json::parse(b.out);
  EXPECT_EQ(ja.at("key"), jb.at("key"));
  EXPECT_EQ(ja.at("hash"), jb.at("hash"));
  // The output index is always named first; the matrix maps to each spelling's matrix.
  EXPECT_EQ(ja.at("sigma").at("index").at("a"), "i");
  EXPECT_EQ(jb.at("sigma").at("index").at("a"), "q");
  for (const auto& [canonical, shape] : ja.at("canonical").at("shapes").items())
    if (shape.size() == 2) {
      EXPECT_EQ(ja.at("sigma").at("array").at(canonical), "A");
      EXPECT_EQ(jb.at("sigma").at("array").at(canonical), "M");
    }
  for (const char* field : {"key", "hash", "structure_hash", "canonical", "sigma"})
    EXPECT_TRUE(ja.contains(field)) << field;
  for (const char* map : {"index", "array", "operand", "row"})
    EXPECT_TRUE(ja.at("sigma").contains(map)) << map;
}

TEST(Cli, SpecFromFile) {
  const std::string path = ::testing::TempDir() + "/einsumdb_spec.json";
  const std::string spec =
      R"({"einsum":"ik,kj->ij","batch":[["A","B"]],"shapes":{"A":[10,4],"B":[4,10]}})";
  std::ofstream(path) << spec;
  const auto r = run({"canon", "@" + path});
  std::remove(path.c_str());
  ASSERT_EQ(r.code, 0) << r.err;
  const auto inline_spec = run({"canon", spec});
  EXPECT_EQ(nlohmann::json::parse(r.out).at("key"),
            nlohmann::json::parse(inline_spec.out).at("key"));
}

TEST(Cli, FileAnswersEveryLineAndFlagsBadOnes) {
  const std::string input =
      R"({"einsum":"ij,j->i","batch":[["A","B"]],"shapes":{"A":[3,4],"B":[4]}})"
      "\n"
      "\n"
      R"({"einsum":"ij,j->i","batch":[["A","B"]],"shapes":{"A":[3,4],"B":[5]}})"
      "\n"
      "not json\n"
      R"({"name":"wrapped","spec":{"einsum":"i->","batch":[["x"]],"shapes":{"x":["N"]}}})"
      "\n";
  const auto r = run({"canon", "--file", "-"}, input);
  EXPECT_EQ(r.code, 2);
  const auto out = lines(r.out);
  ASSERT_EQ(out.size(), 4u);
  EXPECT_EQ(out[0].at("line"), 1);
  EXPECT_TRUE(out[0].contains("key"));
  EXPECT_EQ(out[1].at("line"), 3);
  EXPECT_NE(out[1].at("error").get<std::string>().find("index 'j' has length 4"),
            std::string::npos);
  EXPECT_EQ(out[2].at("line"), 4);
  EXPECT_TRUE(out[2].contains("error"));
  EXPECT_EQ(out[3].at("name"), "wrapped");
  EXPECT_TRUE(out[3].contains("key"));
}

TEST(Cli, FileOfCasesAllSucceed) {
  const auto r = run({"canon", "--file", std::string(EINSUMDB_TEST_DATA) + "/dgfem.jsonl"});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(lines(r.out).size(), 60u);
}

TEST(Cli, ErrorsAndExitCodes) {
  auto r = run({"canon", "ij,j->i", "--shape", "A=2x3", "--shape", "B=2"});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("einsumdb: error: index 'j' has length 3"), std::string::npos) << r.err;
  EXPECT_TRUE(r.out.empty());
  r = run({"canon", "ij,j->i", "--shape", "A=2x2", "--dtype", "f99"});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("unknown dtype 'f99'"), std::string::npos) << r.err;
  r = run({"canon"});
  EXPECT_EQ(r.code, 2);
  r = run({"canon", "--file", "/nonexistent.jsonl"});
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("cannot open '/nonexistent.jsonl'"), std::string::npos) << r.err;
  r = run({"frobnicate"});
  EXPECT_EQ(r.code, 2);
  r = run({});
  EXPECT_EQ(r.code, 2);
}

TEST(Cli, HelpOnEverySubcommand) {
  for (const auto& args : std::vector<std::vector<std::string>>{
           {"--help"}, {"canon", "--help"}, {"bench", "--help"}, {"bench", "canon", "--help"}}) {
    const auto r = run(args);
    EXPECT_EQ(r.code, 0) << args.front();
    EXPECT_NE(r.out.find("Usage"), std::string::npos) << r.out;
  }
}

TEST(Cli, BenchOptionsRun) {
  auto r =
      run({"bench", "canon", std::string(EINSUMDB_TEST_DATA) + "/isomorphism.jsonl", "--repeat",
           "2", "--labeling", "nauty-dense-digraph", "--no-twin-rows", "--no-structure"});
  ASSERT_EQ(r.code, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["labeling"], "nauty-dense-digraph");
  EXPECT_EQ(j["twin_rows"], false);
  r = run({"bench", "db", "--workloads", "40", "--measurements", "400", "--batch", "100",
           "--queries", "20", "--nearest-queries", "20"});
  ASSERT_EQ(r.code, 0) << r.err;
  j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["asked"], 80);
  EXPECT_EQ(j["answered"], 80);
  EXPECT_EQ(j["nearest_found"], 20);
  EXPECT_EQ(j["symbolic_found"], 20);
  EXPECT_EQ(j["facts_compared"], 20);
  EXPECT_EQ(j["facts_equal_to_measurements"], 20);
  EXPECT_EQ(j["workloads"], 40 + 30);  // and the 30 symbolic workloads
  EXPECT_GT(j["record_per_second_batched"].get<double>(), 0.0);
  EXPECT_FALSE(std::filesystem::exists(j["db"].get<std::string>()));  // temporary file removed
}

TEST(Cli, BenchCanonReportsMedians) {
  const auto r = run(
      {"bench", "canon", std::string(EINSUMDB_TEST_DATA) + "/isomorphism.jsonl", "--repeat", "5"});
  ASSERT_EQ(r.code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j.at("cases").size(), 20u);  // 10 pairs, two sides each
  EXPECT_GT(j.at("median_us").get<double>(), 0.0);
  for (const auto& c : j.at("cases")) EXPECT_GT(c.at("median_us").get<double>(), 0.0);
}

// The kernels' instruction set (executor/isa.hpp): the run says which ran; EINSUMDB_ISA caps it,
// and what was measured under a cap is filed under a machine of its own, which the processor's own
// kernels do not answer from; a value that names no set is refused.
TEST(Cli, KernelsNarrowerThanTheProcessorsAreFiledAsAnotherMachine) {
  einsumdb::testing::TempDir dir("isa");
  const std::string db = dir.path("store.sqlite");
  const std::vector<std::string> spec = {"ij,jk->ik", "--shape", "A=24x16", "--shape", "B=16x20"};
  auto with = [&](std::vector<std::string> head, const std::vector<std::string>& tail) {
    head.insert(head.end(), spec.begin(), spec.end());
    head.insert(head.end(), tail.begin(), tail.end());
    return head;
  };
  const auto native = run(with({"run"}, {"--verify", "--json", "--db", db}));
  ASSERT_EQ(native.code, 0) << native.err;
  const std::string widest = nlohmann::json::parse(native.out).at("kernels");
  EXPECT_TRUE(widest == "baseline" || widest == "avx2" || widest == "avx512") << widest;

  const std::vector<std::string> capped = {"EINSUMDB_ISA=baseline"};
  const auto narrow = einsumdb::testing::run_cli(
      with({"run"}, {"--verify", "--json", "--db", db, "--transform", "tensor_gemm"}), "", capped);
  ASSERT_EQ(narrow.code, 0) << narrow.err;
  EXPECT_EQ(nlohmann::json::parse(narrow.out).at("kernels"), "baseline");
  EXPECT_TRUE(nlohmann::json::parse(narrow.out).at("verified").get<bool>());

  const auto tuned = einsumdb::testing::run_cli(
      with({"tune"},
           {"--min-reps", "1", "--min-time", "0", "--standalone", "0", "--json", "--db", db}),
      "", capped);
  ASSERT_EQ(tuned.code, 0) << tuned.err;
  const auto answer =
      einsumdb::testing::run_cli(with({"best"}, {"--json", "--db", db}), "", capped);
  EXPECT_EQ(answer.code, 0) << answer.err;
  if (widest != "baseline") {
    const auto own = run(with({"best"}, {"--json", "--db", db}));
    EXPECT_EQ(own.code, 3) << own.out << own.err;  // nothing known for the processor's kernels
  }

  const auto bad =
      einsumdb::testing::run_cli(with({"run"}, {"--json", "--db", db}), "", {"EINSUMDB_ISA=sse9"});
  EXPECT_EQ(bad.code, 2);
  EXPECT_NE(bad.err.find("EINSUMDB_ISA=sse9"), std::string::npos) << bad.err;
  EXPECT_NE(bad.err.find("baseline, avx2 or avx512"), std::string::npos) << bad.err;
}

}  // namespace
