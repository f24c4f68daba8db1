#include "cli/spec_flags.hpp"

#include <fstream>
#include <sstream>

#include "canon/error.hpp"

namespace einsumdb::cli {

void add_spec_options(CLI::App* cmd, SpecArgs& args, bool spec_required) {
  auto* spec = cmd->add_option("SPEC", args.spec,
                               "The workload: an einsum string such as 'ij,j->i' completed by the "
                               "flags below, spec JSON starting with '{', or @FILE with spec JSON");
  if (spec_required) spec->required();
  cmd->add_option("--batch", args.flags.batch,
                  "Batch rows of array names: rows separated by ';', arrays by ',' "
                  "(default: one row named A,B,C,...)");
  cmd->add_option("--shape", args.flags.shapes,
                  "NAME=LENxLEN... for each array, e.g. A=96x4; a length may be a symbol (Nex4); "
                  "NAME= for a scalar")
      ->take_all();
  cmd->add_option(
         "--dtype", args.flags.dtypes,
         "Dtype of every array (f64), or NAME=DTYPE for one; i8 i32 i64 f16 f32 f64 c64 c128 "
         "(default f64)")
      ->take_all();
  cmd->add_option("--join", args.flags.join,
                  "Join operator: mul add sub sqdiff absdiff max min (default mul)");
  cmd->add_option("--agg", args.flags.agg, "Aggregation operator: sum max min (default sum)");
}

BatchedEinsum read_spec(const SpecArgs& args, Functions* functions) {
  const auto first = args.spec.find_first_not_of(" \t\r\n");
  const bool is_json = first != std::string::npos && args.spec[first] == '{';
  const bool is_file = !args.spec.empty() && args.spec[0] == '@';
  if (!is_json && !is_file) return read_spec_argument(args.spec, args.flags);
  if (!args.flags.empty()) return read_spec_argument(args.spec, args.flags);  // refuses
  std::string text = args.spec, where;
  if (is_file) {
    where = args.spec.substr(1) + ": ";
    std::ifstream in(args.spec.substr(1), std::ios::binary);
    if (!in) throw SpecError("cannot read spec file '" + args.spec.substr(1) + "'");
    std::stringstream ss;
    ss << in.rdbuf();
    text = ss.str();
  }
  try {
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(text);
    } catch (const nlohmann::json::exception& err) {
      throw SpecError(std::string("spec JSON is not valid JSON: ") + err.what());
    }
    check_json_depth(j, "spec JSON");
    Functions f = take_functions(j);
    BatchedEinsum e = parse_spec_json(j);
    if (functions) *functions = std::move(f);
    return e;
  } catch (const SpecError& err) {
    throw SpecError(where + err.what());
  }
}

}  // namespace einsumdb::cli
