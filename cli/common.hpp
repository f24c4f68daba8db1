// Pieces shared by the database subcommands: where the database is, which machine this is, and
// how results are shown (a table on a terminal, JSON for scripts).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "einsumdb/db/machine.hpp"
#include "einsumdb/db/store.hpp"
#include "einsumdb/engine/this_machine.hpp"

namespace einsumdb::cli {

struct DbArgs {
  std::string db;  // --db PATH
};
void add_db_option(CLI::App* cmd, DbArgs& args);

// --db, else $EINSUMDB_DB, else $XDG_DATA_HOME/einsumdb/einsumdb.sqlite (~/.local/share).
std::string resolve_db_path(const DbArgs& args);
// Opens for writing, creating the file and its directory on first use.
Store open_for_writing(const DbArgs& args);
// Opens read-only; nullopt when no database exists there yet.
std::optional<Store> open_for_reading(const DbArgs& args);

struct OutputArgs {
  bool json = false;
  bool table = false;
};
void add_output_options(CLI::App* cmd, OutputArgs& args);
// JSON when asked for, or when stdout is not a terminal (unless --table).
bool want_json(const OutputArgs& args);

// Prints rows under headers with aligned columns.
void print_table(const std::vector<std::string>& headers,
                 const std::vector<std::vector<std::string>>& rows);
std::string format_seconds(double s);
std::string format_number(std::optional<double> v, int precision = 2);
void print_json(const nlohmann::ordered_json& j);

// Transform parameters in short form: index lists as their letters (order=ikj), blocks as
// i:64, contraction paths as (ij,jk)(ik,kl), everything else as compact JSON.
std::string describe_params(const nlohmann::json& params);

// Runs argv[0] with the arguments that follow (no shell) and returns what it wrote to stdout;
// throws Error with its stderr when it cannot start, or exits other than with 0.
std::string run_program(const std::vector<std::string>& argv);

}  // namespace einsumdb::cli
