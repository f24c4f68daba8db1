#include "einsumdb/cli/spec_flags.hpp"

#include "einsumdb/core/error.hpp"

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

void add_bind_option(CLI::App* cmd, std::vector<std::string>& items, const std::string& what) {
  cmd->add_option("--bind", items, "SYMBOL=LENGTH for a symbolic length of the spec (" + what + ")")
      ->take_all();
}

Binding parse_binding(const std::vector<std::string>& items) {
  Binding b;
  for (const auto& list : items) {
    std::size_t start = 0;
    while (start <= list.size()) {
      const auto comma = list.find(',', start);
      const std::string item =
          list.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
      start = comma == std::string::npos ? list.size() + 1 : comma + 1;
      if (item.empty()) continue;
      const auto eq = item.find('=');
      std::int64_t length = 0;
      std::size_t used = 0;
      if (eq != std::string::npos && eq > 0) {
        try {
          length = std::stoll(item.substr(eq + 1), &used);
        } catch (const std::exception&) {
          used = 0;
        }
      }
      if (eq == std::string::npos || eq == 0 || used == 0 || used != item.size() - eq - 1 ||
          length < 1)
        throw SpecError("--bind '" + item +
                        "': expected SYMBOL=LENGTH with a length of at least 1, "
                        "e.g. Ne=50000");
      const std::string symbol = item.substr(0, eq);
      if (!b.emplace(symbol, length).second)
        throw SpecError("--bind: the symbol '" + symbol + "' is bound twice");
    }
  }
  return b;
}

}  // namespace einsumdb::cli
