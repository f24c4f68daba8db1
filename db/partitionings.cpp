// Partitionings (planner and distributed runs) and the machine's roofline figures.
#include "einsumdb/db/error.hpp"
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

namespace {
// The "vectors" column: {"d": {index: pieces}, "step", "einsum", "method", "measured"}.
std::string vectors_text(const Store::Partitioning& p) {
  json vectors = {{"d", p.vector}, {"step", p.step}, {"einsum", p.einsum}, {"method", p.method}};
  if (!p.measured.is_null()) vectors["measured"] = p.measured;
  return vectors.dump();
}
}  // namespace

void Store::record_partitioning(RunId run_key, const Partitioning& p) {
  const std::int64_t run = id_value(run_key);
  impl_->write([&] {
    const auto machine = find_machine(p.machine);
    auto s = impl_->stmt(
        "INSERT INTO partitionings(run_id, machine_id, graph_key, procs, vectors, predicted_bytes, "
        "measured_bytes, measured_seconds, recorded_at) VALUES(?, ?, ?, ?, ?, ?, ?, ?, ?)");
    s.bind(1, run);
    if (machine)
      s.bind(2, id_value(*machine));
    else
      s.bind_null(2);
    for (const auto& [index, pieces] : p.vector)
      if (pieces < 1)
        throw SpecError("partitioning of " + p.graph_key + ": index '" + index + "' has " +
                        std::to_string(pieces) + " pieces; at least 1 is needed");
    s.bind(3, p.graph_key).bind(4, p.procs).bind(5, vectors_text(p)).bind(6, p.predicted_bytes);
    s.bind(7, p.measured_bytes).bind(8, p.measured_seconds);
    s.bind(9, p.recorded_at.empty() ? now_iso8601() : p.recorded_at).run();
    return 0;
  });
}

namespace {
#define EINSUMDB_PARTITIONING_COLUMNS                                                     \
  "SELECT p.graph_key, p.procs, p.vectors, p.predicted_bytes, p.measured_bytes, "         \
  "p.measured_seconds, coalesce(mc.fingerprint, ''), p.recorded_at FROM partitionings p " \
  "LEFT JOIN machines "                                                                   \
  "mc ON mc.id = p.machine_id "

// The "vectors" column: {"d": {index: pieces}, "step", "einsum", "method", "measured"}.
template <typename S>
std::vector<Store::Partitioning> read_partitionings(S& s) {
  std::vector<Store::Partitioning> out;
  while (s.step()) {
    Store::Partitioning p;
    p.graph_key = s.column_text(0);
    p.procs = static_cast<int>(s.column_int(1));
    try {
      const json v = json::parse(s.column_text(2));
      p.vector = v.value("d", json::object()).get<Store::PartitionVector>();
      p.step = v.value("step", "");
      p.einsum = v.value("einsum", "");
      p.method = v.value("method", "");
      p.measured = v.value("measured", json());
    } catch (const json::exception& e) {
      throw DatabaseError("partitioning of " + p.graph_key + ": its vectors are not readable (" +
                          e.what() + ")");
    }
    p.predicted_bytes = s.column_optional_double(3);
    p.measured_bytes = s.column_optional_double(4);
    p.measured_seconds = s.column_optional_double(5);
    p.machine = s.column_text(6);
    p.recorded_at = s.column_text(7);
    out.push_back(std::move(p));
  }
  return out;
}
}  // namespace

std::vector<Store::Partitioning> Store::partitionings(const std::string& graph_key, int procs) {
  auto s = impl_->stmt(EINSUMDB_PARTITIONING_COLUMNS
                       "WHERE p.graph_key = ? AND p.procs = ? ORDER BY p.id");
  s.bind(1, graph_key).bind(2, procs);
  return read_partitionings(s);
}

std::vector<Store::Partitioning> Store::measured_partitionings(const std::string& since,
                                                               std::size_t limit) {
  auto s = impl_->stmt(EINSUMDB_PARTITIONING_COLUMNS
                       "WHERE p.measured_seconds IS NOT NULL AND (?1 = '' OR p.recorded_at >= ?1) "
                       "ORDER BY p.id DESC LIMIT ?2");
  s.bind(1, since).bind(2, limit ? static_cast<std::int64_t>(limit) : kNoLimit);
  return read_partitionings(s);
}

std::vector<Store::Partitioning> Store::measured_partitionings(const std::string& machine,
                                                               int procs) {
  auto s = impl_->stmt(EINSUMDB_PARTITIONING_COLUMNS
                       "WHERE mc.fingerprint = ? AND p.procs = ? AND p.measured_seconds IS NOT "
                       "NULL ORDER BY p.id");
  s.bind(1, machine).bind(2, procs);
  return read_partitionings(s);
}

std::vector<Store::Partitioning> Store::all_partitionings() {
  auto s = impl_->stmt(EINSUMDB_PARTITIONING_COLUMNS "ORDER BY p.id");
  return read_partitionings(s);
}

