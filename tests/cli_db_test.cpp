// The database subcommands of the real executable: record, best, show, list, stats, export,
// import and db check, their exit codes, the default database location, and concurrent writers.
#include <sqlite3.h>

#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "einsumdb/tests/support/run_cli.hpp"
#include "einsumdb/tests/support/temp_dir.hpp"

namespace {

using einsumdb::testing::json_lines;
using einsumdb::testing::run_cli;
using json = nlohmann::json;

class CliDb : public ::testing::Test {
 protected:
  std::string file(const std::string& name, const std::string& text) const {
    return dir_.write(name, text);
  }
  einsumdb::testing::CliResult run(std::vector<std::string> args, const std::string& in = "") {
    args.push_back("--db");
    args.push_back(db_);
    return run_cli(args, in);
  }
  einsumdb::testing::TempDir dir_{"clidb"};
  std::string db_ = dir_.path("facts.sqlite");
};

const char* kLines =
    R"({"spec":{"einsum":"ik,kj->ij","batch":[["A","B"]],"shapes":{"A":[64,32],"B":[32,48]}},"transform":{"name":"ttgt","params":{"m":{"index":"i"},"lhs":{"array":"A"}}},"seconds":[1e-5,1.2e-5,1.1e-5],"status":"ok","max_rel_err":1e-15,"run":"tuning 1"})"
    "\n"
    R"({"spec":{"einsum":"ik,kj->ij","batch":[["A","B"]],"shapes":{"A":[64,32],"B":[32,48]}},"transform":{"name":"reference","params":{}},"seconds":[2e-3],"status":"ok","max_rel_err":0,"run":"tuning 1"})"
    "\n"
    R"({"spec":{"einsum":"ik,kj->ij","batch":[["A","B"]],"shapes":{"A":[64,32],"B":[32,48]}},"transform":{"name":"broken","params":{}},"seconds":[1e-8],"status":"invalid","max_rel_err":0.9,"run":"tuning 1"})"
    "\n";
const char* kRespelled =
    R"({"einsum":"rq,pr->pq","batch":[["X","Y"]],"shapes":{"X":[32,48],"Y":[64,32]}})";

TEST_F(CliDb, RecordBestShowListStatsExportImportCheck) {
  const auto measurements = file("m.jsonl", kLines);
  auto r = run({"record", "--file", measurements, "--json"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(json::parse(r.out)["inserted"], 3);

  r = run({"best", kRespelled, "--json"});
  ASSERT_EQ(r.code, 0) << r.err;
  auto best = json::parse(r.out);
  EXPECT_EQ(best["transform"], "ttgt");
  EXPECT_EQ(best["params"], (json{{"m", {{"index", "p"}}}, {"lhs", {{"array", "Y"}}}}));
  EXPECT_EQ(best["approximate"], false);
  EXPECT_NEAR(best["median_s"].get<double>(), 1.1e-5, 1e-12);
  EXPECT_NEAR(best["gflops"].get<double>(), 2.0 * 64 * 32 * 48 / 1.1e-5 * 1e-9, 1e-6);

  r = run({"best", kRespelled, "--top", "5", "--json"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(json::parse(r.out).size(), 2u);  // the invalid one is never an answer

  r = run({"best", "rq,pr->pq", "--batch", "X,Y", "--shape", "X=32x48", "--shape", "Y=64x32",
           "--table"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("ttgt"), std::string::npos);

  r = run({"show", kRespelled, "--json"});
  ASSERT_EQ(r.code, 0) << r.err;
  const auto shown = json::parse(r.out);
  EXPECT_EQ(shown["measurements"].size(), 3u);
  r = run({"show", shown["hash"].get<std::string>(), "--table"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("invalid"), std::string::npos);

  r = run({"list", "--json"});
  ASSERT_EQ(r.code, 0) << r.err;
  auto list = json::parse(r.out);
  ASSERT_EQ(list.size(), 1u);
  EXPECT_EQ(list[0]["measurements"], 3);
  EXPECT_EQ(list[0]["ok"], 2);
  EXPECT_EQ(list[0]["best_strategy"], "ttgt");
  r = run({"list", "--json", "--strategy", "reference"});
  EXPECT_EQ(json::parse(r.out)[0]["best_strategy"], "reference");
  r = run({"list", "--json", "--since", "2999-01-01"});
  EXPECT_TRUE(json::parse(r.out).empty());

  r = run({"stats", "--json"});
  ASSERT_EQ(r.code, 0) << r.err;
  const auto stats = json::parse(r.out);
  EXPECT_EQ(stats["measurements"], 3);
  EXPECT_EQ(stats["measurements_by_status"]["invalid"], 1);
  EXPECT_EQ(stats["schema_version"], 3);

  const std::string exported = dir_.path("export.jsonl");
  r = run({"export", "--output", exported});
  ASSERT_EQ(r.code, 0) << r.err;
  const std::string other = dir_.path("other.sqlite");
  r = run_cli({"import", exported, "--db", other, "--json"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(json::parse(r.out)[0]["inserted"], 3);
  r = run_cli({"best", kRespelled, "--db", other, "--json"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(json::parse(r.out)["params"], best["params"]);
  EXPECT_EQ(json::parse(r.out)["median_s"], best["median_s"]);
  r = run_cli({"import", exported, "--db", other, "--json"});
  EXPECT_EQ(json::parse(r.out)[0]["duplicates"], 3);

  r = run({"db", "check", "--json"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(json::parse(r.out)["ok"], true);
  // A file that fails the check makes `db check` exit 1.
  sqlite3* db;
  ASSERT_EQ(sqlite3_open(db_.c_str(), &db), SQLITE_OK);
  sqlite3_exec(db, "UPDATE workloads SET key = key || 'x'", nullptr, nullptr, nullptr);
  sqlite3_close(db);
  r = run({"db", "check", "--table"});
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.out.find("PROBLEMS"), std::string::npos) << r.out;
}

TEST_F(CliDb, NothingKnownIsExitThreeWithAHint) {
  auto r = run({"best", kRespelled});
  EXPECT_EQ(r.code, 3);
  EXPECT_NE(r.err.find("einsumdb tune"), std::string::npos) << r.err;
  run({"record", "--file", file("m.jsonl", kLines)});
  r = run({"best", "ij->i", "--shape", "A=3x3"});
  EXPECT_EQ(r.code, 3);
  EXPECT_NE(r.err.find("nothing known"), std::string::npos) << r.err;
  r = run({"show", "ij->i", "--shape", "A=3x3"});
  EXPECT_EQ(r.code, 3);
}

TEST_F(CliDb, ABadLineRecordsNothing) {
  const std::string bad =
      std::string(kLines) +
      R"({"spec":{"einsum":"ij->i","batch":[["A"]],"shapes":{"A":[2,2]}},"transform":{"name":"x"},"seconds":[1e-6],"status":"ok"})"
      "\n"
      R"({"spec":{"einsum":"ij->i","batch":[["A"]],"shapes":{"A":[2,2]}},"transform":{"name":"x","params":{"i":{"index":"z"}}},"seconds":[1e-6],"status":"ok","max_rel_err":0})"
      "\n";
  const auto r = run({"record", "--file", file("bad.jsonl", bad)});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("bad.jsonl:4: measurement of 'x' has status ok but no max_rel_err"),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("bad.jsonl:5: transform parameter {\"index\": \"z\"} names no index"),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("nothing was recorded"), std::string::npos);
  EXPECT_FALSE(std::filesystem::exists(db_));
}

TEST_F(CliDb, DeeplyNestedLinesAreRefusedNotFatal) {
  const std::string deep = std::string(200000, '[') + std::string(200000, ']');
  auto r = run({"record", "--file", file("deep.jsonl", R"({"spec":)" + deep + "}\n")});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("nested deeper than 64 levels"), std::string::npos) << r.err.substr(0, 300);
  r = run_cli({"canon", "--file",
               file("deep2.jsonl", R"({"name":)" + deep +
                                       R"(,"spec":{}})"
                                       "\n")});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.out.find("nested deeper than 64 levels"), std::string::npos) << r.out.substr(0, 300);
  r = run({"import", file("deep3.jsonl", deep + "\n")});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("nested deeper than 64 levels"), std::string::npos) << r.err.substr(0, 300);
}

TEST_F(CliDb, DefaultLocationFollowsEnvironment) {
  const auto m = file("m.jsonl", kLines);
  const std::string xdg = dir_.path("xdg");
  auto r = run_cli({"record", "--file", m}, "", {"EINSUMDB_DB=", "XDG_DATA_HOME=" + xdg});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(std::filesystem::exists(xdg + "/einsumdb/einsumdb.sqlite"));
  const std::string env_db = dir_.path("env.sqlite");
  r = run_cli({"record", "--file", m}, "", {"EINSUMDB_DB=" + env_db});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(std::filesystem::exists(env_db));
}

TEST_F(CliDb, ForeignFileIsRefused) {
  std::ofstream(db_) << "this is a text file, not a database\n";
  const auto r = run({"record", "--file", file("m.jsonl", kLines)});
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("is not an einsumdb database"), std::string::npos) << r.err;
  std::ifstream in(db_);
  std::string text;
  std::getline(in, text);
  EXPECT_EQ(text, "this is a text file, not a database");
}

TEST_F(CliDb, FourConcurrentRecordProcesses) {
  // 4 processes × 2,000 measurements, 20 runs each, into one file at the same time.
  std::string cmd = "set -e; pids=''; ";
  for (int w = 0; w < 4; ++w) {
    std::string lines;
    for (int i = 0; i < 2000; ++i)
      lines += R"({"spec":{"einsum":"ij,j->i","batch":[["A","x"]],"shapes":{"A":[)" +
               std::to_string(4 + i % 30) + R"(,8],"x":[8]}},"transform":{"name":"t)" +
               std::to_string(w) + R"(","params":{}},"seconds":[)" + std::to_string(i + 1) +
               "e-6],\"status\":\"ok\",\"max_rel_err\":0,\"run\":\"w" + std::to_string(w) + "-" +
               std::to_string(i / 100) + "\"}\n";
    const auto f = file("w" + std::to_string(w) + ".jsonl", lines);
    cmd += einsumdb::testing::shell_quote(EINSUMDB_BIN) + " record --json --file " + f + " --db " +
           db_ + " > " + f + ".out 2>&1 & pids=\"$pids $!\"; ";
  }
  cmd += "for p in $pids; do wait $p; done";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << "a writer failed";
  for (int w = 0; w < 4; ++w) {
    std::ifstream out(dir_.path("w" + std::to_string(w) + ".jsonl.out"));
    const json summary = json::parse(out);
    EXPECT_EQ(summary["inserted"], 2000);
    EXPECT_EQ(summary["runs"].size(), 20u);
  }
  const auto stats = json::parse(run({"stats", "--json"}).out);
  EXPECT_EQ(stats["measurements"], 8000);
  EXPECT_EQ(stats["runs"], 80);
  EXPECT_EQ(json::parse(run({"db", "check", "--json"}).out)["ok"], true);
}

}  // namespace
