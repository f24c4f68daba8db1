// Measurements: their statistics and soundness, recording, and the queries over them (top-k,
// nearest size, list, show).
#include "einsumdb/core/stats.hpp"
#include "einsumdb/db/error.hpp"
#include "einsumdb/db/store.hpp"

#include <xxhash.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <istream>
#include <limits>
#include <map>
#include <optional>
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
  if (m.flops && !(std::isfinite(*m.flops) && *m.flops > 0))
    throw SpecError("measurement of '" + m.transform.name + "': flops " + format_double(*m.flops) +
                    " is not a positive number");
  if (m.bytes_moved && !(std::isfinite(*m.bytes_moved) && *m.bytes_moved >= 0))
    throw SpecError("measurement of '" + m.transform.name + "': bytes_moved " +
                    format_double(*m.bytes_moved) + " is not a non-negative number");
  for (const auto& [symbol, length] : m.binding)
    if (length < 1)
      throw SpecError("measurement of '" + m.transform.name + "' binds '" + symbol + "' to " +
                      std::to_string(length) + "; a length is at least 1");
  if (!m.origin.is_null() && !m.origin.is_object())
    throw SpecError("measurement of '" + m.transform.name + "': origin must be a JSON object");
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
  if (j.contains("binding") && !j.at("binding").is_null()) {
    const json& b = j.at("binding");
    if (!b.is_object()) throw SpecError("'binding' must be an object {\"symbol\": length, ...}");
    for (const auto& [symbol, length] : b.items()) {
      if (!length.is_number_integer() || length.get<std::int64_t>() < 1)
        throw SpecError("binding: '" + symbol + "' must be bound to a length of at least 1, not " +
                        length.dump());
      m.binding.emplace(symbol, length.get<std::int64_t>());
    }
  }
  if (j.contains("flops") && !j.at("flops").is_null()) m.flops = j.at("flops").get<double>();
  check_measurement(m);
  return m;
}

void check_record_line_keys(const json& line) {
  static constexpr std::string_view kKeys[] = {"spec",        "transform",   "seconds", "status",
                                               "max_rel_err", "bytes_moved", "binding", "flops",
                                               "run",         "machine"};
  if (!line.is_object()) throw SpecError("expected an object");
  for (const auto& [key, value] : line.items()) {
    (void)value;
    if (std::find(std::begin(kKeys), std::end(kKeys), key) == std::end(kKeys))
      throw SpecError("unknown key '" + key + "'");
  }
}

std::string to_string(const Binding& b) {
  std::string out;
  for (const auto& [symbol, length] : b)
    out += (out.empty() ? "" : ",") + symbol + "=" + std::to_string(length);
  return out;
}

namespace {

// One measurement as the columns of its row, ready to bind.
struct Row {
  std::int64_t run = 0, workload = 0, transform = 0, machine = 0;
  std::string_view status;
  Summary summary;
  std::optional<double> gflops, bytes, max_rel_err, flops;
  std::string samples, recorded_at, binding, origin;
  std::array<unsigned char, 16> digest{};
};

#define EINSUMDB_INSERT_MEASUREMENT                                                             \
  "INSERT INTO measurements(run_id, workload_id, transform_id, machine_id, status, "            \
  "repetitions, median_s, min_s, mean_s, stddev_s, gflops, bytes_moved, max_rel_err, samples, " \
  "recorded_at, digest, binding, flops, origin) VALUES"
constexpr int kRowParameters = 19;

// Binds a row as parameters base+1 ... base+19.
template <class S>
void bind_row(S& s, int base, const Row& r) {
  s.bind(base + 1, r.run).bind(base + 2, r.workload).bind(base + 3, r.transform);
  s.bind(base + 4, r.machine).bind(base + 5, r.status).bind(base + 6, r.summary.repetitions);
  const bool timed = r.summary.repetitions > 0;
  s.bind(base + 7, timed ? std::optional(r.summary.median_s) : std::nullopt);
  s.bind(base + 8, timed ? std::optional(r.summary.min_s) : std::nullopt);
  s.bind(base + 9, timed ? std::optional(r.summary.mean_s) : std::nullopt);
  s.bind(base + 10, timed ? std::optional(r.summary.stddev_s) : std::nullopt);
  s.bind(base + 11, r.gflops).bind(base + 12, r.bytes).bind(base + 13, r.max_rel_err);
  s.bind(base + 14, r.samples).bind(base + 15, r.recorded_at);
  s.bind_blob(base + 16, r.digest.data(), r.digest.size());
  if (r.binding.empty())
    s.bind_null(base + 17);
  else
    s.bind(base + 17, r.binding);
  s.bind(base + 18, r.flops);
  if (r.origin.empty())
    s.bind_null(base + 19);
  else
    s.bind(base + 19, r.origin);
}

// "INSERT ... VALUES (?, ...), ... ON CONFLICT DO NOTHING RETURNING 1" for `rows` rows.
std::string multi_row_insert(std::size_t rows) {
  std::string row = "(";
  for (int k = 0; k < kRowParameters; ++k) row += k ? ", ?" : "?";
  row += ")";
  std::string text = EINSUMDB_INSERT_MEASUREMENT;
  for (std::size_t i = 0; i < rows; ++i) text += (i ? ", " : " ") + row;
  return text + " ON CONFLICT DO NOTHING RETURNING 1";
}

// The row of a measurement, checked against its workload: the work and bytes resolved to their
// defaults, the binding validated, the digest computed. Inside a write transaction (it may
// insert the transform).
Row measurement_row(Store::Impl& impl, std::int64_t run, std::int64_t workload,
                    std::int64_t machine, const Measurement& m) {
  impl.require_run(run);
  const Store::Impl::WorkloadInfo w = impl.workload(workload);
  const std::string& fp = impl.machine_fingerprint(machine);
  Row r;
  r.run = run;
  r.workload = workload;
  r.machine = machine;
  // The work and the bytes of one run: given, or the workload's (at the binding).
  r.flops = m.flops;
  r.bytes = m.bytes_moved;
  if (!w.symbolic) {
    if (!m.binding.empty())
      throw SpecError("measurement of '" + m.transform.name + "' binds " + to_string(m.binding) +
                      ", but workload " + w.hash + " has no symbolic length");
    if (!r.flops) r.flops = w.flops;
    if (!r.bytes) r.bytes = w.footprint;
  } else if (!m.binding.empty()) {
    for (const auto& symbol : w.symbolic->symbols)
      if (!m.binding.count(symbol))
        throw SpecError("measurement of '" + m.transform.name + "' binds " + to_string(m.binding) +
                        " but leaves the symbol '" + symbol + "' of workload " + w.hash +
                        " unbound");
    const BatchedEinsum bound = bind_symbols(w.symbolic->form, m.binding);
    if (!r.flops) r.flops = flop_count(bound);
    if (!r.bytes) r.bytes = footprint_bytes(bound);
    r.binding = json(m.binding).dump();
  } else if (m.status == Outcome::ok && !r.flops) {
    throw SpecError("verified measurement of '" + m.transform.name + "' of the symbolic workload " +
                    w.hash +
                    " gives neither the binding its times were taken at (\"binding\": "
                    "{\"N0\": 100000}) nor its flops: its rate would be unknown");
  }
  const std::string params = m.transform.params_text();
  r.transform = impl.transform_id(m.transform, params);
  r.summary = summarize(m.seconds);
  if (m.status == Outcome::ok && r.flops && r.summary.median_s > 0)
    r.gflops = *r.flops / r.summary.median_s * 1e-9;
  r.samples = "[";
  for (std::size_t i = 0; i < m.seconds.size(); ++i) {
    if (i) r.samples += ',';
    r.samples += format_double(m.seconds[i]);
  }
  r.samples += ']';
  r.status = to_string(m.status);
  r.max_rel_err = m.max_rel_err;
  r.recorded_at = !m.recorded_at.empty()     ? m.recorded_at
                  : !impl.batch_time.empty() ? impl.batch_time
                                             : now_iso8601();
  r.digest = measurement_digest({w.hash, m.transform.name, params, fp, r.status, r.samples,
                                 m.max_rel_err, r.bytes, r.flops, r.binding});
  if (!m.origin.is_null()) r.origin = m.origin.dump();
  return r;
}

// A verified measurement changes its group's fact.
void note_fact(Store::Impl& impl, const Row& r) {
  if (r.status == "ok" && r.max_rel_err)
    impl.pending_facts.insert({r.workload, r.machine, r.transform});
}

}  // namespace

