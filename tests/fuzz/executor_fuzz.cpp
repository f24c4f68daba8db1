// libFuzzer target for the executor's readers of untrusted input, with invariants:
//   'e' + text: a functional-operand expression; chunked evaluation equals scalar evaluation;
//   'n' + bytes: a .npy file; whatever reads back is written and re-read identically;
//   's' + JSON: spec JSON with "functions"; small valid einsums run under every applicable
//               strategy with default parameters, and as tiled contraction trees (batch_fused's
//               fused tree too), and agree with the reference.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <sstream>
#include <string>

#include "einsumdb/canon/metrics.hpp"
#include "einsumdb/canon/parse.hpp"
#include "einsumdb/core/error.hpp"
#include "einsumdb/executor/execute.hpp"
#include "einsumdb/executor/expression.hpp"
#include "einsumdb/executor/npy.hpp"

namespace {

void check(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "invariant broken: %s\n", what);
    std::abort();
  }
}

void expression(const std::string& text) {
  einsumdb::Expression f;
  try {
    f = einsumdb::Expression::parse(text);
  } catch (const einsumdb::SpecError&) {
    return;
  }
  const double in[5] = {-2.5, -1, 0, 0.5, 3};
  double out[5];
  f.apply(in, 1, out, 5);
  for (int i = 0; i < 5; ++i) {
    const double want = f(in[i]);
    check((std::isnan(want) && std::isnan(out[i])) || want == out[i] ||
              std::abs(want - out[i]) <= 1e-12 * std::abs(want),
          "chunked and scalar evaluation differ");
  }
}

void npy(const std::string& bytes) {
  einsumdb::Tensor t;
  try {
    t = einsumdb::read_npy_bytes(bytes, "fuzz.npy");
  } catch (const einsumdb::SpecError&) {
    return;
  }
  char name[] = "/tmp/einsumdb_fuzz_XXXXXX";
  const int fd = mkstemp(name);
  check(fd >= 0, "temporary file");
  close(fd);
  einsumdb::write_npy(name, t);
  const einsumdb::Tensor back = einsumdb::read_npy(name);
  std::remove(name);
  check(back.shape() == t.shape() && back.dtype() == t.dtype(), "npy round trip shape");
  check(std::memcmp(back.raw(), t.raw(), t.bytes()) == 0, "npy round trip data");
}

void spec(const std::string& text) {
  using namespace einsumdb;
  BatchedEinsum e;
  Functions functions;
  try {
    auto j = nlohmann::json::parse(text);
    check_json_depth(j, "spec");
    functions = take_functions(j);
    e = parse_spec_json(j);
  } catch (const std::exception&) {  // nlohmann's and SpecError
    return;
  }
  // Run only small, concrete, f64 einsums without functions (other dtypes and functions are
  // checked against materialized operands in the unit tests).
  double iterations = static_cast<double>(e.batch.size());
  for (const auto& [c, l] : e.index_lengths()) {
    if (l.symbolic()) return;
    iterations *= static_cast<double>(l.value);
  }
  for (const auto& [name, info] : e.arrays) {
    if (info.dtype != Dtype::f64) return;
    // An axis of length 0 makes the iterations 0 whatever the other lengths: every array must be
    // small too.
    double elements = 1;
    for (const auto& l : info.shape) elements *= static_cast<double>(l.value);
    if (elements > 4096) return;
  }
  // And so must the result, whose lengths may come from an empty array's other axes.
  const auto lengths = e.index_lengths();
  double result = static_cast<double>(e.batch.size());
  for (char c : e.output) result *= static_cast<double>(lengths.at(c).value);
  if (result > 4096) return;
  if (iterations > 4096 || !functions.empty() || e.inputs.size() > 6) return;
  Arrays arrays;
  std::uint64_t seed = 1;
  for (const auto& [name, info] : e.arrays) {
    std::vector<std::int64_t> shape;
    for (const auto& l : info.shape) shape.push_back(l.value);
    Tensor t(info.dtype, shape);
    fill_random(t, seed++);
    arrays.emplace(name, std::move(t));
  }
  const Bound bound(e, arrays);
  std::vector<double> scale;
  const Results want = run_reference(bound, &scale);
  const double terms = reduction_terms(e, bound.lengths());
  for (const auto& s : builtin_strategies()) {
    if (s.rejects(e)) continue;
    const Results got = s.run(bound, nlohmann::json{{"threads", 1}});
    check(got.size() == want.size(), "row count");
    check(verification_error(got, want, scale) <= tolerance(Dtype::f64, terms), s.name.c_str());
  }
  // The contraction tree tiled along each output index that allows it, in tiles of 2; and
  // batch_fused's fused tree so. Called directly, not through the strategy table, which answers
  // an einsum with an axis of length 0 before any strategy runs: with such an axis the other
  // lengths are unbounded (the bound on iterations above holds for any of them), and the tiles of
  // one would be counted in billions.
  const auto& len = bound.lengths();
  if (std::any_of(len.begin(), len.end(), [](const auto& l) { return l.second == 0; })) return;
  if (contraction_tree_rejects(e)) return;
  const nlohmann::json path = default_contraction_path(e, bound.lengths());
  for (char c : e.output) {
    if (!contraction_tree_tiles(e, path, c)) continue;
    const Results got = run_contraction_tree(
        bound, {{"path", path}, {"tile", {index_param(c), 2}}, {"threads", 1}});
    check(verification_error(got, want, scale) <= tolerance(Dtype::f64, terms),
          "contraction_tree tiled");
  }
  if (batch_fused_rejects(e)) return;
  const BatchedEinsum f = batch_fused_einsum(e);
  if (contraction_tree_rejects(f)) return;
  auto f_len = bound.lengths();
  f_len[f.output[0]] = static_cast<std::int64_t>(e.batch.size());
  const nlohmann::json f_path = default_contraction_path(f, f_len);
  for (char c : e.output) {
    if (!contraction_tree_tiles(f, f_path, c)) continue;
    const Results got = run_batch_fused(bound, {{"tile", {index_param(c), 2}}, {"threads", 1}});
    check(verification_error(got, want, scale) <= tolerance(Dtype::f64, terms),
          "batch_fused tiled");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 1) return 0;
  const std::string rest(reinterpret_cast<const char*>(data) + 1, size - 1);
  switch (data[0]) {
    case 'e':
      expression(rest);
      break;
    case 'n':
      npy(rest);
      break;
    case 's':
      spec(rest);
      break;
    default:
      break;
  }
  return 0;
}
