#include "einsumdb/db/retrieve.hpp"

#include <algorithm>
#include <set>

#include "einsumdb/core/error.hpp"

namespace einsumdb {
namespace {

// Every binding of `names` to `values` (|values|^|names| of them), at most `limit`, in order.
template <class F>
bool for_each_binding(const std::vector<std::string>& names,
                      const std::vector<std::int64_t>& values, std::size_t limit, F&& f) {
  if (values.empty()) return false;
  double count = 1;
  for (std::size_t k = 0; k < names.size(); ++k) count *= static_cast<double>(values.size());
  if (count > static_cast<double>(limit)) return false;
  std::vector<std::size_t> pick(names.size(), 0);
  for (;;) {
    Binding b;
    for (std::size_t k = 0; k < names.size(); ++k) b[names[k]] = values[pick[k]];
    if (f(b)) return true;
    std::size_t k = 0;
    while (k < pick.size() && ++pick[k] == values.size()) pick[k++] = 0;
    if (k == pick.size()) return false;
  }
}

Answer answer_for(Fact f, nlohmann::json params, const Canonical& query) {
  Answer a;
  a.params = std::move(params);
  a.fact = std::move(f);
  a.query_hash = query.hash;
  a.query_key = query.key;
  return a;
}

}  // namespace

std::string_view to_string(Match m) {
  switch (m) {
    case Match::exact:
      return "exact";
    case Match::symbolic:
      return "symbolic";
    case Match::nearest:
      return "nearest";
  }
  return "?";
}

namespace {

// generalises() given the symbolic workload's structure lengths (index k: the k-th
// structure-canonical index, the query's too) with their symbols named by `symbol_of`.
//
// With `to_structure` (the symbolic form's canonical names -> its structure names), the binding
// the structure labeling suggests needs no labeling of the bound form: both structure forms are
// one text and the bound lengths are the query's index by index, so the structure isomorphism is
// an isomorphism of the two einsums, and names go through the structure names.
template <class SymbolOf>
std::optional<Generalisation> generalises_with(const BatchedEinsum& symbolic,
                                               const std::vector<Length>& structure_lengths,
                                               const SymbolOf& symbol_of,
                                               const NameMap* to_structure,
                                               const Canonical& query) {
  const auto names = symbols(symbolic);
  if (names.empty() || !symbols(query.form).empty()) return std::nullopt;
  std::optional<Generalisation> found;
  auto attempt = [&](const Binding& b) {
    const Canonical bound = canonicalize(bind_symbols(symbolic, b), {.structure = false});
    if (bound.hash != query.hash) return false;
    // The bound form's canonical names are the query's: both forms are one text.
    Generalisation g{b, {}};
    for (const auto& [canonical, mine] : bound.sigma.index)
      g.to_query.index.emplace(std::string(1, mine),
                               std::string(1, query.sigma.index.at(canonical)));
    for (const auto& [canonical, mine] : bound.sigma.array)
      g.to_query.array.emplace(mine, query.sigma.array.at(canonical));
    found = std::move(g);
    return true;
  };
  // First the binding the structure labelling suggests: both workloads' structure forms are one
  // text, so their structure-canonical indices correspond.
  Binding suggested;
  bool consistent = structure_lengths.size() == query.structure_lengths.size();
  for (std::size_t k = 0; consistent && k < structure_lengths.size(); ++k) {
    const Length& l = structure_lengths[k];
    const std::int64_t v = query.structure_lengths[k].value;
    if (!l.symbolic()) {
      consistent = l.value == v;
      continue;
    }
    const auto [it, added] = suggested.emplace(symbol_of(l.symbol), v);
    consistent = added || it->second == v;
  }
  if (consistent && suggested.size() == names.size()) {
    if (to_structure && !query.structure_sigma.index.empty()) {
      Generalisation g{suggested, {}};
      for (const auto& [mine, structure] : to_structure->index)
        g.to_query.index.emplace(mine,
                                 std::string(1, query.structure_sigma.index.at(structure.at(0))));
      for (const auto& [mine, structure] : to_structure->array)
        g.to_query.array.emplace(mine, query.structure_sigma.array.at(structure));
      return g;
    }
    if (attempt(suggested)) return found;
  }
  // Another correspondence (the structure may have symmetries the lengths break): every
  // assignment of the query's lengths to the symbols, while that stays small.
  std::set<std::int64_t> lengths;
  for (const auto& [index, l] : query.form.index_lengths()) lengths.insert(l.value);
  for_each_binding(names, {lengths.begin(), lengths.end()}, 4096, attempt);
  return found;
}

}  // namespace

std::optional<Generalisation> generalises(const BatchedEinsum& symbolic, const Canonical& query) {
  if (symbols(symbolic).empty() || !symbols(query.form).empty()) return std::nullopt;
  const Canonical mine = canonicalize(symbolic);
  if (mine.structure_hash != query.structure_hash) return std::nullopt;
  return generalises_with(
      symbolic, mine.structure_lengths,
      [&](const std::string& canonical) -> const std::string& {
        return mine.sigma.symbol.at(canonical);
      },
      nullptr, query);
}

std::optional<Generalisation> generalises(const BatchedEinsum& symbolic_form,
                                          const std::vector<Length>& structure_lengths,
                                          const NameMap& to_structure, const Canonical& query) {
  // A canonical form's symbols are their canonical names.
  return generalises_with(
      symbolic_form, structure_lengths,
      [](const std::string& canonical) -> const std::string& { return canonical; }, &to_structure,
      query);
}

namespace {

// The answers when the workload itself has no facts: symbolic generalisations, else the nearest
// size. `query` has its structure labeling.
std::vector<Answer> top_k_beyond_exact(Store& store, const Canonical& query,
                                       const std::vector<std::string>& machines, std::size_t k,
                                       bool nearest) {
  std::vector<Answer> answers;

  if (symbols(query.form).empty()) {
    struct Ranked {
      Answer answer;
      double gflops;
    };
    std::vector<Ranked> general;
    for (const auto& w :
         store.symbolic_workloads(query.structure_hash, machines, query.structure_lengths)) {
      const auto g = generalises(w.form, w.structure_lengths, w.to_structure, query);
      if (!g) continue;
      for (Fact& f : store.top_k(w.hash, machines, k, w.key)) {
        nlohmann::json params = translate(f.transform.params, g->to_query);
        Answer a = answer_for(std::move(f), std::move(params), query);
        a.match = Match::symbolic;
        a.binding = g->binding;
        const double rate = a.fact.gflops.value_or(0);
        general.push_back({std::move(a), rate});
      }
    }
    std::stable_sort(general.begin(), general.end(),
                     [](const Ranked& a, const Ranked& b) { return a.gflops > b.gflops; });
    for (auto& r : general) {
      if (k && answers.size() == k) break;
      answers.push_back(std::move(r.answer));
    }
    if (!answers.empty()) return answers;
  }

  if (!nearest) return answers;
  auto near = store.nearest(query, machines);
  if (!near) return answers;
  // Measured workload's canonical names -> structure names -> the query's names.
  const nlohmann::json structure = translate(near->fact.transform.params, near->to_structure);
  Answer a;
  a.params = translate(structure, to_input_names(query.structure_sigma));
  a.fact = std::move(near->fact);
  a.match = Match::nearest;
  a.approximate = true;
  a.distance = near->distance;
  a.query_hash = query.hash;
  a.query_key = query.key;
  answers.push_back(std::move(a));
  return answers;
}

// The answers of the workload's own facts, in the query's names.
std::vector<Answer> exact_answers(std::vector<Fact> facts, const Canonical& query) {
  std::vector<Answer> answers;
  answers.reserve(facts.size());
  for (Fact& f : facts) {
    nlohmann::json params = to_input_names(f.transform.params, query.sigma);
    answers.push_back(answer_for(std::move(f), std::move(params), query));
  }
  return answers;
}

// The answers when the workload has no facts of its own. What it asks are several questions: one
// read transaction (one snapshot, and the locks taken once) for them all.
std::vector<Answer> answers_beyond_exact(Store& store, const Canonical& query,
                                         const std::vector<std::string>& machines, std::size_t k,
                                         bool nearest) {
  return store.reading([&] {
    if (!query.structure_hash.empty())
      return top_k_beyond_exact(store, query, machines, k, nearest);
    Canonical labeled = query;  // made without the structure labeling: label it now
    add_structure(labeled);
    return top_k_beyond_exact(store, labeled, machines, k, nearest);
  });
}

}  // namespace

std::vector<Answer> top_k_for(Store& store, const Canonical& query,
                              const std::vector<std::string>& machines, std::size_t k,
                              bool nearest) {
  auto ask = [&] {
    auto answers = exact_answers(store.top_k(query.hash, machines, k, query.key), query);
    if (!answers.empty()) return answers;
    return answers_beyond_exact(store, query, machines, k, nearest);
  };
  // Where it is free, the exact lookup shares the read transaction of what a miss asks next
  // (SQLite then takes its read lock once); a server answers a hit in one statement, alone.
  return store.free_read_transactions() ? store.reading(ask) : ask();
}

std::vector<Answer> top_k_for(Store& store, const Canonical& query, const std::string& machine,
                              std::size_t k, bool nearest) {
  return top_k_for(store, query, std::vector<std::string>{machine}, k, nearest);
}

std::optional<Answer> best_for(Store& store, const Canonical& query, const std::string& machine,
                               bool nearest) {
  auto answers = top_k_for(store, query, machine, 1, nearest);
  if (answers.empty()) return std::nullopt;
  return std::move(answers.front());
}

std::vector<std::optional<Answer>> best_many(Store& store, const std::vector<Canonical>& queries,
                                             const std::string& machine, bool nearest) {
  return best_many(store, queries, std::vector<std::string>{machine}, nearest);
}

std::vector<std::optional<Answer>> best_many(Store& store, const std::vector<Canonical>& queries,
                                             const std::vector<std::string>& machines,
                                             bool nearest) {
  // The workloads' own facts in one batch lookup (Store::top_k_many), asked in the order of their
  // hashes so that consecutive searches descend the store's index along shared pages; the
  // workloads without facts of their own one by one; answered in the caller's order.
  std::vector<std::size_t> order(queries.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(),
            [&](std::size_t a, std::size_t b) { return queries[a].hash < queries[b].hash; });
  std::vector<std::string> hashes, keys;
  hashes.reserve(order.size());
  keys.reserve(order.size());
  for (std::size_t i : order) {
    hashes.push_back(queries[i].hash);
    keys.push_back(queries[i].key);
  }
  return store.reading([&] {
    std::vector<std::optional<Answer>> answers(queries.size());
    auto facts = store.top_k_many(hashes, keys, machines, 1);
    for (std::size_t j = 0; j < order.size(); ++j) {
      const Canonical& query = queries[order[j]];
      auto top = facts[j].empty() ? answers_beyond_exact(store, query, machines, 1, nearest)
                                  : exact_answers(std::move(facts[j]), query);
      if (!top.empty()) answers[order[j]] = std::move(top.front());
    }
    return answers;
  });
}

Measurement to_canonical(const Canonical& c, Measurement m) {
  m.transform.params = translate(m.transform.params, to_canonical_names(c.sigma));
  if (!m.binding.empty()) {
    std::map<std::string, std::string> to_canonical_symbol;
    std::string have;
    for (const auto& [canonical, input] : c.sigma.symbol) {
      to_canonical_symbol.emplace(input, canonical);
      have += (have.empty() ? "" : ", ") + input;
    }
    Binding b;
    for (const auto& [symbol, length] : m.binding) {
      const auto it = to_canonical_symbol.find(symbol);
      if (it == to_canonical_symbol.end())
        throw SpecError("binding names the symbol '" + symbol + "', which the spec does not have" +
                        (have.empty() ? std::string(" (it has no symbolic length)")
                                      : " (its symbols: " + have + ")"));
      b.emplace(it->second, length);
    }
    for (const auto& [input, canonical] : to_canonical_symbol)
      if (!b.count(canonical))
        throw SpecError("binding " + to_string(m.binding) + " leaves the symbol '" + input +
                        "' unbound");
    m.binding = std::move(b);
  }
  return m;
}

nlohmann::ordered_json to_json(const Answer& a) {
  using ojson = nlohmann::ordered_json;
  ojson j;
  j["transform"] = a.fact.transform.name;
  j["params"] = a.params;
  j["match"] = to_string(a.match);
  j["approximate"] = a.approximate;
  if (a.approximate) j["distance"] = a.distance;
  if (a.match == Match::symbolic) j["binding"] = a.binding;
  if (a.match != Match::exact)
    j["measured_on"] = {{"hash", a.fact.workload_hash}, {"key", a.fact.workload_key}};
  j["median_s"] = a.fact.median_s;
  j["min_s"] = a.fact.min_s;
  j["gflops"] = a.fact.gflops ? ojson(*a.fact.gflops) : nullptr;
  j["flops"] = a.fact.flops ? ojson(*a.fact.flops) : nullptr;
  j["measured_at"] = ojson::array();
  for (const auto& b : a.fact.bindings) j["measured_at"].push_back(b);
  j["measurements"] = a.fact.measurements;
  j["repetitions"] = a.fact.repetitions;
  j["machine"] = a.fact.machine;
  j["hash"] = a.query_hash;
  j["key"] = a.query_key;
  j["canonical_params"] = a.fact.transform.params;
  if (!a.fact.origin.is_null()) j["origin"] = a.fact.origin;
  return j;
}

}  // namespace einsumdb
