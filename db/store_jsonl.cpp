// Moving facts: measurements exported as JSON lines and imported (merged) from them.
#include "einsumdb/db/store.hpp"

#include <xxhash.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <istream>
#include <map>
#include <ostream>
#include <set>
#include <thread>
#include <unordered_map>

#include "einsumdb/canon/enum_names.hpp"
#include "einsumdb/canon/metrics.hpp"
#include "einsumdb/canon/parse.hpp"
#include "einsumdb/core/error.hpp"
#include "einsumdb/db/store_impl.hpp"
namespace einsumdb {

using json = nlohmann::json;
using ojson = nlohmann::ordered_json;
using namespace store_detail;

std::int64_t Store::export_page(std::ostream& out, const ListFilter& f, std::int64_t after,
                                std::size_t limit, std::size_t* written) {
  sql::Statement s(impl_->conn, kExportPageSql);
  bind_filter(s, f, /*limit=*/false);
  s.bind(4, after).bind(5, limit ? static_cast<std::int64_t>(limit) : kNoLimit);
  std::size_t n = 0;
  while (s.step()) {
    out << export_row(s).dump() << '\n';
    after = s.column_int(kExportColumnCount);
    ++n;
  }
  if (written) *written = n;
  return after;
}

std::size_t Store::export_jsonl(std::ostream& out, const ListFilter& f) {
  constexpr std::size_t kPage = 10000;
  std::size_t total = 0, n = 0;
  for (std::int64_t after = 0;; total += n) {
    after = export_page(out, f, after, kPage, &n);
    if (n < kPage) return total + n;
  }
}

Store::ImportResult Store::import_jsonl(std::istream& in, const std::string& source) {
  ImportResult result;
  Transaction tx(*this);
  std::map<std::string, RunId> runs;            // source run -> local run
  std::map<std::int64_t, std::size_t> created;  // runs created here -> measurements inserted
  std::map<std::string, Canonical> canonicals;  // spec JSON text -> its canonical form
  std::string line;
  for (std::size_t number = 1; std::getline(in, line); ++number) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const std::string where = source + ":" + std::to_string(number);
    try {
      const json j = json::parse(line);
      check_json_depth(j, "line");
      const json& w = j.at("workload");
      const std::string hash = w.at("hash").get<std::string>();
      // Cached by the spec itself, and every line's stated hash checked against it.
      const std::string spec_text = w.at("spec").dump();
      auto it = canonicals.find(spec_text);
      if (it == canonicals.end())
        it = canonicals.emplace(spec_text, canonicalize(parse_spec_json(w.at("spec")))).first;
      if (it->second.hash != hash)
        throw SpecError("workload " + hash + " does not match its spec (which canonicalizes to " +
                        it->second.hash + ")");
      const Machine machine = machine_from_json(j.at("machine"));
      const auto mid = machine_id(machine);
      const json& r = j.at("run");
      const std::string run_key = machine.fingerprint() + "\n" + r.at("started_at").dump() + "\n" +
                                  r.at("label").dump() + "\n" + r.at("command").dump();
      auto run = runs.find(run_key);
      if (run == runs.end()) {
        auto find = impl_->stmt(
            "SELECT id FROM runs WHERE machine_id = ? AND started_at = ? AND label = ? AND "
            "command = ? AND tool_version = ?");
        find.bind(1, id_value(mid)).bind(2, r.at("started_at").get<std::string>());
        find.bind(3, r.at("label").get<std::string>()).bind(4, r.at("command").get<std::string>());
        find.bind(5, r.at("tool_version").get<std::string>());
        RunId id;
        if (find.step()) {
          id = RunId{find.column_int(0)};
        } else {
          id = begin_run({r.at("label"), r.at("command"), r.at("tool_version"), r.at("started_at")},
                         mid);
          created[id_value(id)] = 0;
        }
        run = runs.emplace(run_key, id).first;
      }
      Measurement m;
      m.transform = {j.at("transform").at("name").get<std::string>(),
                     j.at("transform").at("params")};
      const auto status = parse_outcome(j.at("status").get<std::string>());
      if (!status) throw SpecError("unknown status '" + j.at("status").get<std::string>() + "'");
      m.status = *status;
      m.seconds = j.at("seconds").get<std::vector<double>>();
      if (!j.at("max_rel_err").is_null()) m.max_rel_err = j.at("max_rel_err").get<double>();
      if (!j.at("bytes_moved").is_null()) m.bytes_moved = j.at("bytes_moved").get<double>();
      m.recorded_at = j.at("recorded_at").get<std::string>();
      // Written by exports since schema 3 (in canonical names, as stored); absent before.
      if (j.contains("binding") && !j.at("binding").is_null())
        m.binding = j.at("binding").get<Binding>();
      if (j.contains("flops") && !j.at("flops").is_null()) m.flops = j.at("flops").get<double>();
      if (j.contains("origin")) m.origin = j.at("origin");
      if (record(run->second, workload_id(it->second), mid, m)) {
        ++result.inserted;
        if (const auto c = created.find(id_value(run->second)); c != created.end()) ++c->second;
      } else {
        ++result.duplicates;
      }
    } catch (const json::exception& e) {
      throw SpecError(where + ": not an export line: " + e.what());
    } catch (const SpecError& e) {
      throw SpecError(where + ": " + e.what());
    }
  }
  // A run is created only for what is new: those that received nothing go again.
  for (const auto& [id, inserted] : created) {
    if (inserted > 0) {
      ++result.runs;
      continue;
    }
    impl_->stmt("DELETE FROM runs WHERE id = ?").bind(1, id).run();
    impl_->known_runs.erase(id);
  }
  tx.commit();
  return result;
}

}  // namespace einsumdb
