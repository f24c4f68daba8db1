#include "einsumdb/db/retrieve.hpp"

namespace einsumdb {

std::vector<Answer> top_k_for(Store& store, const Canonical& query, const std::string& machine,
                              std::size_t k, bool nearest) {
  std::vector<Answer> answers;
  for (Fact& f : store.top_k(query.hash, machine, k)) {
    Answer a;
    a.params = translate(f.transform.params, to_input_names(query.sigma));
    a.fact = std::move(f);
    a.query_hash = query.hash;
    a.query_key = query.key;
    answers.push_back(std::move(a));
  }
  if (!answers.empty() || !nearest) return answers;
  auto near = store.nearest(query, machine);
  if (!near) return answers;
  // Measured workload's canonical names -> structure names -> the query's names.
  const nlohmann::json structure = translate(near->fact.transform.params, near->to_structure);
  Answer a;
  a.params = translate(structure, to_input_names(query.structure_sigma));
  a.fact = std::move(near->fact);
  a.approximate = true;
  a.distance = near->distance;
  a.query_hash = query.hash;
  a.query_key = query.key;
  answers.push_back(std::move(a));
  return answers;
}

std::optional<Answer> best_for(Store& store, const Canonical& query, const std::string& machine,
                               bool nearest) {
  auto answers = top_k_for(store, query, machine, 1, nearest);
  if (answers.empty()) return std::nullopt;
  return std::move(answers.front());
}

Measurement to_canonical(const Canonical& c, Measurement m) {
  m.transform.params = translate(m.transform.params, to_canonical_names(c.sigma));
  return m;
}

nlohmann::ordered_json to_json(const Answer& a) {
  nlohmann::ordered_json j;
  j["transform"] = a.fact.transform.name;
  j["params"] = a.params;
  j["approximate"] = a.approximate;
  if (a.approximate) {
    j["distance"] = a.distance;
    j["measured_on"] = {{"hash", a.fact.workload_hash}, {"key", a.fact.workload_key}};
  }
  j["median_s"] = a.fact.median_s;
  j["min_s"] = a.fact.min_s;
  j["gflops"] = a.fact.gflops ? nlohmann::ordered_json(*a.fact.gflops) : nullptr;
  j["measurements"] = a.fact.measurements;
  j["repetitions"] = a.fact.repetitions;
  j["machine"] = a.fact.machine;
  j["hash"] = a.query_hash;
  j["key"] = a.query_key;
  j["canonical_params"] = a.fact.transform.params;
  return j;
}

}  // namespace einsumdb