bool Store::record(RunId run_key, WorkloadId workload_key, MachineId machine_key,
                   const Measurement& m) {
  check_measurement(m);
  return impl_->write([&] {
    const Row row = measurement_row(*impl_, id_value(run_key), id_value(workload_key),
                                    id_value(machine_key), m);
    auto ins = impl_->stmt(EINSUMDB_INSERT_MEASUREMENT
                           "(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT "
                           "DO NOTHING");
    bind_row(ins, 0, row);
    ins.run();
    const bool inserted = impl_->conn.changes() == 1;
    if (inserted) note_fact(*impl_, row);
    return inserted;
  });
}

Store::RunResult Store::record_run(
    const RunInfo& run, const Machine& machine,
    const std::vector<std::pair<const Canonical*, Measurement>>& measurements) {
  auto once = [&] {
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
    if (impl_->conn.dialect() == sql::Dialect::postgres) {
      // A server answers each statement over the network: rows go in groups, one statement
      // each, and the rows it returns are those inserted (the others were stored already).
      constexpr std::size_t kGroup = 512;
      std::vector<Row> rows;
      rows.reserve(std::min(kGroup, measurements.size()));
      auto flush = [&] {
        if (rows.empty()) return;
        auto& s = rows.size() == kGroup ? impl_->multi_insert : impl_->partial_insert;
        if (!s || (&s == &impl_->partial_insert))
          s = std::make_unique<sql::Statement>(impl_->conn, multi_row_insert(rows.size()));
        s->reset();
        for (std::size_t i = 0; i < rows.size(); ++i)
          bind_row(*s, static_cast<int>(i) * kRowParameters, rows[i]);
        std::size_t inserted = 0;
        while (s->step()) ++inserted;
        s->finish();
        r.inserted += inserted;
        r.duplicates += rows.size() - inserted;
        rows.clear();
      };
      for (const auto& [canonical, m] : measurements) {
        check_measurement(m);
        rows.push_back(
            measurement_row(*impl_, r.run, id_value(workload_id(*canonical)), id_value(mid), m));
        note_fact(*impl_, rows.back());  // a duplicate's fact is recomputed unchanged
        if (rows.size() == kGroup) flush();
      }
      flush();
      impl_->partial_insert.reset();
    } else {
      for (const auto& [canonical, m] : measurements) {
        if (record(run_id, workload_id(*canonical), mid, m))
          ++r.inserted;
        else
          ++r.duplicates;
      }
    }
    // Nothing new: the run, and whatever it would have created, is rolled back.
    if (r.inserted == 0) {
      r.run = 0;
      return r;
    }
    tx.commit();
    return r;
  };
  // A server aborts one of two writers that wait for each other (both inserting the same new
  // transforms, say); the run is whole in memory, so it is simply written again.
  try {
    return sql::retrying(once);
  } catch (const DatabaseError& e) {
    throw DatabaseError(std::string(e.what()) + "; run '" + run.label + "' (" +
                        std::to_string(measurements.size()) +
                        " measurements) was not written: none of it is in the store");
  }
}

bool is_hash_prefix(std::string_view s) {
  return s.size() >= 4 && s.size() <= 32 &&
         s.find_first_not_of("0123456789abcdef") == std::string_view::npos;
}

