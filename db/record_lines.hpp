// Measurement files as `einsumdb record` and Store.record in Python take them: JSON lines, each a
// spec, a transform and its measurement, optionally a run label and a machine. Lines are read and
// checked first, all of them; then they are recorded as one run per (label, machine), each run
// committed atomically, so that a file with a bad line records nothing.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "einsumdb/canon/canonicalize.hpp"
#include "einsumdb/db/machine.hpp"
#include "einsumdb/db/store.hpp"

namespace einsumdb {

class RecordLines {
 public:
  // `label` is the run of a line that names none, `machine` the machine of a line that names none.
  RecordLines(std::string label, Machine machine);

  // Reads and checks one line: its nesting depth, its keys (check_record_line_keys), its spec
  // and its measurement. Throws SpecError naming what is wrong; keeps nothing of a bad line.
  void add(const std::string& text);
  // The same for a line already read as JSON (Python's dicts).
  void add(const nlohmann::json& line);
  std::size_t size() const { return lines_; }

  struct Run {
    std::int64_t id = 0;  // 0: every measurement of it was stored already; no run was created
    std::string label, machine;  // machine: its fingerprint
    std::size_t inserted = 0, duplicates = 0;
  };
  // One run per (label, machine), in the order their first lines came, each in a transaction of
  // its own; `command` is stored with each run.
  std::vector<Run> record(Store& store, const std::string& command) const;

 private:
  using Key = std::pair<std::string, std::string>;  // (label, machine fingerprint)
  std::string label_;
  Machine machine_;
  std::map<std::string, Canonical> canonicals_;  // spec JSON text -> its canonical form
  std::map<Key, std::vector<std::pair<const Canonical*, Measurement>>> runs_;
  std::map<Key, Machine> machines_;
  std::vector<Key> order_;
  std::size_t lines_ = 0;
};

}  // namespace einsumdb
