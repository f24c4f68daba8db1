#include "einsumdb/db/transform.hpp"

#include "einsumdb/canon/error.hpp"

namespace einsumdb {

NameMap to_input_names(const Substitution& sigma) {
  NameMap m;
  for (const auto& [c, in] : sigma.index) m.index.emplace(std::string(1, c), std::string(1, in));
  for (const auto& [c, in] : sigma.array) m.array.emplace(c, in);
  return m;
}

NameMap to_canonical_names(const Substitution& sigma) {
  NameMap m;
  for (const auto& [c, in] : sigma.index) m.index.emplace(std::string(1, in), std::string(1, c));
  for (const auto& [c, in] : sigma.array) m.array.emplace(in, c);
  return m;
}

nlohmann::json translate(const nlohmann::json& params, const NameMap& names) {
  if (params.is_object()) {
    if (params.size() == 1) {
      for (const char* kind : {"index", "array"}) {
        const auto it = params.find(kind);
        if (it == params.end() || !it->is_string()) continue;
        const auto& map = std::string_view(kind) == "index" ? names.index : names.array;
        const auto found = map.find(it->get<std::string>());
        if (found == map.end())
          throw SpecError(std::string("transform parameter {\"") + kind + "\": \"" +
                          it->get<std::string>() + "\"} names no " + kind + " of the workload");
        return {{kind, found->second}};
      }
    }
    nlohmann::json out = nlohmann::json::object();
    for (const auto& [k, v] : params.items()) out[k] = translate(v, names);
    return out;
  }
  if (params.is_array()) {
    nlohmann::json out = nlohmann::json::array();
    for (const auto& v : params) out.push_back(translate(v, names));
    return out;
  }
  return params;
}

}  // namespace einsumdb
