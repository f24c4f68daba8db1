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
  EXPECT_EQ(stats["schema_version"], 8);

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

namespace {

TEST_F(CliDb, RecordingAFileAgainAddsNoRunAndExportImportAddsNothing) {
  const auto measurements = file("m.jsonl", kLines);
  ASSERT_EQ(run({"record", "--file", measurements}).code, 0);
  auto r = run({"record", "--file", measurements, "--json"});
  ASSERT_EQ(r.code, 0) << r.err;
  auto summary = json::parse(r.out);
  EXPECT_EQ(summary["inserted"], 0);
  EXPECT_EQ(summary["duplicates"], 3);
  EXPECT_EQ(summary["runs_created"], 0);
  r = run({"record", "--file", measurements, "--table"});
  EXPECT_NE(r.out.find("nothing new: all 3 measurement(s) are already in"), std::string::npos)
      << r.out;
  EXPECT_EQ(json::parse(run({"stats", "--json"}).out)["runs"], 1);

  const auto exported = dir_.path("e.jsonl");
  ASSERT_EQ(run({"export", "--output", exported}).code, 0);
  r = run({"import", exported, "--json"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(json::parse(r.out)[0]["inserted"], 0);
  EXPECT_EQ(json::parse(r.out)[0]["runs"], 0);
  const auto stats = json::parse(run({"stats", "--json"}).out);
  EXPECT_EQ(stats["measurements"], 3);
  EXPECT_EQ(stats["runs"], 1);
}

TEST_F(CliDb, MachinesAndWorkloadsAreNamedByThePrefixesTheTablesPrint) {
  const std::string machine =
      R"("machine":{"cpu_model":"Other CPU","cores":4,"isa":"avx2","blas":"BLIS 0.9"})";
  std::string line = std::string(kLines).substr(0, std::string(kLines).find('\n'));
  line.insert(line.size() - 1, "," + machine);
  ASSERT_EQ(run({"record", "--file", file("m.jsonl", line + "\n")}).code, 0);
  const auto stats = json::parse(run({"stats", "--json"}).out);
  const std::string fp = stats["by_machine"][0]["fingerprint"];

  // best --machine: the 12 digits of the tables, or model=...
  auto r = run({"best", kRespelled, "--machine", fp.substr(0, 12), "--json"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(json::parse(r.out)["machine"], fp);
  r = run({"best", kRespelled, "--machine", "model=Other CPU", "--json"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(json::parse(r.out)["machine"], fp);
  // An unknown machine is an error that says so, not "nothing known".
  r = run({"best", kRespelled, "--machine", "0123456789ab"});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("no machine with fingerprint 0123456789ab"), std::string::npos) << r.err;
  r = run({"best", kRespelled, "--machine", "model=Nothing"});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("no machine of model 'Nothing'"), std::string::npos) << r.err;
  r = run({"best", kRespelled, "--machine", "not-hex"});
  EXPECT_EQ(r.code, 2);

  // show takes the 12-digit hash prefix that list prints.
  const auto list = json::parse(run({"list", "--json"}).out);
  const std::string hash = list[0]["hash"];
  r = run({"show", hash.substr(0, 12), "--json"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(json::parse(r.out)["hash"], hash);
  r = run({"show", "0000deadbeef"});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("no workload with hash 0000deadbeef"), std::string::npos) << r.err;
}

TEST_F(CliDb, AMachineWithUnknownKeysOrNoCoresIsRefused) {
  const std::string line = std::string(kLines).substr(0, std::string(kLines).find('\n'));
  for (const char* machine :
       {R"("machine":{"cpu_model":"X","cores":0,"isa":"","blas":"B"})",
        R"("machine":{"cpu_model":"X","cores":2,"isa":"","blas":"B","gpus":1})"}) {
    std::string bad = line;
    bad.insert(bad.size() - 1, std::string(",") + machine);
    const auto r = run({"record", "--file", file("bad.jsonl", bad + "\n")});
    EXPECT_EQ(r.code, 2) << machine;
    EXPECT_NE(r.err.find("nothing was recorded"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("machine:"), std::string::npos) << r.err;
  }
  EXPECT_FALSE(std::filesystem::exists(db_));
}

TEST_F(CliDb, FeinsumFactsImportOnceAndAnswerRespelledSymbolicSpecs) {
  const std::string feinsum =
      std::string(EINSUMDB_TEST_DATA) + "/feinsum/transform_archive_v6.sqlite";
  auto r = run({"import", "--from", "feinsum", feinsum, "--json"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(json::parse(r.out)[0]["inserted"], 9036);
  EXPECT_EQ(json::parse(r.out)[0]["workloads"], 144);
  r = run({"import", "--from", "feinsum", feinsum, "--json"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(json::parse(r.out)[0]["inserted"], 0);
  // Feinsum's `lk,ilj,lkj -> ki` (i=35, j=15, l=4; k the symbolic element count, 4 rows sharing
  // two arrays), in other index, array and symbol names, operand and row order. Feinsum's
  // retrieve picks row 112 of its 155 facts (every workload is cross-checked in db_feinsum_test).
  const std::string spec =
      R"({"einsum":"qvr,pqr,qv->vp","batch":[["u2","Mat","J"],["u0","Mat","J"],["u3","Mat","J"],["u1","Mat","J"]],)"
      R"("shapes":{"Mat":[35,4,15],"J":[4,"elements"],"u0":[4,"elements",15],"u1":[4,"elements",15],"u2":[4,"elements",15],"u3":[4,"elements",15]}})";
  r = run({"best", spec, "--machine", "model=NVIDIA_TITAN_V", "--json"});
  ASSERT_EQ(r.code, 0) << r.err;
  const auto best = json::parse(r.out);
  EXPECT_EQ(best["match"], "exact");
  EXPECT_EQ(best["origin"]["source"], "feinsum");
  EXPECT_EQ(best["origin"]["row"], 112);
  EXPECT_EQ(best["transform"], "ifj_fe_fej_to_ei.py");
  EXPECT_EQ(best["params"], json::parse(R"({"n_e_per_wg": 8, "n_i_tile": 1, "n_j_tile": 1, )"
                                        R"("n_stmt_tile": 1, "nwork_items_per_e": 8})"));
  // Text output: the binding Feinsum did not state, and the note on positional parameters.
  r = run({"show", best["hash"].get<std::string>().substr(0, 12), "--table"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("unstated"), std::string::npos) << r.out.substr(0, 2000);
  // Its parameters are all counts and tile sizes: nothing positional to warn about.
  EXPECT_EQ(r.out.find("note: Feinsum's parameters are kept verbatim"), std::string::npos);
  r = run({"import", "--from", "nowhere", feinsum});
  EXPECT_EQ(r.code, 2);
}

}  // namespace