std::vector<std::string> Store::machines_matching(const std::string& selector) {
  std::vector<std::string> found;
  if (selector.rfind("model=", 0) == 0) {
    const std::string model = selector.substr(6);
    auto s =
        impl_->stmt("SELECT fingerprint FROM machines WHERE cpu_model = ? ORDER BY fingerprint");
    s.bind(1, model);
    while (s.step()) found.push_back(s.column_text(0));
    if (found.empty()) {
      std::string models;
      auto all = impl_->stmt("SELECT DISTINCT cpu_model FROM machines ORDER BY cpu_model");
      while (all.step()) models += (models.empty() ? "'" : ", '") + all.column_text(0) + "'";
      throw SpecError("no machine of model '" + model + "' in '" + path() + "'" +
                      (models.empty() ? " (it holds no machine)" : " (models: " + models + ")"));
    }
    return found;
  }
  if (!is_hash_prefix(selector))
    throw SpecError("machine '" + selector +
                    "' is neither a fingerprint nor a prefix of one (4 to 32 lowercase hex "
                    "digits, as the tables print) nor model=NAME");
  auto s = impl_->stmt(
      "SELECT fingerprint, cpu_model, blas FROM machines WHERE substr(fingerprint, 1, ?) = ? "
      "ORDER BY fingerprint");
  s.bind(1, static_cast<std::int64_t>(selector.size())).bind(2, selector);
  std::string described;
  while (s.step()) {
    found.push_back(s.column_text(0));
    described += "\n  " + s.column_text(0) + "  " + s.column_text(1) + ", " + s.column_text(2);
  }
  if (found.empty())
    throw SpecError("no machine with fingerprint " + selector +
                    (selector.size() < 32 ? "..." : "") + " in '" + path() +
                    "' (einsumdb stats lists the machines)");
  if (found.size() > 1)
    throw SpecError("machine " + selector + " is ambiguous in '" + path() +
                    "': " + std::to_string(found.size()) +
                    " machines start with it; give more digits:" + described);
  return found;
}

std::string Store::resolve_workload(const std::string& prefix) {
  if (!is_hash_prefix(prefix))
    throw SpecError("'" + prefix +
                    "' is not a workload hash or a prefix of one (4 to 32 lowercase "
                    "hex digits)");
  auto s = impl_->stmt(
      "SELECT hash, key FROM workloads WHERE substr(hash, 1, ?) = ? ORDER BY hash LIMIT 11");
  s.bind(1, static_cast<std::int64_t>(prefix.size())).bind(2, prefix);
  std::vector<std::pair<std::string, std::string>> found;
  while (s.step()) found.emplace_back(s.column_text(0), s.column_text(1));
  if (found.empty())
    throw SpecError("no workload with hash " + prefix + (prefix.size() < 32 ? "..." : "") +
                    " in '" + path() + "'");
  if (found.size() > 1) {
    std::string described;
    for (const auto& [hash, key] : found) described += "\n  " + hash + "  " + key;
    throw SpecError("workload " + prefix + " is ambiguous in '" + path() +
                    "': " + (found.size() > 10 ? "more than 10" : std::to_string(found.size())) +
                    " workloads start with it; give more digits:" + described);
  }
  return found.front().first;
}

std::vector<Fact> Store::top_k(const std::string& workload_hash, const std::string& machine,
                               std::size_t k) {
  return top_k(workload_hash, std::vector<std::string>{machine}, k);
}

namespace {

// Highest rate first (for a concrete workload: fastest median); facts without a known work
// (none are recorded so any more) after those with one. Ties broken by strategy, parameters and
// machine, so answers are deterministic.
struct Ranked {
  Fact fact;
  bool rated;
  double cost;
};

void rank(std::vector<Ranked>& ranked, std::size_t k) {
  auto rate_order = [](const Ranked& a, const Ranked& b) {
    if (a.rated != b.rated) return a.rated;
    return a.cost < b.cost;
  };
  std::sort(ranked.begin(), ranked.end(), rate_order);
  // Only facts of equal rate need the tie-break, which compares the parameters' texts.
  for (auto first = ranked.begin(); first != ranked.end();) {
    const auto last = std::upper_bound(first, ranked.end(), *first, rate_order);
    if (last - first > 1) {
      std::vector<std::pair<std::string, Ranked*>> texts;
      for (auto it = first; it != last; ++it)
        texts.emplace_back(it->fact.transform.params_text(), &*it);
      std::sort(texts.begin(), texts.end(), [](const auto& a, const auto& b) {
        const Fact &fa = a.second->fact, &fb = b.second->fact;
        if (fa.transform.name != fb.transform.name) return fa.transform.name < fb.transform.name;
        if (a.first != b.first) return a.first < b.first;
        return fa.machine < fb.machine;
      });
      std::vector<Ranked> sorted;
      for (auto& [text, r] : texts) sorted.push_back(std::move(*r));
      std::move(sorted.begin(), sorted.end(), first);
    }
    if (k && static_cast<std::size_t>(last - ranked.begin()) >= k) break;
    first = last;
  }
  if (k && ranked.size() > k) ranked.resize(k);
}

std::vector<Fact> facts_of(std::vector<Ranked>& ranked, std::size_t k) {
  rank(ranked, k);
  std::vector<Fact> facts;
  facts.reserve(ranked.size());
  for (auto& r : ranked) facts.push_back(std::move(r.fact));
  return facts;
}

}  // namespace

