// Facts: one row per transform of a workload on a machine, summarising its verified
// measurements (see Fact), kept by the store as measurements arrive so that a retrieval reads a
// workload's few facts in rank order instead of aggregating its measurements. And sizes: the
// R*Tree in which nearest() finds the measured size nearest to a query's without reading every
// workload of its structure.
//
// A fact is recomputed from all of its group's measurements, never updated incrementally: the
// median of medians needs them all, and recomputing makes a fact exactly what aggregating the
// measurements at query time gives (top_k_measured, which check() and the tests compare with).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <set>

#include <sqlite3.h>

#include "einsumdb/canon/metrics.hpp"
#include "einsumdb/core/stats.hpp"
#include "einsumdb/db/error.hpp"
#include "einsumdb/db/store_impl.hpp"

namespace einsumdb::store_detail {
namespace {

using json = nlohmann::json;

// The columns a fact is computed from, after the group's ids; verified measurements only, in
// digest order (the index's), so that ties for the origin resolve alike everywhere.
constexpr const char* kGroupColumns =
    "m.median_s, m.min_s, m.repetitions, m.flops, m.binding, m.origin";
constexpr const char* kVerified = "m.status = 'ok' AND m.max_rel_err IS NOT NULL";

constexpr const char* kFactColumns =
    "workload_id, machine_id, transform_id, unrated, cost, median_s, min_s, flops, gflops, "
    "measurements, repetitions, bindings, origin";
constexpr int kFactParameters = 13;

// "SELECT ... FROM (VALUES (w, m, t), ...) JOIN measurements": the rows of `groups` groups.
std::string group_rows_sql(std::size_t groups) {
  std::string text = "WITH g(w, mc, t) AS (VALUES ";
  for (std::size_t i = 0; i < groups; ++i)
    text +=
        std::string(i ? ", " : "") + "(CAST(? AS BIGINT), CAST(? AS BIGINT), CAST(? AS BIGINT))";
  return text + ") SELECT g.w, g.mc, g.t, " + kGroupColumns +
         " FROM g JOIN measurements m ON m.workload_id = g.w AND m.machine_id = g.mc AND "
         "m.transform_id = g.t WHERE " +
         kVerified + " ORDER BY g.w, g.mc, g.t, m.digest";
}

std::string upsert_sql(std::size_t facts) {
  std::string row = "(";
  for (int k = 0; k < kFactParameters; ++k) row += k ? ", ?" : "?";
  row += ")";
  std::string text = std::string("INSERT INTO facts(") + kFactColumns + ") VALUES";
  for (std::size_t i = 0; i < facts; ++i) text += (i ? ", " : " ") + row;
  return text +
         " ON CONFLICT(workload_id, machine_id, transform_id) DO UPDATE SET unrated = "
         "excluded.unrated, cost = excluded.cost, median_s = excluded.median_s, min_s = "
         "excluded.min_s, flops = excluded.flops, gflops = excluded.gflops, measurements = "
         "excluded.measurements, repetitions = excluded.repetitions, bindings = "
         "excluded.bindings, origin = excluded.origin";
}

// Takes the lock of `facts` facts' rows (creating a placeholder where there is none yet): a
// server runs writers side by side, and two that read one group's measurements at once would
// each write a fact that misses the other's. The second waits here until the first commits, and
// then reads both.
std::string lock_sql(std::size_t facts) {
  std::string text = std::string("INSERT INTO facts(") + kFactColumns + ") VALUES";
  for (std::size_t i = 0; i < facts; ++i)
    text += std::string(i ? ", " : " ") + "(?, ?, ?, 1, 0, 0, 0, NULL, NULL, 0, 0, NULL, NULL)";
  return text +
         " ON CONFLICT(workload_id, machine_id, transform_id) DO UPDATE SET measurements = "
         "facts.measurements";
}

template <class S>
void bind_fact(S& s, int base, const FactKey& key, const FactRow& f) {
  s.bind(base + 1, key[0]).bind(base + 2, key[1]).bind(base + 3, key[2]);
  s.bind(base + 4, static_cast<std::int64_t>(!f.rated)).bind(base + 5, f.cost);
  s.bind(base + 6, f.median_s).bind(base + 7, f.min_s).bind(base + 8, f.flops);
  s.bind(base + 9, f.gflops).bind(base + 10, static_cast<std::int64_t>(f.measurements));
  s.bind(base + 11, static_cast<std::int64_t>(f.repetitions));
  if (f.bindings.empty())
    s.bind_null(base + 12);
  else
    s.bind(base + 12, f.bindings);
  if (f.origin.empty())
    s.bind_null(base + 13);
  else
    s.bind(base + 13, f.origin);
}

// Reads group rows (ids in columns 0-2, kGroupColumns after) into summaries.
template <class S>
void summarise_rows(S& s, std::map<FactKey, FactRow>& out) {
  FactKey current{-1, -1, -1};
  FactSummariser acc;
  auto flush = [&] {
    if (current[0] >= 0) out[current] = acc.finish();
    acc = {};
  };
  while (s.step()) {
    const FactKey key{s.column_int(0), s.column_int(1), s.column_int(2)};
    if (key != current) flush(), current = key;
    acc.add(s, 3);
  }
  flush();
}

}  // namespace

void FactSummariser::add(double median_s, double min_s, std::int64_t repetitions,
                         std::optional<double> flops, const std::string* binding,
                         const std::string* origin) {
  const bool rated = flops && *flops > 0;
  const double cost = rated ? median_s / *flops : median_s;
  if (medians_.empty() || min_s < min_s_) min_s_ = min_s;
  if (medians_.empty() || cost < best_cost_) {
    best_cost_ = cost;
    origin_ = origin ? *origin : std::string();
  }
  medians_.push_back(median_s);
  costs_.push_back(cost);
  if (rated) flops_.push_back(*flops);
  if (binding) bindings_.insert(*binding);
  repetitions_ += repetitions;
}

FactRow FactSummariser::finish() const {
  FactRow f;
  f.measurements = static_cast<std::int64_t>(medians_.size());
  f.repetitions = repetitions_;
  f.median_s = median(medians_);
  f.min_s = min_s_;
  f.rated = !medians_.empty() && flops_.size() == medians_.size();
  f.cost = median(costs_);
  if (f.rated) {
    f.flops = median(flops_);
    if (f.cost > 0) f.gflops = 1e-9 / f.cost;
  }
  if (!bindings_.empty()) {
    f.bindings = "[";
    for (const auto& b : bindings_) f.bindings += (f.bindings.size() > 1 ? "," : "") + b;
    f.bindings += "]";
  }
  f.origin = origin_;
  return f;
}

Fact fact_from_row(const FactRow& row) {
  Fact f;
  f.median_s = row.median_s;
  f.min_s = row.min_s;
  f.flops = row.flops;
  f.gflops = row.gflops;
  f.measurements = static_cast<int>(row.measurements);
  f.repetitions = static_cast<int>(row.repetitions);
  if (!row.bindings.empty())
    for (const auto& b : json::parse(row.bindings)) f.bindings.push_back(b.get<Binding>());
  if (!row.origin.empty()) f.origin = json::parse(row.origin);
  return f;
}

void refresh_facts(Store::Impl& impl) {
  if (impl.pending_facts.empty()) return;
  const std::vector<FactKey> keys(impl.pending_facts.begin(), impl.pending_facts.end());
  impl.pending_facts.clear();
  if (impl.conn.dialect() == sql::Dialect::sqlite) {
    // In process, a group at a time: its rows straight from the index, nothing to sort.
    for (const FactKey& key : keys) {
      FactSummariser acc;
      {
        auto s = impl.stmt(
            "SELECT m.median_s, m.min_s, m.repetitions, m.flops, m.binding, m.origin FROM "
            "measurements m WHERE m.workload_id = ? AND m.machine_id = ? AND m.status = 'ok' AND "
            "m.transform_id = ? AND m.max_rel_err IS NOT NULL ORDER BY m.digest");
        s.bind(1, key[0]).bind(2, key[1]).bind(3, key[2]);
        bool any = false;
        while (s.step()) acc.add(s, 0), any = true;
        if (!any) continue;
      }
      auto& write = impl.fact_writes[0];
      if (!write) write = std::make_unique<sql::Statement>(impl.conn, upsert_sql(1));
      sql::Use u(*write);
      bind_fact(u, 0, key, acc.finish());
      u.run();
    }
    return;
  }
  // A server answers each statement over the network: groups go in chunks of a power of two
  // (one statement reads a chunk's measurements, one writes its facts), so that a connection
  // prepares at most kFactChunks statements of each kind however many groups it refreshes.
  // The largest chunk of at most `left` groups, as its level (log2 of its size).
  auto level_for = [](std::size_t left) {
    std::size_t level = kFactChunks - 1;
    while ((std::size_t{1} << level) > left) --level;
    return level;
  };
  auto bind_keys = [&](sql::Use& s, std::size_t first, std::size_t n) {
    for (std::size_t i = 0; i < n; ++i)
      for (std::size_t c = 0; c < 3; ++c)
        s.bind(static_cast<int>(3 * i + c + 1), keys[first + i][c]);
  };
  for (std::size_t done = 0; done < keys.size();) {
    const std::size_t level = level_for(keys.size() - done), n = std::size_t{1} << level;
    auto& lock = impl.fact_locks[level];
    if (!lock) lock = std::make_unique<sql::Statement>(impl.conn, lock_sql(n));
    {
      sql::Use l(*lock);
      bind_keys(l, done, n);
      l.run();
    }
    auto& read = impl.fact_reads[level];
    if (!read) read = std::make_unique<sql::Statement>(impl.conn, group_rows_sql(n));
    std::map<FactKey, FactRow> facts;
    {
      sql::Use s(*read);
      bind_keys(s, done, n);
      summarise_rows(s, facts);
    }
    // Every group named has a verified measurement (note_fact), so every placeholder is
    // overwritten here.
    std::vector<std::pair<FactKey, FactRow>> rows(facts.begin(), facts.end());
    for (std::size_t k = 0; k < rows.size();) {
      const std::size_t w = level_for(rows.size() - k), m = std::size_t{1} << w;
      auto& write = impl.fact_writes[w];
      if (!write) write = std::make_unique<sql::Statement>(impl.conn, upsert_sql(m));
      sql::Use u(*write);
      for (std::size_t i = 0; i < m; ++i)
        bind_fact(u, static_cast<int>(i) * kFactParameters, rows[k + i].first, rows[k + i].second);
      u.run();
      k += m;
    }
    done += n;
  }
}

const char* const kInsertSize = "INSERT INTO sizes VALUES(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)";
const char* const kInsertServerSize = "INSERT INTO sizes VALUES(?, ?, CAST(? AS cube))";

std::string server_point(const SizePoint& p) {
  // Only the axes the structure has: an axis every point of the structure has at 0 would give
  // every box of the GiST index no volume, and the cube extension's index, which places and splits
  // boxes by how much volume they gain, could no longer tell a near box from a far one.
  std::string text = "(";
  char buf[32];
  for (std::size_t k = 0; k < std::max<std::size_t>(p.axes, 1); ++k) {
    std::snprintf(buf, sizeof buf, "%s%.17g", k ? ", " : "", p.x[k]);
    text += buf;
  }
  return text + ")";
}

SizePoint size_point(const std::string& structure_hash, const std::vector<Length>& lengths) {
  SizePoint p;
  p.structure = static_cast<double>(std::stoul(structure_hash.substr(0, 6), nullptr, 16));
  p.axes = std::min(kSizeAxes, lengths.size());
  for (std::size_t k = 0; k < std::min(kSizeAxes - 1, lengths.size()); ++k)
    p.x[k] = std::log(static_cast<double>(lengths[k].value));
  // The last coordinate holds the axes from kSizeAxes - 1 on, as the sum of their logarithms
  // over the square root of their number: by Cauchy-Schwarz two workloads differ there by at
  // most the distance over those axes, so a box around the query still holds every workload
  // within its radius, and a workload varying only in its last axes is not beyond pruning.
  if (lengths.size() >= kSizeAxes) {
    double sum = 0;
    for (std::size_t k = kSizeAxes - 1; k < lengths.size(); ++k)
      sum += std::log(static_cast<double>(lengths[k].value));
    p.x[kSizeAxes - 1] = sum / std::sqrt(static_cast<double>(lengths.size() - (kSizeAxes - 1)));
  }
  return p;
}

namespace {

// The R*Tree's custom query (sqlite3_rtree_query_callback): every node and entry scored by the
// least distance from the query's point to its box, entries of another structure number left out.
// The R*Tree searches its queue lowest score first, so entries come out nearest first and a
// node is opened only once nothing left is nearer than its box.
int near_query(sqlite3_rtree_query_info* info) {
  const double* q = info->aParam;  // structure, then the kSizeAxes coordinates
  const auto* box = info->aCoord;  // lo, hi of the structure, then of each coordinate
  if (info->nParam != 1 + static_cast<int>(kSizeAxes) || info->nCoord != 2 + 2 * kSizeAxes)
    return SQLITE_ERROR;
  // An entry's structure number is its box's lower bound (bind_size); a node's box spans its
  // entries'.
  if (info->iLevel == 0 ? box[0] != q[0] : q[0] < box[0] || q[0] > box[1]) {
    info->eWithin = NOT_WITHIN;
    return SQLITE_OK;
  }
  double d2 = 0;
  for (std::size_t k = 0; k < kSizeAxes; ++k) {
    const double lo = box[2 + 2 * k], hi = box[3 + 2 * k], x = q[1 + k];
    const double gap = x < lo ? lo - x : x > hi ? x - hi : 0.0;
    d2 += gap * gap;
  }
  info->rScore = d2;
  info->eWithin = PARTLY_WITHIN;
  return SQLITE_OK;
}

}  // namespace

void register_near_query(sql::Connection& conn) {
  auto* db = static_cast<sqlite3*>(conn.backend().sqlite_handle());
  if (!db) return;
  if (sqlite3_rtree_query_callback(db, "einsumdb_near", near_query, nullptr, nullptr) != SQLITE_OK)
    throw DatabaseError("database '" + conn.path() +
                        "': cannot register the nearest-size query: " + sqlite3_errmsg(db));
}

void build_sizes(sql::Connection& conn) {
  const bool server = conn.dialect() == sql::Dialect::postgres;
  conn.exec("DELETE FROM sizes");
  sql::Statement ins(conn, server ? kInsertServerSize : kInsertSize);
  sql::Statement s(conn,
                   "SELECT id, structure_hash, structure_lengths FROM workloads WHERE symbols = 0");
  while (s.step()) {
    std::vector<Length> lengths;
    for (const auto& l : json::parse(s.column_text(2)))
      lengths.push_back(Length::of(l.get<std::int64_t>()));
    ins.reset();
    const SizePoint p = size_point(s.column_text(1), lengths);
    if (server)
      bind_server_size(ins, s.column_int(0), p);
    else
      bind_size(ins, s.column_int(0), p);
    ins.run();
  }
}

void build_facts(sql::Connection& conn) {
  conn.exec("DELETE FROM facts");
  std::map<FactKey, FactRow> facts;
  {
    sql::Statement s(conn, std::string("SELECT m.workload_id, m.machine_id, m.transform_id, ") +
                               kGroupColumns + " FROM measurements m WHERE " + kVerified +
                               " ORDER BY m.workload_id, m.machine_id, m.transform_id, m.digest");
    summarise_rows(s, facts);
  }
  sql::Statement ins(conn, upsert_sql(1));
  for (const auto& [key, row] : facts) {
    ins.reset();
    bind_fact(ins, 0, key, row);
    ins.run();
  }
}

std::vector<std::string> check_facts(sql::Connection& conn) {
  std::map<FactKey, FactRow> expected;
  {
    sql::Statement s(conn, std::string("SELECT m.workload_id, m.machine_id, m.transform_id, ") +
                               kGroupColumns + " FROM measurements m WHERE " + kVerified +
                               " ORDER BY m.workload_id, m.machine_id, m.transform_id, m.digest");
    summarise_rows(s, expected);
  }
  std::vector<std::string> problems;
  auto name = [](const FactKey& k) {
    return "fact (workload " + std::to_string(k[0]) + ", machine " + std::to_string(k[1]) +
           ", transform " + std::to_string(k[2]) + ")";
  };
  sql::Statement s(conn, std::string("SELECT ") + kFactColumns + " FROM facts");
  std::set<FactKey> seen;
  while (s.step()) {
    const FactKey key{s.column_int(0), s.column_int(1), s.column_int(2)};
    seen.insert(key);
    const auto it = expected.find(key);
    if (it == expected.end()) {
      problems.push_back(name(key) + " has no verified measurement");
      continue;
    }
    const FactRow& e = it->second;
    const bool same = s.column_int(3) == static_cast<std::int64_t>(!e.rated) &&
                      s.column_double(4) == e.cost && s.column_double(5) == e.median_s &&
                      s.column_double(6) == e.min_s && s.column_optional_double(7) == e.flops &&
                      s.column_optional_double(8) == e.gflops &&
                      s.column_int(9) == e.measurements && s.column_int(10) == e.repetitions &&
                      (s.is_null(11) ? std::string() : s.column_text(11)) == e.bindings &&
                      (s.is_null(12) ? std::string() : s.column_text(12)) == e.origin;
    if (!same) problems.push_back(name(key) + " differs from its measurements");
  }
  for (const auto& [key, row] : expected)
    if (!seen.count(key)) problems.push_back(name(key) + " is missing for its measurements");
  return problems;
}

}  // namespace einsumdb::store_detail
