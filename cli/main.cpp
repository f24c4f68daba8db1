// The einsumdb command: subcommands, error reporting and exit codes.
//
// A closed standard output (`einsumdb tune ... | head`) does not kill the process: SIGPIPE is
// ignored, so the command finishes its work (every measurement it takes is committed as it is
// taken), stops writing, and exits with kExitBrokenPipe (141, what a shell reports for a tool
// that SIGPIPE ended), without an error message.
#include <poll.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <iostream>

#include "einsumdb/cli/commands.hpp"
#include "einsumdb/core/error.hpp"
#include "einsumdb/db/error.hpp"
#include "einsumdb/executor/execute.hpp"
#include "einsumdb/version.hpp"

namespace {

// Whether standard output is a pipe or socket whose reader has gone (poll reports an error or a
// hang-up on the writing end). The errno of the write that failed may be long overwritten.
bool stdout_reader_gone() {
  pollfd p{STDOUT_FILENO, POLLOUT, 0};
  return ::poll(&p, 1, 0) == 1 && (p.revents & (POLLERR | POLLHUP)) != 0;
}

// The exit code once the command has run: `code`, unless standard output could not be written.
int finish_output(int code) {
  using namespace einsumdb::cli;
  errno = 0;
  std::cout.flush();
  const bool failed = !std::cout || std::fflush(stdout) != 0;
  if (!failed) return code;
  if (errno == EPIPE || stdout_reader_gone()) return kExitBrokenPipe;
  std::cerr << "einsumdb: error: cannot write the output: "
            << (errno ? std::strerror(errno) : "write failed") << '\n';
  return code == kExitOk ? kExitRuntime : code;
}

int run_command(int argc, char** argv) {
  using namespace einsumdb::cli;
  CLI::App app{
      "einsumdb remembers how to run tensor contractions fast: batched einsums are canonicalized "
      "with nauty and keyed into a database of measured transforms.",
      "einsumdb"};
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string("einsumdb ") + einsumdb::kVersion);
  std::vector<std::pair<CLI::App*, Command>> commands;
  commands.emplace_back(nullptr, add_canon_command(app));
  commands.back().first = app.get_subcommand("canon");
  commands.emplace_back(nullptr, add_bench_command(app));
  commands.back().first = app.get_subcommand("bench");
  commands.emplace_back(nullptr, add_plan_command(app));
  commands.back().first = app.get_subcommand("plan");
  commands.emplace_back(nullptr, add_tune_command(app));
  commands.back().first = app.get_subcommand("tune");
  commands.emplace_back(nullptr, add_run_command(app));
  commands.back().first = app.get_subcommand("run");
  for (auto& c : add_db_commands(app)) commands.push_back(std::move(c));

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);
    return code == 0 ? kExitOk : kExitUsage;
  }
  try {
    for (auto& [sub, run] : commands)
      if (sub->parsed()) return run();
    return kExitUsage;
  } catch (const einsumdb::SpecError& e) {
    std::cerr << "einsumdb: error: " << e.what() << '\n';
    return kExitUsage;
  } catch (const einsumdb::DatabaseError& e) {
    std::cerr << "einsumdb: error: " << e.what() << '\n';
    return kExitRuntime;
  } catch (const einsumdb::Error& e) {
    std::cerr << "einsumdb: error: " << e.what() << '\n';
    return kExitRuntime;
  } catch (const std::exception& e) {
    std::cerr << "einsumdb: error: " << e.what() << '\n';
    return kExitRuntime;
  }
}

}  // namespace

int main(int argc, char** argv) {
  std::signal(SIGPIPE, SIG_IGN);
  // This process's OpenBLAS calls come from einsumdb's threads, one at a time (execute.hpp).
  einsumdb::set_blas_calls_exclusive(true);
  return finish_output(run_command(argc, argv));
}