namespace {

// A fact as one statement reads it (kFactColumns from column `base` on), before it is ranked.
struct FactRead {
  bool rated;
  double cost;
  std::int64_t transform;
  std::size_t machine;  // index into the machines asked about
  store_detail::FactRow row;
};

#define EINSUMDB_FACT_COLUMNS                                                                   \
  "f.transform_id, f.unrated, f.cost, f.median_s, f.min_s, f.flops, f.gflops, f.measurements, " \
  "f.repetitions, f.bindings, f.origin"
constexpr int kFactColumnCount = 11;

template <class S>
FactRead read_fact(S& s, int base, std::size_t machine) {
  FactRead r{
      s.column_int(base + 1) == 0, s.column_double(base + 2), s.column_int(base), machine, {}};
  r.row.median_s = s.column_double(base + 3);
  r.row.min_s = s.column_double(base + 4);
  r.row.flops = s.column_optional_double(base + 5);
  r.row.gflops = s.column_optional_double(base + 6);
  r.row.measurements = s.column_int(base + 7);
  r.row.repetitions = s.column_int(base + 8);
  if (!s.is_null(base + 9)) r.row.bindings = s.column_text(base + 9);
  if (!s.is_null(base + 10)) r.row.origin = s.column_text(base + 10);
  return r;
}

// The first k of a workload's facts as read (and those tied with the k-th), as Facts.
std::vector<Fact> ranked_facts(Store::Impl& impl, std::vector<FactRead>& rows, std::size_t k,
                               const std::string& workload_hash, const std::string& workload_key,
                               const std::vector<std::string>& machines) {
  // A workload's facts are read whole and ranked here: they are few, and SQL's ORDER BY would
  // sort them in a temporary B-tree, which costs SQLite more than the read itself. Only the facts
  // that rank within the first k (and those tied with the k-th) become Facts.
  auto rate_order = [](const FactRead& a, const FactRead& b) {
    if (a.rated != b.rated) return a.rated;
    return a.cost < b.cost;
  };
  std::sort(rows.begin(), rows.end(), rate_order);
  std::size_t cut = rows.size();
  if (k && cut > k) {
    cut = k;
    while (cut < rows.size() && !rate_order(rows[k - 1], rows[cut])) ++cut;
  }
  std::vector<Ranked> ranked;
  ranked.reserve(cut);
  for (std::size_t i = 0; i < cut; ++i) {
    Fact f = fact_from_row(rows[i].row);
    f.transform = impl.transform(rows[i].transform);
    f.workload_hash = workload_hash;
    f.workload_key = workload_key;
    f.machine = machines[rows[i].machine];
    ranked.push_back({std::move(f), rows[i].rated, rows[i].cost});
  }
  return facts_of(ranked, k);
}

// Calls read(index, id) for each of `machines` the store knows, in order: the facts of a machine
// it has never seen are none.
template <class F>
void for_each_known_machine(Store& store, const std::vector<std::string>& machines, F&& read) {
  for (std::size_t mi = 0; mi < machines.size(); ++mi)
    if (const auto mid = store.find_machine(machines[mi])) read(mi, id_value(*mid));
}

}  // namespace

std::vector<Fact> Store::top_k(const std::string& workload_hash,
                               const std::vector<std::string>& machines, std::size_t k,
                               const std::string& workload_key) {
  std::vector<FactRead> rows;
  std::string key = workload_key;
  for_each_known_machine(*this, machines, [&](std::size_t mi, std::int64_t mid) {
    // One statement (one round trip to a server). Given the key, the workload is found in the
    // index of hashes alone.
    auto s = key.empty() ? impl_->stmt("SELECT " EINSUMDB_FACT_COLUMNS
                                       ", w.key FROM workloads w JOIN facts f ON f.workload_id = "
                                       "w.id WHERE w.hash = ? AND f.machine_id = ?")
                         : impl_->stmt("SELECT " EINSUMDB_FACT_COLUMNS
                                       " FROM facts f WHERE f.workload_id = (SELECT id FROM "
                                       "workloads WHERE hash = ?) AND f.machine_id = ?");
    s.bind(1, workload_hash).bind(2, mid);
    while (s.step()) {
      rows.push_back(read_fact(s, 0, mi));
      if (key.empty()) key = s.column_text(kFactColumnCount);
    }
  });
  return ranked_facts(*impl_, rows, k, workload_hash, key, machines);
}

std::vector<std::vector<Fact>> Store::top_k_many(const std::vector<std::string>& hashes,
                                                 const std::vector<std::string>& keys,
                                                 const std::vector<std::string>& machines,
                                                 std::size_t k) {
  EINSUMDB_ASSERT(keys.size() == hashes.size(), "a key for every hash");
  std::vector<std::vector<Fact>> out(hashes.size());
  // The hashes go to the store as one parameter, an array (hex digits need no quoting): one
  // statement per chunk, so per workload only the two index searches remain, and a server
  // answers the whole chunk in one round trip. Rows come out grouped by the array's position.
  const bool server = impl_->conn.dialect() == sql::Dialect::postgres;
  constexpr std::size_t kChunk = 1000;
  std::vector<std::vector<FactRead>> rows(std::min(kChunk, hashes.size()));
  for (std::size_t first = 0; first < hashes.size(); first += kChunk) {
    const std::size_t n = std::min(kChunk, hashes.size() - first);
    std::string array = server ? "{" : "[";
    for (std::size_t i = 0; i < n; ++i) {
      const std::string& h = hashes[first + i];
      if (h.empty() || !std::all_of(h.begin(), h.end(), [](char c) {
            return std::isxdigit(static_cast<unsigned char>(c));
          }))
        throw SpecError("workload hash '" + h + "' is not hexadecimal");
      array += (i ? "," : "");
      array += server ? h : '"' + h + '"';
    }
    array += server ? "}" : "]";
    for (auto& r : rows) r.clear();
    for_each_known_machine(*this, machines, [&](std::size_t mi, std::int64_t mid) {
      auto s = server
                   ? impl_->stmt("SELECT q.i - 1, " EINSUMDB_FACT_COLUMNS
                                 " FROM unnest(CAST(? AS TEXT[])) WITH ORDINALITY AS q(hash, i) "
                                 "JOIN workloads w ON w.hash = q.hash JOIN facts f ON "
                                 "f.workload_id = w.id AND f.machine_id = ?")
                   : impl_->stmt("SELECT q.key, " EINSUMDB_FACT_COLUMNS
                                 " FROM json_each(?) q JOIN workloads w ON w.hash = q.value JOIN "
                                 "facts f ON f.workload_id = w.id AND f.machine_id = ?");
      s.bind(1, array).bind(2, mid);
      while (s.step()) {
        const auto i = s.column_int(0);
        if (i < 0 || static_cast<std::size_t>(i) >= n)
          throw DatabaseError("a batch lookup returned position " + std::to_string(i) + " of " +
                              std::to_string(n));
        rows[static_cast<std::size_t>(i)].push_back(read_fact(s, 1, mi));
      }
    });
    for (std::size_t i = 0; i < n; ++i)
      if (!rows[i].empty())
        out[first + i] =
            ranked_facts(*impl_, rows[i], k, hashes[first + i], keys[first + i], machines);
  }
  return out;
}
#undef EINSUMDB_FACT_COLUMNS

