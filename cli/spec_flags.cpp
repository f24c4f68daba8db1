#include "einsumdb/cli/spec_flags.hpp"

#include "einsumdb/canon/error.hpp"

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
  auto spec = read_spec_json_argument(args.spec, args.flags);
  if (!spec) return parse_spec_flags(args.spec, args.flags);
  try {
    nlohmann::json& j = spec->json;
    Functions f = take_functions(j);
    BatchedEinsum e = parse_spec_json(j);
    if (functions) *functions = std::move(f);
    return e;
  } catch (const SpecError& err) {
    throw SpecError(spec->where + err.what());
  }
}

}  // namespace einsumdb::cli
