// The store under several processes at once and under a writer killed mid-run. Real processes
// (fork), one real SQLite file.
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <iostream>

#include <gtest/gtest.h>

#include "einsumdb/canon/parse.hpp"
#include "einsumdb/db/store.hpp"
#include "einsumdb/tests/support/temp_dir.hpp"

namespace einsumdb {
namespace {

Machine test_machine() {
  Machine m;
  m.cpu_model = "Concurrency CPU";
  m.cores = 2;
  m.isa = "avx2";
  m.blas = "OpenBLAS";
  return m;
}

// 50 workloads shared by every writer, so that they also race to insert the same workloads.
std::vector<Canonical> workloads() {
  std::vector<Canonical> out;
  for (int k = 0; k < 50; ++k) {
    const std::string spec = R"({"einsum":"ik,kj->ij","batch":[["A","B"]],"shapes":{"A":[)" +
                             std::to_string(8 + k) + R"(,16],"B":[16,24]}})";
    out.push_back(canonicalize(parse_spec_text(spec)));
  }
  return out;
}

Measurement measurement(int writer, int i) {
  Measurement m;
  m.transform = {"strategy" + std::to_string(i % 7), {{"tile", i % 5}}};
  m.seconds = {1e-6 * (1 + writer), 1e-6 * (1 + i)};  // distinct per writer and i
  m.max_rel_err = 0;
  return m;
}

TEST(StoreConcurrency, FourWritersEveryMeasurementLands) {
  constexpr int kWriters = 4, kPerWriter = 2000, kPerRun = 100;
  const testing::TempDir dir("concurrency");
  const std::string path = dir.path("store.sqlite");
  const auto specs = workloads();
  std::vector<pid_t> children;
  for (int w = 0; w < kWriters; ++w) {
    const pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      int code = 0;
      try {
        Store store = Store::open(path);
        for (int run = 0; run < kPerWriter / kPerRun; ++run) {
          std::vector<std::pair<const Canonical*, Measurement>> batch;
          for (int i = run * kPerRun; i < (run + 1) * kPerRun; ++i)
            batch.emplace_back(&specs[(i * 7 + w) % specs.size()], measurement(w, i));
          const auto r = store.record_run({"writer " + std::to_string(w), "test", "", ""},
                                          test_machine(), batch);
          if (r.inserted != static_cast<std::size_t>(kPerRun)) code = 2;
        }
      } catch (const std::exception& e) {
        std::cerr << "writer " << w << ": " << e.what() << '\n';
        code = 1;
      }
      _exit(code);
    }
    children.push_back(pid);
  }
  for (pid_t pid : children) {
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "a writer saw an error";
  }
  Store store = Store::open(path);
  const auto stats = store.stats();
  EXPECT_EQ(stats["measurements"], kWriters * kPerWriter);
  EXPECT_EQ(stats["runs"], kWriters * kPerWriter / kPerRun);
  EXPECT_EQ(stats["workloads"], specs.size());
  EXPECT_EQ(stats["machines"], 1);
  EXPECT_EQ(store.check()["ok"], true) << store.check().dump();
}

// Waits for one byte from the child, at most `seconds`.
char wait_for(int fd, int seconds) {
  pollfd p{fd, POLLIN, 0};
  if (poll(&p, 1, seconds * 1000) != 1) return 0;
  char c = 0;
  return read(fd, &c, 1) == 1 ? c : 0;
}

TEST(StoreDurability, WriterKilledMidRunLeavesEarlierRunsIntactAndNoHalfRun) {
  const testing::TempDir dir("durability");
  const std::string path = dir.path("store.sqlite");
  const auto specs = workloads();
  int pipefd[2];
  ASSERT_EQ(pipe(pipefd), 0);
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    close(pipefd[0]);
    alarm(60);  // never outlive a broken parent
    try {
      Store store = Store::open(path);
      std::vector<std::pair<const Canonical*, Measurement>> first;
      for (int i = 0; i < 200; ++i) first.emplace_back(&specs[i % specs.size()], measurement(0, i));
      store.record_run({"complete run", "test", "", ""}, test_machine(), first);
      (void)!write(pipefd[1], "A", 1);
      // The second run: one transaction that never commits before the kill.
      Store::Transaction tx(store);
      const auto machine = store.machine_id(test_machine());
      const auto run = store.begin_run({"killed run", "test", "", ""}, machine);
      for (int i = 0;; ++i) {
        store.record(run, store.workload_id(specs[i % specs.size()]), machine, measurement(1, i));
        if (i == 1000) (void)!write(pipefd[1], "B", 1);
      }
    } catch (...) {
    }
    _exit(1);
  }
  close(pipefd[1]);
  ASSERT_EQ(wait_for(pipefd[0], 30), 'A');
  ASSERT_EQ(wait_for(pipefd[0], 30), 'B');
  ASSERT_EQ(kill(pid, SIGKILL), 0);
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFSIGNALED(status));
  close(pipefd[0]);

  Store store = Store::open(path);
  const auto check = store.check();
  EXPECT_EQ(check["ok"], true) << check.dump();
  const auto stats = store.stats();
  EXPECT_EQ(stats["measurements"], 200);  // the complete run, whole
  EXPECT_EQ(stats["runs"], 1);            // the killed run, absent
  // The file is still writable after the crash.
  EXPECT_EQ(store.record_run({}, test_machine(), {{&specs[0], measurement(2, 0)}}).inserted, 1u);
}

}  // namespace
}  // namespace einsumdb