std::vector<Fact> Store::top_k_measured(const std::string& workload_hash,
                                        const std::vector<std::string>& machines, std::size_t k) {
  std::string key;
  std::map<std::pair<std::int64_t, std::size_t>, FactSummariser> groups;  // (transform, machine)
  for_each_known_machine(*this, machines, [&](std::size_t mi, std::int64_t mid) {
    auto s = impl_->stmt(
        "SELECT m.transform_id, m.median_s, m.min_s, m.repetitions, m.flops, m.binding, m.origin, "
        "w.key FROM workloads w JOIN measurements m ON m.workload_id = w.id WHERE w.hash = ? AND "
        "m.machine_id = ? AND m.status = 'ok' AND m.max_rel_err IS NOT NULL ORDER BY "
        "m.transform_id, m.digest");
    s.bind(1, workload_hash).bind(2, mid);
    while (s.step()) {
      if (key.empty()) key = s.column_text(7);
      groups[{s.column_int(0), mi}].add(s, 1);
    }
  });
  std::vector<Ranked> ranked;
  for (const auto& [id, g] : groups) {
    const FactRow row = g.finish();
    Fact f = fact_from_row(row);
    f.transform = impl_->transform(id.first);
    f.workload_hash = workload_hash;
    f.workload_key = key;
    f.machine = machines[id.second];
    ranked.push_back({std::move(f), row.rated, row.cost});
  }
  return facts_of(ranked, k);
}

std::vector<Store::SymbolicWorkload> Store::symbolic_workloads(
    const std::string& structure_hash, const std::vector<std::string>& machines,
    const std::vector<Length>& lengths) {
  std::vector<std::int64_t> have;
  for (const auto& l : lengths) have.push_back(l.value);
  std::sort(have.begin(), have.end());
  // Whether the numbers of a workload's structure lengths are all among `lengths`, as many times:
  // asked before its spec is read, which costs far more.
  std::vector<std::int64_t> numbers;
  auto may_become = [&](const std::vector<Length>& structure) {
    if (lengths.empty()) return true;
    numbers.clear();
    for (const auto& l : structure)
      if (!l.symbolic()) numbers.push_back(l.value);
    std::sort(numbers.begin(), numbers.end());
    return std::includes(have.begin(), have.end(), numbers.begin(), numbers.end());
  };
  std::vector<std::int64_t> machine_ids;
  for (const auto& machine : machines)
    if (const auto mid = find_machine(machine)) machine_ids.push_back(id_value(*mid));
  std::vector<SymbolicWorkload> out;
  if (machine_ids.empty()) return out;
  // The structure's symbolic workloads, and of those whose lengths may become the query's, the
  // ones measured on one of the machines (asked of the few, not of every row).
  std::vector<std::pair<std::int64_t, const SymbolicWorkload*>> candidates;
  {
    auto s = impl_->stmt(
        "SELECT w.id, w.hash, w.structure_lengths, w.structure_map FROM workloads w WHERE "
        "w.structure_hash = ? AND w.symbols > 0");
    s.bind(1, structure_hash);
    while (s.step()) {
      // A workload's row never changes: what was parsed of it once serves every later query.
      const std::int64_t id = s.column_int(0);
      auto it = impl_->symbolic_by_id.find(id);
      if (it == impl_->symbolic_by_id.end()) {
        SymbolicWorkload w{
            s.column_text(1), {}, {}, {}, name_map_from_json(json::parse(s.column_text(3)))};
        for (const auto& l : json::parse(s.column_text(2)))
          w.structure_lengths.push_back(l.is_number_integer()
                                            ? Length::of(l.get<std::int64_t>())
                                            : Length::named(l.get<std::string>()));
        it = impl_->symbolic_by_id.emplace(id, std::move(w)).first;
      }
      if (may_become(it->second.structure_lengths)) candidates.emplace_back(id, &it->second);
    }
  }
  for (const auto& [id, w] : candidates) {
    bool measured = false;
    for (const std::int64_t mid : machine_ids) {
      auto f = impl_->stmt("SELECT 1 FROM facts WHERE workload_id = ? AND machine_id = ? LIMIT 1");
      f.bind(1, id).bind(2, mid);
      if ((measured = f.step())) break;
    }
    if (!measured) continue;
    SymbolicWorkload& cached = impl_->symbolic_by_id.at(id);
    if (cached.key.empty()) {
      auto spec = impl_->stmt("SELECT key, spec FROM workloads WHERE id = ?");
      spec.bind(1, id);
      if (!spec.step())
        throw DatabaseError("workload " + w->hash + " vanished from '" + path() + "'");
      cached.form = parse_spec_text(spec.column_text(1));
      cached.key = spec.column_text(0);
    }
    out.push_back(cached);
  }
  std::sort(out.begin(), out.end(),
            [](const SymbolicWorkload& a, const SymbolicWorkload& b) { return a.hash < b.hash; });
  return out;
}

std::optional<Fact> Store::best(const std::string& workload_hash, const std::string& machine) {
  auto facts = top_k(workload_hash, machine, 1);
  if (facts.empty()) return std::nullopt;
  return std::move(facts.front());
}

std::optional<Store::Nearest> Store::nearest(const Canonical& query, const std::string& machine) {
  return nearest(query, std::vector<std::string>{machine});
}

std::optional<Store::Nearest> Store::nearest(const Canonical& query,
                                             const std::vector<std::string>& machines) {
  return nearest(query, machines, true);
}

std::optional<Store::Nearest> Store::nearest_scanned(const Canonical& query,
                                                     const std::vector<std::string>& machines) {
  return nearest(query, machines, false);
}

