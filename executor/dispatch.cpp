#include "einsumdb/executor/dispatch.hpp"

#include <algorithm>

#include "einsumdb/core/error.hpp"

namespace einsumdb {

Candidate default_candidate(const BatchedEinsum& e) {
  // The reference applies to everything the model allows, with the last priority.
  const Strategy* best = nullptr;
  for (const auto& s : builtin_strategies())
    if ((!best || s.priority < best->priority) && !s.rejects(e)) best = &s;
  if (!best) {
    const auto why = find_strategy("reference")->rejects(e);
    throw SpecError("no strategy computes " + e.einsum_string() + ": " +
                    why.value_or("every strategy refuses it"));
  }
  return {best->name, nlohmann::json::object()};
}

Results execute_or_default(const Bound& bound, Candidate& c, bool stored, std::string* refused) {
  try {
    return execute(bound, c.strategy, c.params);
  } catch (const SpecError& e) {
    if (!stored) throw;
    if (refused) *refused = e.what();
    Candidate fallback = default_candidate(bound.einsum());
    if (c.params.contains("threads")) fallback.params["threads"] = c.params["threads"];
    c = std::move(fallback);
    return execute(bound, c.strategy, c.params);
  }
}

namespace {

bool is_index_list_key(const std::string& key) {
  return key == "order" || key == "m" || key == "n" || key == "k";
}

// "i:16" as [{"index": "i"}, 16], or nullopt.
std::optional<nlohmann::json> index_size(const std::string& text) {
  if (text.size() < 3 || !is_index_char(text[0]) || text[1] != ':' ||
      !std::all_of(text.begin() + 2, text.end(), [](char c) { return c >= '0' && c <= '9'; }) ||
      text.size() > 12)
    return std::nullopt;
  return nlohmann::json::array({index_param(text[0]), std::stoll(text.substr(2))});
}

}  // namespace

void apply_param(nlohmann::json& params, const std::string& item) {
  const auto eq = item.find('=');
  if (eq == std::string::npos || eq == 0)
    throw SpecError("--param '" + item + "': expected KEY=VALUE, e.g. threads=2 or order=ikj");
  const std::string key = item.substr(0, eq), value = item.substr(eq + 1);
  if (is_index_list_key(key) &&
      std::all_of(value.begin(), value.end(), [](char c) { return is_index_char(c); })) {
    params[key] = index_list_param(value);
    return;
  }
  if (key == "tile")
    if (const auto t = index_size(value)) {
      params[key] = *t;
      return;
    }
  if (key == "block") {
    nlohmann::json blocks = nlohmann::json::array();
    for (std::size_t at = 0; at <= value.size();) {
      const std::size_t comma = std::min(value.find(',', at), value.size());
      const auto b = index_size(value.substr(at, comma - at));
      if (!b) break;
      blocks.push_back(*b);
      at = comma + 1;
      if (comma == value.size()) {
        params[key] = blocks;
        return;
      }
    }
  }
  try {
    params[key] = nlohmann::json::parse(value);
  } catch (const nlohmann::json::exception&) {
    params[key] = value;
  }
}

}  // namespace einsumdb
