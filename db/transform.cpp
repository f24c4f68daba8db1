#include "einsumdb/db/transform.hpp"

#include "einsumdb/core/error.hpp"

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

namespace {

// Renames every {"index": x} and {"array": x} through rename(kind, x), which returns nullptr for
// a name it does not know.
template <class Rename>
nlohmann::json rename_params(const nlohmann::json& params, const Rename& rename) {
  if (params.is_object()) {
    if (params.size() == 1) {
      for (const char* kind : {"index", "array"}) {
        const auto it = params.find(kind);
        if (it == params.end() || !it->is_string()) continue;
        const std::string& name = it->get_ref<const std::string&>();
        const std::string* renamed = rename(kind[0] == 'i', name);
        if (!renamed)
          throw SpecError(std::string("transform parameter {\"") + kind + "\": \"" + name +
                          "\"} names no " + kind + " of the workload");
        return {{kind, *renamed}};
      }
    }
    nlohmann::json out = nlohmann::json::object();
    for (const auto& [k, v] : params.items()) out[k] = rename_params(v, rename);
    return out;
  }
  if (params.is_array()) {
    nlohmann::json out = nlohmann::json::array();
    for (const auto& v : params) out.push_back(rename_params(v, rename));
    return out;
  }
  return params;
}

}  // namespace

nlohmann::json translate(const nlohmann::json& params, const NameMap& names) {
  return rename_params(params, [&](bool index, const std::string& name) -> const std::string* {
    const auto& map = index ? names.index : names.array;
    const auto found = map.find(name);
    return found == map.end() ? nullptr : &found->second;
  });
}

nlohmann::json to_input_names(const nlohmann::json& params, const Substitution& sigma) {
  std::string letter;
  return rename_params(params, [&](bool index, const std::string& name) -> const std::string* {
    if (!index) {
      const auto found = sigma.array.find(name);
      return found == sigma.array.end() ? nullptr : &found->second;
    }
    if (name.size() != 1) return nullptr;
    const auto found = sigma.index.find(name[0]);
    if (found == sigma.index.end()) return nullptr;
    letter.assign(1, found->second);
    return &letter;
  });
}

}  // namespace einsumdb
