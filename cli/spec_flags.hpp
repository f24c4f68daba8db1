// The SPEC argument and its completing flags, shared by every subcommand that takes a workload
// (canon, and later best, tune, run, show), so that all of them read a spec the same way.
#pragma once

#include <string>

#include <CLI/CLI.hpp>

#include "einsumdb/canon/parse.hpp"
#include "einsumdb/executor/expression.hpp"

namespace einsumdb::cli {

struct SpecArgs {
  std::string spec;  // '{...}' JSON, '@file.json', or an einsum string such as 'ij,j->i'
  SpecFlags flags;
};

// Adds the positional SPEC (optional when `spec_required` is false) and the flags --batch,
// --shape, --dtype, --join and --agg to `cmd`.
void add_spec_options(CLI::App* cmd, SpecArgs& args, bool spec_required = true);

// Reads the spec the way every subcommand does; throws SpecError. Spec JSON may declare
// functional operands ("functions": {"F": "2*A+1"}); the einsum returned is the idealized one
// (F an array of A's shape and dtype), and the functions go to `functions` when given.
BatchedEinsum read_spec(const SpecArgs& args, Functions* functions = nullptr);

// --bind SYMBOL=LENGTH for a symbolic spec, repeatable and comma-separated ("Ne=50000,Nq=8").
void add_bind_option(CLI::App* cmd, std::vector<std::string>& items, const std::string& what);
// The binding those items give; throws SpecError naming the item that is not SYMBOL=LENGTH.
Binding parse_binding(const std::vector<std::string>& items);

}  // namespace einsumdb::cli