std::optional<Store::Nearest> Store::nearest(const Canonical& query,
                                             const std::vector<std::string>& machines,
                                             bool use_sizes) {
  // distance, hash, map, key
  std::optional<std::tuple<double, std::string, std::string, std::string>> found;
  // Offers a candidate (hash, structure lengths as JSON text, structure map, key): nearest
  // first, then the smallest hash. Returns its distance (infinite for another number of axes).
  auto offer = [&](const std::string& hash, const std::string& lengths_text,
                   const std::string& map_text, const std::string& key) {
    const json lengths = json::parse(lengths_text);
    if (lengths.size() != query.structure_lengths.size())
      return std::numeric_limits<double>::infinity();
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
    if (!found || d < std::get<0>(*found) ||
        (d == std::get<0>(*found) && hash < std::get<1>(*found)))
      found = std::make_tuple(d, hash, map_text, key);
    return d;
  };
  const bool concrete = std::none_of(query.structure_lengths.begin(), query.structure_lengths.end(),
                                     [](const Length& l) { return l.symbolic(); });
  for (const auto& machine : machines) {
    const auto mid = find_machine(machine);
    if (!mid) continue;
    if (!use_sizes || !concrete) {
      // Every measured workload of the structure.
      auto s = impl_->stmt(
          "SELECT w.hash, w.structure_lengths, w.structure_map, w.key FROM workloads w WHERE "
          "w.structure_hash = ? AND w.hash <> ? AND EXISTS (SELECT 1 FROM facts f WHERE "
          "f.workload_id = w.id AND f.machine_id = ?)");
      s.bind(1, query.structure_hash).bind(2, query.hash).bind(3, id_value(*mid));
      while (s.step())
        offer(s.column_text(0), s.column_text(1), s.column_text(2), s.column_text(3));
      continue;
    }
    // The symbolic workloads of the structure (few; each an e-fold away per symbol) ...
    {
      auto s = impl_->stmt(
          "SELECT w.hash, w.structure_lengths, w.structure_map, w.key FROM workloads w WHERE "
          "w.structure_hash = ? AND w.symbols > 0 AND EXISTS (SELECT 1 FROM facts f WHERE "
          "f.workload_id = w.id AND f.machine_id = ?)");
      s.bind(1, query.structure_hash).bind(2, id_value(*mid));
      while (s.step())
        offer(s.column_text(0), s.column_text(1), s.column_text(2), s.column_text(3));
    }
    // ... then the concrete ones, nearest first from the sizes: on a server, the GiST index of
    // the structure number's points gives each one's distance from the query's. Read until the
    // next is farther than the nearest found (or as near with a larger hash), in growing batches
    // should the first not reach that.
    const SizePoint q = size_point(query.structure_hash, query.structure_lengths);
    if (impl_->conn.dialect() == sql::Dialect::postgres) {
      // The limit is in the text, not a parameter: a plan for any limit cannot count on a small
      // one, so PostgreSQL would plan the statement anew at every execution (as long as the
      // search itself); with the limit known it keeps one plan.
      static const std::array<std::pair<std::int64_t, std::string>, 4> kReads = [] {
        const std::string text =
            "SELECT w.hash, w.structure_hash, w.structure_lengths, w.structure_map, z.point <-> "
            "CAST(?1 AS cube), w.key FROM sizes z JOIN workloads w ON w.id = z.workload_id WHERE "
            "z.structure = ?2 AND EXISTS (SELECT 1 FROM facts f WHERE f.workload_id = w.id AND "
            "f.machine_id = ?3) ORDER BY z.point <-> CAST(?1 AS cube)";
        return std::array<std::pair<std::int64_t, std::string>, 4>{
            {{4, text + " LIMIT 4"},
             {64, text + " LIMIT 64"},
             {1024, text + " LIMIT 1024"},
             {std::numeric_limits<std::int64_t>::max(), text}}};
      }();
      const std::string point = server_point(q);
      bool done = false;
      for (std::size_t round = 0; !done && round < kReads.size(); ++round) {
        const auto& [limit, text] = kReads[round];
        auto s = impl_->stmt(text.c_str());
        s.bind(1, point).bind(2, static_cast<std::int64_t>(q.structure)).bind(3, id_value(*mid));
        std::int64_t rows = 0;
        while (!done && s.step()) {
          ++rows;
          // Below the point's distance by its last bits, as for the R*Tree's boxes below.
          const double bound = s.column_double(4) * (1 - 1e-9);
          if (found && bound > std::get<0>(*found))
            done = true;
          else if (s.column_text(1) == query.structure_hash && s.column_text(0) != query.hash)
            offer(s.column_text(0), s.column_text(2), s.column_text(3), s.column_text(5));
        }
        done = done || rows < limit;  // every measured workload read
      }
      continue;
    }
    // ... on SQLite, nearest first from the sizes R*Tree (register_near_query). The
    // tree's box of a workload gives a lower bound of its distance (its coordinates are rounded
    // outward to 32 bits, and axes past the tree's are combined), so workloads are read whole
    // only until the bound passes the nearest found; that one is then the nearest (or as near
    // with the smallest hash).
    auto s = impl_->stmt(
        "SELECT z.workload_id, z.x0_lo, z.x0_hi, z.x1_lo, z.x1_hi, z.x2_lo, z.x2_hi, z.x3_lo, "
        "z.x3_hi FROM sizes z WHERE z.workload_id MATCH einsumdb_near(?, ?, ?, ?, ?)");
    s.bind(1, q.structure);
    for (std::size_t k = 0; k < kSizeAxes; ++k) s.bind(static_cast<int>(2 + k), q.x[k]);
    double last = 0;
    bool in_order = true;  // as the R*Tree promises; were it not, every entry would be read
    while (s.step()) {
      double d2 = 0;
      for (std::size_t k = 0; k < kSizeAxes; ++k) {
        const double lo = s.column_double(static_cast<int>(1 + 2 * k)),
                     hi = s.column_double(static_cast<int>(2 + 2 * k));
        const double gap = std::max({0.0, lo - q.x[k], q.x[k] - hi});
        d2 += gap * gap;
      }
      // Slightly below the box's distance: the distance takes the logarithm of a ratio, the point
      // holds differences of logarithms, and these may differ in the last bits.
      const double bound = std::sqrt(d2) * (1 - 1e-9);
      in_order = in_order && bound >= last;
      last = bound;
      if (in_order && found && bound > std::get<0>(*found)) break;
      // Whether it was measured on the machine is asked of the few read, not of every workload
      // the search passes.
      auto w = impl_->stmt(
          "SELECT w.hash, w.structure_hash, w.structure_lengths, w.structure_map, w.key FROM "
          "workloads w WHERE w.id = ? AND EXISTS (SELECT 1 FROM facts f WHERE f.workload_id = w.id "
          "AND "
          "f.machine_id = ?)");
      w.bind(1, s.column_int(0)).bind(2, id_value(*mid));
      // Another structure may share the tree's structure number; the query's own workload is not
      // its own nearest size.
      if (w.step() && w.column_text(1) == query.structure_hash && w.column_text(0) != query.hash)
        offer(w.column_text(0), w.column_text(2), w.column_text(3), w.column_text(4));
    }
  }
  if (!found) return std::nullopt;
  auto facts = top_k(std::get<1>(*found), machines, 1, std::get<3>(*found));
  if (facts.empty()) return std::nullopt;
  auto fact = std::optional<Fact>(std::move(facts.front()));
  return Nearest{std::move(*fact), std::get<0>(*found),
                 name_map_from_json(json::parse(std::get<2>(*found)))};
}

