// einsumdb canon: the canonical form, key, hashes and σ maps of a batched einsum.
#include <iostream>

#include "einsumdb/canon/canonicalize.hpp"
#include "einsumdb/cli/commands.hpp"
#include "einsumdb/cli/jsonl.hpp"
#include "einsumdb/cli/spec_flags.hpp"
#include "einsumdb/core/error.hpp"

namespace einsumdb::cli {
namespace {

struct CanonArgs {
  SpecArgs spec;
  std::string file;
  bool pretty = false;
};

void print(const nlohmann::ordered_json& j, bool pretty) {
  std::cout << (pretty ? j.dump(2) : j.dump()) << '\n';
}

int run_one(const CanonArgs& args) {
  if (args.spec.spec.empty())
    throw SpecError("give a SPEC or --file F.jsonl (see einsumdb canon --help)");
  print(to_json(canonicalize(read_spec(args.spec))), args.pretty);
  return kExitOk;
}

// One result per line; a bad line yields {"line", "error"} and the others are still answered.
int run_file(const CanonArgs& args) {
  if (!args.spec.spec.empty() || !args.spec.flags.empty())
    throw SpecError("--file takes one spec per line; do not give a SPEC or spec flags with it");
  bool failed = false;
  for_each_line(args.file, [&](std::size_t number, const std::string& text) {
    nlohmann::ordered_json out;
    out["line"] = number;
    try {
      const auto j = nlohmann::json::parse(text);
      check_json_depth(j, "line");
      // A line is a spec, or {"name": ..., "spec": {...}} as in tests/data/dgfem.jsonl.
      const bool wrapped = j.is_object() && j.contains("spec");
      if (wrapped) {
        for (const auto& [key, value] : j.items()) {
          (void)value;
          if (key != "name" && key != "spec")
            throw SpecError("unknown key '" + key + "' beside 'spec'; expected name, spec");
        }
        if (j.contains("name")) out["name"] = j.at("name");
      }
      const auto result = to_json(canonicalize(parse_spec_json(wrapped ? j.at("spec") : j)));
      for (const auto& [key, value] : result.items()) out[key] = value;
    } catch (const nlohmann::json::exception& err) {
      out["error"] = std::string("line is not valid JSON: ") + err.what();
      failed = true;
    } catch (const Error& err) {
      out["error"] = err.what();
      failed = true;
    }
    print(out, args.pretty);
  });
  return failed ? kExitUsage : kExitOk;
}

}  // namespace

Command add_canon_command(CLI::App& app) {
  auto args = std::make_shared<CanonArgs>();
  auto* cmd = app.add_subcommand(
      "canon",
      "Print the canonical form, key, hash, structure hash and σ maps of a batched einsum");
  cmd->footer(
      "Examples:\n"
      "  einsumdb canon 'ij,j->i' --batch 'A,B;A,C' --shape A=96x4 --shape B=4 --shape C=4\n"
      "  einsumdb canon "
      "'{\"einsum\":\"ik,kj->ij\",\"batch\":[[\"A\",\"B\"]],\"shapes\":{\"A\":[10,4],\"B\":[4,10]}}"
      "'\n"
      "  einsumdb canon --file specs.jsonl      # one spec (or {\"name\",\"spec\"}) per line");
  add_spec_options(cmd, args->spec, /*spec_required=*/false);
  cmd->add_option("--file", args->file,
                  "Canonicalize one spec JSON per line of this file ('-' for stdin); prints one "
                  "result per line, {\"line\", \"error\"} for a bad line, exit 2 if any failed");
  cmd->add_flag("--pretty", args->pretty, "Indent the JSON output");
  return [args] { return args->file.empty() ? run_one(*args) : run_file(*args); };
}

}  // namespace einsumdb::cli