bool Store::import_partitioning(const Partitioning& p) {
  return impl_->write([&] {
    const auto machine = find_machine(p.machine);
    if (!p.machine.empty() && !machine)
      throw SpecError("partitioning of " + p.graph_key + ": machine " + p.machine + " is not in '" +
                      path() + "'");
    const std::string vectors = vectors_text(p);
    auto same = impl_->stmt(
        "SELECT p.predicted_bytes, p.measured_bytes, p.measured_seconds FROM partitionings p "
        "LEFT JOIN machines mc ON mc.id = p.machine_id WHERE p.graph_key = ? AND p.procs = ? AND "
        "p.vectors = ? AND p.recorded_at = ? AND coalesce(mc.fingerprint, '') = ?");
    same.bind(1, p.graph_key).bind(2, p.procs).bind(3, vectors).bind(4, p.recorded_at);
    same.bind(5, p.machine);
    while (same.step())
      if (same.column_optional_double(0) == p.predicted_bytes &&
          same.column_optional_double(1) == p.measured_bytes &&
          same.column_optional_double(2) == p.measured_seconds)
        return false;
    auto s = impl_->stmt(
        "INSERT INTO partitionings(run_id, machine_id, graph_key, procs, vectors, predicted_bytes, "
        "measured_bytes, measured_seconds, recorded_at) VALUES(NULL, ?, ?, ?, ?, ?, ?, ?, ?)");
    if (machine)
      s.bind(1, id_value(*machine));
    else
      s.bind_null(1);
    s.bind(2, p.graph_key).bind(3, p.procs).bind(4, vectors).bind(5, p.predicted_bytes);
    s.bind(6, p.measured_bytes).bind(7, p.measured_seconds);
    s.bind(8, p.recorded_at.empty() ? now_iso8601() : p.recorded_at).run();
    return true;
  });
}

void Store::record_roofline(MachineId machine_key, const Roofline& r) {
  const std::int64_t machine = id_value(machine_key);
  if (!(r.peak_gflops > 0) || !(r.bandwidth_gbs > 0) || !std::isfinite(r.peak_gflops) ||
      !std::isfinite(r.bandwidth_gbs))
    throw SpecError("roofline for " + r.dtype + ": peak and bandwidth must be positive");
  impl_->write([&] {
    impl_->machine_fingerprint(machine);  // the machine must exist
    auto s = impl_->stmt(
        "INSERT INTO rooflines(machine_id, dtype, peak_gflops, bandwidth_gbs, measured_at) "
        "VALUES(?, ?, ?, ?, ?) ON CONFLICT(machine_id, dtype) DO UPDATE SET peak_gflops = "
        "excluded.peak_gflops, bandwidth_gbs = excluded.bandwidth_gbs, measured_at = "
        "excluded.measured_at");
    s.bind(1, machine).bind(2, r.dtype).bind(3, r.peak_gflops).bind(4, r.bandwidth_gbs);
    s.bind(5, r.measured_at.empty() ? now_iso8601() : r.measured_at).run();
    return 0;
  });
}

std::optional<Store::Roofline> Store::roofline(const std::string& machine,
                                               const std::string& dtype) {
  auto s = impl_->stmt(
      "SELECT r.dtype, r.peak_gflops, r.bandwidth_gbs, r.measured_at FROM rooflines r JOIN "
      "machines m ON m.id = r.machine_id WHERE m.fingerprint = ? AND r.dtype = ?");
  s.bind(1, machine).bind(2, dtype);
  if (!s.step()) return std::nullopt;
  return Roofline{s.column_text(0), s.column_double(1), s.column_double(2), s.column_text(3)};
}

void Store::record_network(MachineId machine_key, const NetworkRecord& n) {
  const std::int64_t machine = id_value(machine_key);
  for (double v : {n.latency_s, n.bandwidth_gbs, n.local_latency_s, n.local_bandwidth_gbs})
    if (!(v > 0) || !std::isfinite(v))
      throw SpecError("a network's latencies and bandwidths must be positive");
  if (n.ranks_per_host < 1) throw SpecError("a network has at least one rank per host");
  impl_->write([&] {
    impl_->machine_fingerprint(machine);  // the machine must exist
    auto s = impl_->stmt(
        "INSERT INTO networks(machine_id, hosts, latency_s, bandwidth_gbs, local_latency_s, "
        "local_bandwidth_gbs, ranks_per_host, source, measured_at) VALUES(?, ?, ?, ?, ?, ?, ?, ?, "
        "?)");
    s.bind(1, machine).bind(2, nlohmann::json(n.hosts).dump()).bind(3, n.latency_s);
    s.bind(4, n.bandwidth_gbs).bind(5, n.local_latency_s).bind(6, n.local_bandwidth_gbs);
    s.bind(7, n.ranks_per_host).bind(8, n.source);
    s.bind(9, n.measured_at.empty() ? now_iso8601() : n.measured_at).run();
    return 0;
  });
}

std::optional<Store::NetworkRecord> Store::latest_network(const std::string& machine) {
  auto s = impl_->stmt(
      "SELECT n.hosts, n.latency_s, n.bandwidth_gbs, n.local_latency_s, n.local_bandwidth_gbs, "
      "n.ranks_per_host, n.source, n.measured_at FROM networks n JOIN machines m ON m.id = "
      "n.machine_id WHERE m.fingerprint = ? ORDER BY n.measured_at DESC, n.id DESC LIMIT 1");
  s.bind(1, machine);
  if (!s.step()) return std::nullopt;
  NetworkRecord n;
  for (const auto& h : nlohmann::json::parse(s.column_text(0)))
    n.hosts.push_back(h.get<std::string>());
  n.latency_s = s.column_double(1);
  n.bandwidth_gbs = s.column_double(2);
  n.local_latency_s = s.column_double(3);
  n.local_bandwidth_gbs = s.column_double(4);
  n.ranks_per_host = s.column_int(5);
  n.source = s.column_text(6);
  n.measured_at = s.column_text(7);
  return n;
}

}  // namespace einsumdb
