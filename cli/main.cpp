// The einsumdb command: subcommands, error reporting and exit codes.
#include <iostream>

#include "canon/error.hpp"
#include "cli/commands.hpp"

int main(int argc, char** argv) {
  using namespace einsumdb::cli;
  CLI::App app{
      "einsumdb remembers how to run tensor contractions fast: batched einsums are canonicalized "
      "with nauty and keyed into a database of measured transforms.",
      "einsumdb"};
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string("einsumdb ") + EINSUMDB_VERSION);
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