std::vector<WorkloadSummary> Store::list(const ListFilter& f) {
  auto s = impl_->stmt(
      "SELECT w.hash, w.key, count(m.id), sum(CASE WHEN m.status = 'ok' THEN 1 ELSE 0 END), "
      "max(CASE WHEN m.status = 'ok' THEN m.gflops END), max(m.recorded_at), "
      "(SELECT t2.strategy FROM measurements m2 JOIN transforms t2 ON t2.id = m2.transform_id "
      " JOIN machines c2 ON c2.id = m2.machine_id WHERE m2.workload_id = w.id AND m2.status = 'ok' "
      " AND (?1 = '' OR c2.fingerprint LIKE ?1 || '%') AND (?2 = '' OR t2.strategy = ?2) "
      " AND (?3 = '' OR m2.recorded_at >= ?3) ORDER BY m2.median_s LIMIT 1) "
      "FROM workloads w JOIN measurements m ON m.workload_id = w.id "
      "JOIN machines mc ON mc.id = m.machine_id JOIN transforms t ON t.id = m.transform_id "
      "WHERE " EINSUMDB_FILTER_TERMS " GROUP BY w.id ORDER BY w.key LIMIT ?4");
  bind_filter(s, f);
  std::vector<WorkloadSummary> rows;
  while (s.step())
    rows.push_back({s.column_text(0), s.column_text(1), static_cast<int>(s.column_int(2)),
                    static_cast<int>(s.column_int(3)), s.column_optional_double(4),
                    s.column_text(6), s.column_text(5)});
  return rows;
}

namespace store_detail {

#define EINSUMDB_EXPORT_COLUMNS                                                               \
  "w.hash, w.key, w.spec, t.strategy, t.params, mc.fingerprint, mc.cpu_model, mc.cores, "     \
  "mc.isa, mc.blas, mc.description, r.id, r.label, r.command, r.tool_version, r.started_at, " \
  "m.status, m.samples, m.repetitions, m.median_s, m.min_s, m.mean_s, m.stddev_s, m.gflops, " \
  "m.bytes_moved, m.max_rel_err, m.recorded_at, m.binding, m.flops, m.origin "
extern const char* const kExportColumns =
    "SELECT " EINSUMDB_EXPORT_COLUMNS
    "FROM measurements m JOIN workloads w ON w.id = m.workload_id "
    "JOIN transforms t ON t.id = m.transform_id JOIN machines mc ON mc.id = m.machine_id "
    "JOIN runs r ON r.id = m.run_id ";
extern const char* const kExportPageSql =
    "SELECT " EINSUMDB_EXPORT_COLUMNS
    ", m.id FROM measurements m JOIN workloads w ON w.id = m.workload_id JOIN transforms t ON "
    "t.id = m.transform_id JOIN machines mc ON mc.id = m.machine_id JOIN runs r ON r.id = "
    "m.run_id WHERE " EINSUMDB_FILTER_TERMS " AND m.id > ?4 ORDER BY m.id LIMIT ?5";

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
          {"recorded_at", s.column_text(26)},
          {"binding", s.is_null(27) ? ojson() : ojson::parse(s.column_text(27))},
          {"flops", opt(28)},
          {"origin", s.is_null(29) ? ojson() : ojson::parse(s.column_text(29))}};
}

}  // namespace store_detail

namespace {

// Per group (workload and machine, and the strategy when `per_strategy`), the verified
// measurement of highest rate. Grouped on the measurements alone, then joined: one pass over
// the measurements. SQLite takes the other columns of a group from the row of its max();
// PostgreSQL says DISTINCT ON.
std::string best_point_query(sql::Dialect dialect, bool per_strategy) {
  const std::string group =
      std::string("m.workload_id, m.machine_id") + (per_strategy ? ", t.strategy" : "");
  const std::string from =
      " FROM measurements m JOIN machines mc ON mc.id = m.machine_id JOIN transforms t ON t.id = "
      "m.transform_id WHERE m.status = 'ok' AND m.gflops IS NOT NULL AND " EINSUMDB_FILTER_TERMS;
  if (dialect == sql::Dialect::sqlite)
    return "SELECT m.workload_id, m.machine_id, m.transform_id, max(m.gflops) AS g, m.flops, "
           "m.bytes_moved, m.binding" +
           from + " GROUP BY " + group;
  return "SELECT DISTINCT ON (" + group +
         ") m.workload_id, m.machine_id, m.transform_id, m.gflops AS g, m.flops, m.bytes_moved, "
         "m.binding" +
         from + " ORDER BY " + group + ", m.gflops DESC";
}

}  // namespace

std::vector<Store::BestPoint> Store::best_points(const ListFilter& f) {
  return best_points_grouped(f, false);
}

