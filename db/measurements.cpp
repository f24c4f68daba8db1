// Measurements: their statistics and soundness, recording, and the queries over them (top-k,
// nearest size, list, show).
#include "einsumdb/db/store.hpp"

#include <sqlite3.h>
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
#include "einsumdb/canon/error.hpp"
#include "einsumdb/canon/metrics.hpp"
#include "einsumdb/canon/parse.hpp"
#include "einsumdb/db/store_impl.hpp"
namespace einsumdb {

using json = nlohmann::json;
using ojson = nlohmann::ordered_json;
using namespace store_detail;

Summary summarize(const std::vector<double>& seconds) {
  Summary s;
  s.repetitions = static_cast<int>(seconds.size());
  if (seconds.empty()) return s;
  s.median_s = median(seconds);
  s.min_s = *std::min_element(seconds.begin(), seconds.end());
  double sum = 0;
  for (double t : seconds) sum += t;
  s.mean_s = sum / static_cast<double>(seconds.size());
  if (seconds.size() > 1) {
    double ss = 0;
    for (double t : seconds) ss += (t - s.mean_s) * (t - s.mean_s);
    s.stddev_s = std::sqrt(ss / static_cast<double>(seconds.size() - 1));
  }
  return s;
}

void check_measurement(const Measurement& m) {
  for (double t : m.seconds)
    if (!std::isfinite(t) || t < 0)
      throw SpecError("measurement of '" + m.transform.name + "': time " + format_double(t) +
                      " is not a finite, non-negative number of seconds");
  if (m.status == Outcome::ok) {
    if (m.seconds.empty())
      throw SpecError("measurement of '" + m.transform.name + "' has status ok but no times");
    if (!m.max_rel_err || !std::isfinite(*m.max_rel_err) || *m.max_rel_err < 0)
      throw SpecError("measurement of '" + m.transform.name +
                      "' has status ok but no max_rel_err: only verified results may be recorded "
                      "as ok");
  }
  if (m.transform.name.empty()) throw SpecError("measurement has no transform name");
}

Measurement measurement_from_json(const json& j) {
  Measurement m;
  const json& t = j.at("transform");
  if (!t.is_object() || !t.contains("name"))
    throw SpecError("'transform' must be {\"name\": ..., \"params\": {...}}");
  for (const auto& [k, v] : t.items()) {
    (void)v;
    if (k != "name" && k != "params") throw SpecError("transform: unknown key '" + k + "'");
  }
  m.transform.name = t.at("name").get<std::string>();
  m.transform.params = t.value("params", json::object());
  const std::string status = j.value("status", "ok");
  const auto s = parse_outcome(status);
  if (!s) throw SpecError("unknown status '" + status + "'; expected ok, invalid, failed, timeout");
  m.status = *s;
  if (j.contains("seconds")) m.seconds = j.at("seconds").get<std::vector<double>>();
  if (j.contains("max_rel_err") && !j.at("max_rel_err").is_null())
    m.max_rel_err = j.at("max_rel_err").get<double>();
  if (j.contains("bytes_moved") && !j.at("bytes_moved").is_null())
    m.bytes_moved = j.at("bytes_moved").get<double>();
  check_measurement(m);
  return m;
}

bool Store::record(RunId run_key, WorkloadId workload_key, MachineId machine_key,
                   const Measurement& m) {
  const std::int64_t run = id_value(run_key), workload = id_value(workload_key),
                     machine = id_value(machine_key);
  check_measurement(m);
  return impl_->write([&] {
    impl_->require_run(run);
    const auto& w = impl_->workload(workload);
    const std::string& fp = impl_->machine_fingerprint(machine);
    const std::string params = m.transform.params_text();
    const std::int64_t transform = impl_->transform_id(m.transform, params);
    const Summary s = summarize(m.seconds);
    const auto bytes = m.bytes_moved ? m.bytes_moved : w.footprint;
    std::optional<double> gflops;
    if (m.status == Outcome::ok && w.flops && s.median_s > 0) gflops = *w.flops / s.median_s * 1e-9;

    std::string samples = "[", digest_text = w.hash + "\n" + m.transform.name + "\n" + params +
                                             "\n" + fp + "\n" + std::string(to_string(m.status)) +
                                             "\n";
    for (std::size_t i = 0; i < m.seconds.size(); ++i) {
      if (i) samples += ',';
      samples += format_double(m.seconds[i]);
    }
    samples += ']';
    digest_text += samples + "\n" + (m.max_rel_err ? format_double(*m.max_rel_err) : "-") + "\n" +
                   (m.bytes_moved ? format_double(*m.bytes_moved) : "-");

    auto ins = impl_->stmt(
        "INSERT OR IGNORE INTO measurements(run_id, workload_id, transform_id, machine_id, status, "
        "repetitions, median_s, min_s, mean_s, stddev_s, gflops, bytes_moved, max_rel_err, "
        "samples, recorded_at, digest) VALUES(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)");
    ins.bind(1, run).bind(2, workload).bind(3, transform).bind(4, machine);
    ins.bind(5, to_string(m.status)).bind(6, s.repetitions);
    const bool timed = s.repetitions > 0;
    ins.bind(7, timed ? std::optional(s.median_s) : std::nullopt);
    ins.bind(8, timed ? std::optional(s.min_s) : std::nullopt);
    ins.bind(9, timed ? std::optional(s.mean_s) : std::nullopt);
    ins.bind(10, timed ? std::optional(s.stddev_s) : std::nullopt);
    ins.bind(11, gflops).bind(12, bytes).bind(13, m.max_rel_err).bind(14, samples);
    ins.bind(15, !m.recorded_at.empty()       ? m.recorded_at
                 : !impl_->batch_time.empty() ? impl_->batch_time
                                              : now_iso8601());
    const XXH128_hash_t digest = XXH3_128bits(digest_text.data(), digest_text.size());
    XXH128_canonical_t digest_bytes;
    XXH128_canonicalFromHash(&digest_bytes, digest);
    ins.bind_blob(16, digest_bytes.digest, sizeof digest_bytes.digest).run();
    return impl_->conn.changes() == 1;
  });
}

Store::RunResult Store::record_run(
    const RunInfo& run, const Machine& machine,
    const std::vector<std::pair<const Canonical*, Measurement>>& measurements) {
  Transaction tx(*this);
  impl_->batch_time = run.started_at.empty() ? now_iso8601() : run.started_at;
  struct ClearTime {
    std::string& t;
    ~ClearTime() { t.clear(); }
  } clear_time{impl_->batch_time};
  RunResult r;
  const auto mid = machine_id(machine);
  const RunId run_id = begin_run(run, mid);
  r.run = id_value(run_id);
  for (const auto& [canonical, m] : measurements) {
    if (record(run_id, workload_id(*canonical), mid, m))
      ++r.inserted;
    else
      ++r.duplicates;
  }
  tx.commit();
  return r;
}

std::vector<Fact> Store::top_k(const std::string& workload_hash, const std::string& machine,
                               std::size_t k) {
  const auto mid = find_machine(machine);
  if (!mid) return {};
  auto w = impl_->stmt("SELECT id, key, flops FROM workloads WHERE hash = ?");
  w.bind(1, workload_hash);
  if (!w.step()) return {};
  const std::int64_t wid = w.column_int(0);
  const std::string key = w.column_text(1);
  const std::optional<double> flops = w.column_optional_double(2);
  auto s = impl_->stmt(
      "SELECT transform_id, median_s, min_s, repetitions FROM measurements WHERE workload_id = ? "
      "AND machine_id = ? AND status = 'ok' AND max_rel_err IS NOT NULL");
  s.bind(1, wid).bind(2, id_value(*mid));
  struct Group {
    Fact fact;
    std::vector<double> medians;
  };
  std::map<std::int64_t, Group> groups;
  while (s.step()) {
    auto& g = groups[s.column_int(0)];
    if (g.medians.empty()) g.fact.min_s = s.column_double(2);
    g.medians.push_back(s.column_double(1));
    g.fact.min_s = std::min(g.fact.min_s, s.column_double(2));
    g.fact.repetitions += static_cast<int>(s.column_int(3));
  }
  for (auto& [tid, g] : groups) g.fact.transform = impl_->transform(tid);
  std::vector<Fact> facts;
  for (auto& [id, g] : groups) {
    g.fact.workload_hash = workload_hash;
    g.fact.workload_key = key;
    g.fact.machine = machine;
    g.fact.measurements = static_cast<int>(g.medians.size());
    g.fact.median_s = median(g.medians);
    if (flops && g.fact.median_s > 0) g.fact.gflops = *flops / g.fact.median_s * 1e-9;
    facts.push_back(std::move(g.fact));
  }
  // Fastest median first; ties broken by strategy and parameters, so answers are deterministic.
  std::sort(facts.begin(), facts.end(), [](const Fact& a, const Fact& b) {
    if (a.median_s != b.median_s) return a.median_s < b.median_s;
    if (a.transform.name != b.transform.name) return a.transform.name < b.transform.name;
    return a.transform.params_text() < b.transform.params_text();
  });
  if (k && facts.size() > k) facts.resize(k);
  return facts;
}

std::optional<Fact> Store::best(const std::string& workload_hash, const std::string& machine) {
  auto facts = top_k(workload_hash, machine, 1);
  if (facts.empty()) return std::nullopt;
  return std::move(facts.front());
}

std::optional<Store::Nearest> Store::nearest(const Canonical& query, const std::string& machine) {
  auto s = impl_->stmt(
      "SELECT w.hash, w.structure_lengths, w.structure_map FROM workloads w "
      "WHERE w.structure_hash = ? AND w.hash <> ? AND EXISTS (SELECT 1 FROM measurements m "
      "JOIN machines mc ON mc.id = m.machine_id WHERE m.workload_id = w.id AND "
      "mc.fingerprint = ? AND m.status = 'ok')");
  s.bind(1, query.structure_hash).bind(2, query.hash).bind(3, machine);
  std::optional<std::tuple<double, std::string, std::string>> found;  // distance, hash, map
  while (s.step()) {
    const json lengths = json::parse(s.column_text(1));
    if (lengths.size() != query.structure_lengths.size()) continue;
    double d2 = 0;
    for (std::size_t k = 0; k < lengths.size(); ++k) {
      const Length& q = query.structure_lengths[k];
      const bool symbolic = lengths[k].is_string();
      if (symbolic != q.symbolic()) {
        d2 += 1.0;  // a symbol against a number: a fixed penalty of one e-fold
      } else if (!symbolic) {
        const double r = std::log(static_cast<double>(q.value) / lengths[k].get<double>());
        d2 += r * r;
      }
    }
    const double d = std::sqrt(d2);
    const std::string hash = s.column_text(0);
    if (!found || d < std::get<0>(*found) ||
        (d == std::get<0>(*found) && hash < std::get<1>(*found)))
      found = std::make_tuple(d, hash, s.column_text(2));
  }
  if (!found) return std::nullopt;
  auto fact = best(std::get<1>(*found), machine);
  if (!fact) return std::nullopt;
  return Nearest{std::move(*fact), std::get<0>(*found),
                 name_map_from_json(json::parse(std::get<2>(*found)))};
}

std::vector<WorkloadSummary> Store::list(const ListFilter& f) {
  auto s = impl_->stmt(
      "SELECT w.hash, w.key, count(m.id), sum(m.status = 'ok'), "
      "max(CASE WHEN m.status = 'ok' THEN m.gflops END), max(m.recorded_at), "
      "(SELECT t2.strategy FROM measurements m2 JOIN transforms t2 ON t2.id = m2.transform_id "
      " JOIN machines c2 ON c2.id = m2.machine_id WHERE m2.workload_id = w.id AND m2.status = 'ok' "
      " AND (?1 = '' OR c2.fingerprint LIKE ?1 || '%') AND (?2 = '' OR t2.strategy = ?2) "
      " AND (?3 = '' OR m2.recorded_at >= ?3) ORDER BY m2.median_s LIMIT 1) "
      "FROM workloads w JOIN measurements m ON m.workload_id = w.id "
      "JOIN machines mc ON mc.id = m.machine_id JOIN transforms t ON t.id = m.transform_id "
      "WHERE (?1 = '' OR mc.fingerprint LIKE ?1 || '%') AND (?2 = '' OR t.strategy = ?2) "
      "AND (?3 = '' OR m.recorded_at >= ?3) GROUP BY w.id ORDER BY w.key LIMIT ?4");
  s.bind(1, f.machine).bind(2, f.strategy).bind(3, f.since);
  s.bind(4, f.limit ? static_cast<std::int64_t>(f.limit) : std::int64_t{-1});
  std::vector<WorkloadSummary> rows;
  while (s.step())
    rows.push_back({s.column_text(0), s.column_text(1), static_cast<int>(s.column_int(2)),
                    static_cast<int>(s.column_int(3)), s.column_optional_double(4),
                    s.column_text(6), s.column_text(5)});
  return rows;
}

namespace store_detail {

extern const char* const kExportColumns =
    "SELECT w.hash, w.key, w.spec, t.strategy, t.params, mc.fingerprint, mc.cpu_model, mc.cores, "
    "mc.isa, mc.blas, mc.description, r.id, r.label, r.command, r.tool_version, r.started_at, "
    "m.status, m.samples, m.repetitions, m.median_s, m.min_s, m.mean_s, m.stddev_s, m.gflops, "
    "m.bytes_moved, m.max_rel_err, m.recorded_at "
    "FROM measurements m JOIN workloads w ON w.id = m.workload_id "
    "JOIN transforms t ON t.id = m.transform_id JOIN machines mc ON mc.id = m.machine_id "
    "JOIN runs r ON r.id = m.run_id ";

ojson export_row(sql::Statement& s) {
  auto opt = [&](int col) -> ojson {
    if (s.is_null(col)) return nullptr;
    return s.column_double(col);
  };
  return {{"workload",
           {{"hash", s.column_text(0)},
            {"key", s.column_text(1)},
            {"spec", ojson::parse(s.column_text(2))}}},
          {"transform", {{"name", s.column_text(3)}, {"params", ojson::parse(s.column_text(4))}}},
          {"machine",
           {{"fingerprint", s.column_text(5)},
            {"cpu_model", s.column_text(6)},
            {"cores", s.column_int(7)},
            {"isa", s.column_text(8)},
            {"blas", s.column_text(9)},
            {"description", ojson::parse(s.column_text(10))}}},
          {"run",
           {{"id", s.column_int(11)},
            {"label", s.column_text(12)},
            {"command", s.column_text(13)},
            {"tool_version", s.column_text(14)},
            {"started_at", s.column_text(15)}}},
          {"status", s.column_text(16)},
          {"seconds", ojson::parse(s.column_text(17))},
          {"repetitions", s.column_int(18)},
          {"median_s", opt(19)},
          {"min_s", opt(20)},
          {"mean_s", opt(21)},
          {"stddev_s", opt(22)},
          {"gflops", opt(23)},
          {"bytes_moved", opt(24)},
          {"max_rel_err", opt(25)},
          {"recorded_at", s.column_text(26)}};
}

}  // namespace store_detail

std::vector<ojson> Store::show(const std::string& workload_hash) {
  sql::Statement s(impl_->conn, std::string(kExportColumns) +
                                    "WHERE w.hash = ? ORDER BY mc.fingerprint, m.status <> 'ok', "
                                    "m.median_s, m.id");
  s.bind(1, workload_hash);
  std::vector<ojson> rows;
  while (s.step()) rows.push_back(export_row(s));
  return rows;
}

ojson to_json(const WorkloadSummary& w) {
  return {{"hash", w.hash},
          {"key", w.key},
          {"measurements", w.measurements},
          {"ok", w.ok},
          {"best_gflops", w.best_gflops ? ojson(*w.best_gflops) : ojson()},
          {"best_strategy", w.best_strategy},
          {"last_recorded", w.last_recorded_at}};
}

}  // namespace einsumdb
