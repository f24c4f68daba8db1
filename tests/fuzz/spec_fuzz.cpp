// libFuzzer target over the spec readers, the canonicalizer and the einsum-tree parser. The
// input is read as spec JSON, as an einsum string with flags (lines: einsum, batch, shapes,
// dtypes, join, agg), as an einsum tree and as an EinGraph. Anything accepted must
// canonicalize, be idempotent and map back through σ to itself; an accepted tree must print back
// to an equal tree and keep its FLOPs through the rewrite passes; an accepted graph must plan
// (or be refused with SpecError) and print back to an equal graph.
#include <cstdint>
#include <cstdlib>
#include <sstream>
#include <string>

#include "einsumdb/canon/canonicalize.hpp"
#include "einsumdb/canon/parse.hpp"
#include "einsumdb/core/error.hpp"
#include "einsumdb/planner/eindecomp.hpp"
#include "einsumdb/planner/einsum_tree.hpp"

namespace {

void check(const einsumdb::BatchedEinsum& e) {
  // Keep nauty's work bounded: the parser accepts arbitrary sizes, the fuzzer need not.
  if (e.batch.size() * e.inputs.size() > 4096) return;
  const auto c = einsumdb::canonicalize(e);
  if (!(einsumdb::apply(c.sigma, c.form) == e)) std::abort();
  if (einsumdb::canonicalize(c.form).key != c.key) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    check(einsumdb::parse_spec_text(text));
  } catch (const einsumdb::SpecError&) {
  }
  std::istringstream in(text);
  std::string einsum, line;
  std::getline(in, einsum);
  einsumdb::SpecFlags flags;
  std::getline(in, flags.batch);
  if (std::getline(in, line)) {
    std::istringstream shapes(line);
    for (std::string s; shapes >> s;) flags.shapes.push_back(s);
  }
  if (std::getline(in, line)) {
    std::istringstream dtypes(line);
    for (std::string s; dtypes >> s;) flags.dtypes.push_back(s);
  }
  std::getline(in, flags.join);
  std::getline(in, flags.agg);
  try {
    check(einsumdb::read_spec_argument(einsum, flags));
  } catch (const einsumdb::SpecError&) {
  }
  try {
    const std::vector<std::int64_t> sizes(16, 3);
    const auto tree = einsumdb::parse_einsum_tree(text, sizes);
    if (!(einsumdb::parse_einsum_tree(einsumdb::to_string(tree), sizes) == tree)) std::abort();
    const auto optimized = einsumdb::optimize_tree(tree);
    if (einsumdb::tree_flops(optimized) != einsumdb::tree_flops(tree)) std::abort();
  } catch (const einsumdb::SpecError&) {
  }
  try {
    const auto graph = einsumdb::parse_eingraph_text(text);
    if (!(einsumdb::parse_eingraph(nlohmann::json::parse(einsumdb::to_json(graph).dump())) ==
          graph))
      std::abort();
    if (graph.nodes.size() <= 16) {
      einsumdb::PathOptions path;
      path.exact_limit = 8;
      einsumdb::PlanOptions options;
      options.procs = 4;
      (void)einsumdb::make_plan(einsumdb::expand(graph, path), options);
    }
  } catch (const einsumdb::SpecError&) {
  }
  return 0;
}