std::vector<Store::BestPoint> Store::strategy_points(const ListFilter& f) {
  return best_points_grouped(f, true);
}

std::vector<Store::BestPoint> Store::best_points_grouped(const ListFilter& f, bool per_strategy) {
  const std::string best = best_point_query(impl_->conn.dialect(), per_strategy);
  sql::Statement s(impl_->conn,
                   "SELECT w.hash, w.key, mc.fingerprint, t.strategy, t.params, b.g, b.flops, "
                   "b.bytes_moved, b.binding FROM (" +
                       best +
                       ") b JOIN workloads w ON w.id = b.workload_id JOIN machines mc ON mc.id = "
                       "b.machine_id JOIN transforms t ON t.id = b.transform_id ORDER BY "
                       "mc.fingerprint, w.hash LIMIT ?4");
  bind_filter(s, f);
  std::vector<BestPoint> out;
  while (s.step())
    out.push_back({s.column_text(0), s.column_text(1), s.column_text(2), s.column_text(3),
                   s.column_text(4), s.column_double(5), s.column_optional_double(6),
                   s.column_optional_double(7), s.is_null(8) ? std::string() : s.column_text(8)});
  return out;
}

std::vector<Store::RateChange> Store::slowdowns(const ListFilter& f) {
  // One pass over the verified measurements in the order of their index (workload, machine,
  // then transform): each (workload, machine, transform) is a run of rows, of which the latest
  // two by recorded_at are kept. A window function would sort all of them by time instead,
  // several times slower on a large store.
  struct Row {
    std::int64_t workload, machine, transform, run;
    std::string at;
    double median, min;
  };
  struct Change {
    Row before, after;
    double ratio;
  };
  sql::Statement s(impl_->conn,
                   "SELECT m.workload_id, m.machine_id, m.transform_id, m.run_id, m.recorded_at, "
                   "m.median_s, m.min_s FROM measurements m JOIN machines mc ON mc.id = "
                   "m.machine_id JOIN transforms t ON t.id = m.transform_id WHERE m.status = 'ok' "
                   "AND m.median_s IS NOT NULL AND m.min_s IS NOT NULL AND " EINSUMDB_FILTER_TERMS
                   " ORDER BY m.workload_id, m.machine_id, m.transform_id");
  bind_filter(s, f, false);
  const std::size_t limit = f.limit ? f.limit : std::numeric_limits<std::size_t>::max();
  auto slower = [](const Change& a, const Change& b) { return a.ratio > b.ratio; };
  std::vector<Change> kept;  // a heap of the most slowed, the least slowed on top
  std::optional<Row> latest, previous;
  auto close_group = [&] {
    if (!latest || !previous) return;
    const Row &b = *previous, &a = *latest;
    if (a.median - b.median > (a.median - a.min) + (b.median - b.min) + 0.01 * b.median) {
      kept.push_back({b, a, a.median / b.median});
      std::push_heap(kept.begin(), kept.end(), slower);
      if (kept.size() > limit) {
        std::pop_heap(kept.begin(), kept.end(), slower);
        kept.pop_back();
      }
    }
  };
  auto later = [](const Row& x, const Row& y) { return x.at > y.at; };
  while (s.step()) {
    Row r{s.column_int(0),  s.column_int(1),    s.column_int(2),   s.column_int(3),
          s.column_text(4), s.column_double(5), s.column_double(6)};
    if (latest && (r.workload != latest->workload || r.machine != latest->machine ||
                   r.transform != latest->transform)) {
      close_group();
      latest.reset(), previous.reset();
    }
    if (!latest || later(r, *latest)) {
      previous = std::move(latest);
      latest = std::move(r);
    } else if (!previous || later(r, *previous)) {
      previous = std::move(r);
    }
  }
  close_group();
  std::sort(kept.begin(), kept.end(), slower);

  sql::Statement names(impl_->conn,
                       "SELECT w.hash, w.key, mc.fingerprint, t.strategy, t.params FROM workloads "
                       "w, machines mc, transforms t WHERE w.id = ?1 AND mc.id = ?2 AND t.id = ?3");
  sql::Statement label(impl_->conn, "SELECT label FROM runs WHERE id = ?1");
  auto run_label = [&](std::int64_t run) {
    label.reset();
    label.bind(1, run);
    return label.step() ? label.column_text(0) : std::string();
  };
  std::vector<RateChange> out;
  for (const auto& c : kept) {
    names.reset();
    names.bind(1, c.after.workload).bind(2, c.after.machine).bind(3, c.after.transform);
    if (!names.step()) continue;
    RateChange r;
    r.workload_hash = names.column_text(0), r.workload_key = names.column_text(1);
    r.machine = names.column_text(2), r.strategy = names.column_text(3);
    r.params = names.column_text(4);
    r.before = {run_label(c.before.run), c.before.at, c.before.median, c.before.min};
    r.after = {run_label(c.after.run), c.after.at, c.after.median, c.after.min};
    out.push_back(std::move(r));
  }
  return out;
}

std::vector<std::string> Store::most_measured(const ListFilter& f, std::size_t k) {
  sql::Statement s(impl_->conn,
                   "SELECT w.hash FROM measurements m JOIN workloads w ON w.id = m.workload_id "
                   "JOIN machines mc ON mc.id = m.machine_id JOIN transforms t ON t.id = "
                   "m.transform_id WHERE " EINSUMDB_FILTER_TERMS
                   " GROUP BY m.workload_id, w.hash ORDER BY count(*) DESC, w.hash LIMIT ?4");
  ListFilter top = f;
  top.limit = k;
  bind_filter(s, top);
  std::vector<std::string> out;
  while (s.step()) out.push_back(s.column_text(0));
  return out;
}

std::vector<ojson> Store::show(const std::string& workload_hash) {
  sql::Statement s(impl_->conn, std::string(kExportColumns) +
                                    "WHERE w.hash = ? ORDER BY mc.fingerprint, m.status <> 'ok', "
                                    "m.gflops IS NULL, -m.gflops, "
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
