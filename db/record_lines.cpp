#include "einsumdb/db/record_lines.hpp"

#include <nlohmann/json.hpp>

#include "einsumdb/canon/parse.hpp"
#include "einsumdb/core/error.hpp"
#include "einsumdb/db/retrieve.hpp"

namespace einsumdb {

using json = nlohmann::json;

RecordLines::RecordLines(std::string label, Machine machine)
    : label_(std::move(label)), machine_(std::move(machine)) {}

void RecordLines::add(const std::string& text) {
  json j;
  try {
    j = json::parse(text);
  } catch (const json::exception& e) {
    throw SpecError(e.what());
  }
  add(j);
}

void RecordLines::add(const json& j) {
  try {
    check_json_depth(j, "line");
    check_record_line_keys(j);
    const std::string spec_text = j.at("spec").dump();
    auto it = canonicals_.find(spec_text);
    if (it == canonicals_.end())
      it = canonicals_.emplace(spec_text, canonicalize(parse_spec_json(j.at("spec")))).first;
    Machine machine = j.contains("machine") ? machine_from_json(j.at("machine")) : machine_;
    Measurement m = to_canonical(it->second, measurement_from_json(j));
    Key key{j.contains("run") ? j.at("run").get<std::string>() : label_, machine.fingerprint()};
    if (!runs_.count(key)) order_.push_back(key);
    machines_.emplace(key, std::move(machine));
    runs_[key].emplace_back(&it->second, std::move(m));
    ++lines_;
  } catch (const json::exception& e) {
    throw SpecError(e.what());
  }
}

std::vector<RecordLines::Run> RecordLines::record(Store& store, const std::string& command) const {
  std::vector<Run> out;
  for (const Key& key : order_) {
    RunInfo info;
    info.label = key.first;
    info.command = command;
    const auto r = store.record_run(info, machines_.at(key), runs_.at(key));
    out.push_back({r.run, key.first, key.second, r.inserted, r.duplicates});
  }
  return out;
}

}  // namespace einsumdb
