// The subcommands of the `einsumdb` executable. Each `add_*` registers a subcommand on the app
// and returns the function that runs it once the command line is parsed; that function returns
// the process exit code (0 ok, 1 runtime failure, 2 bad usage or input, 3 nothing found) and
// throws einsumdb::Error for failures that end the command.
#pragma once

#include <functional>
#include <utility>
#include <vector>

#include <CLI/CLI.hpp>

namespace einsumdb::cli {

using Command = std::function<int()>;

Command add_canon_command(CLI::App& app);
Command add_bench_command(CLI::App& app);
Command add_plan_command(CLI::App& app);
Command add_tune_command(CLI::App& app);
Command add_run_command(CLI::App& app);
// `bench plan`, registered on the bench subcommand.
Command add_bench_plan_command(CLI::App& bench);
// `bench network`, registered on the bench subcommand (under mpirun).
Command add_bench_network_command(CLI::App& bench);
// record, best, show, list, stats, export, import, report, db check: each subcommand with its
// runner.
std::vector<std::pair<CLI::App*, Command>> add_db_commands(CLI::App& app);

// Exit codes of the CLI (docs/design.md).
inline constexpr int kExitOk = 0;
inline constexpr int kExitRuntime = 1;
inline constexpr int kExitUsage = 2;
inline constexpr int kExitNotFound = 3;
// Standard output was closed before everything was written (a reader such as `head` exited);
// the command's work was done and committed. 128 + SIGPIPE, as a shell reports a tool SIGPIPE
// ended.
inline constexpr int kExitBrokenPipe = 141;

}  // namespace einsumdb::cli
