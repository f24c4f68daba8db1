#include "einsumdb/cli/network_model.hpp"

#include <filesystem>
#include <fstream>
#include <sstream>

#include "einsumdb/canon/metrics.hpp"
#include "einsumdb/core/error.hpp"
#include "einsumdb/db/retrieve.hpp"
#include "einsumdb/engine/this_machine.hpp"
#include "einsumdb/tuner/roofline.hpp"

namespace einsumdb::cli {

Store::NetworkRecord to_record(const Network& n, const std::vector<std::string>& hosts) {
  Store::NetworkRecord r;
  r.hosts = hosts;
  r.latency_s = n.latency_s;
  r.bandwidth_gbs = n.bandwidth / 1e9;
  r.local_latency_s = n.local_latency_s;
  r.local_bandwidth_gbs = n.local_bandwidth / 1e9;
  r.ranks_per_host = n.ranks_per_host;
  r.source = n.source;
  return r;
}

Network from_record(const Store::NetworkRecord& r) {
  Network n;
  n.latency_s = r.latency_s;
  n.bandwidth = r.bandwidth_gbs * 1e9;
  n.local_latency_s = r.local_latency_s;
  n.local_bandwidth = r.local_bandwidth_gbs * 1e9;
  n.ranks_per_host = r.ranks_per_host;
  n.source = r.source + ", recorded " + r.measured_at;
  return n;
}

Network network_argument(const std::string& arg, std::int64_t ranks_per_host, const DbArgs& db) {
  Network n;
  std::error_code ec;
  if (arg == "stored") {
    auto store = open_for_reading(db);
    const auto r = store ? store->latest_network(this_machine().fingerprint()) : std::nullopt;
    if (!r)
      throw SpecError("--network stored: no network measured from this machine in " +
                      resolve_db_path(db) +
                      " (mpirun … einsumdb bench network --record records one)");
    n = from_record(*r);
  } else if (std::filesystem::is_regular_file(arg, ec)) {
    std::ifstream in(arg, std::ios::binary);
    std::stringstream text;
    text << in.rdbuf();
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(text.str());
    } catch (const nlohmann::json::exception& e) {
      throw SpecError("--network " + arg + ": not valid JSON: " + e.what());
    }
    if (j.is_object() && j.contains("network")) j = j["network"];
    n = network_from_json(j, "--network " + arg);
  } else if (arg.find('=') != std::string::npos) {
    n = parse_network(arg);
  } else {
    throw SpecError("--network '" + arg +
                    "': neither a file (einsumdb bench network --output FILE), `stored`, nor "
                    "figures (bandwidth=BYTES_PER_S,latency=SECONDS[,...])");
  }
  if (ranks_per_host > 0) n.ranks_per_host = ranks_per_host;
  return n;
}

KernelTimes::KernelTimes(const DbArgs& db) : machine_(this_machine().fingerprint()) {
  try {
    store_ = open_for_reading(db);
  } catch (const Error&) {
    store_.reset();  // an unreadable store: every kernel is estimated
  }
}

double KernelTimes::operator()(const BatchedEinsum& e) {
  if (store_) {
    const auto a = best_for(*store_, canonicalize(e, kQueryCanon), machine_, false);
    if (a && a->match == Match::exact && a->fact.median_s > 0) {
      ++measured_;
      return a->fact.median_s;
    }
  }
  ++estimated_;
  const Dtype dtype = e.arrays.begin()->second.dtype;
  auto it = rooflines_.find(dtype);
  if (it == rooflines_.end()) {
    std::optional<Store::Roofline> r;
    if (store_) r = store_->roofline(machine_, std::string(to_string(dtype)));
    it = rooflines_.emplace(dtype, r ? *r : measure_roofline(dtype)).first;
  }
  const double flops = flop_count(e).value_or(0), bytes = footprint_bytes(e).value_or(0);
  if (!(flops > 0)) return bytes / (it->second.bandwidth_gbs * 1e9);
  return flops / (it->second.attainable_gflops(flops, bytes) * 1e9);
}

nlohmann::ordered_json to_json(const StepTime& t) {
  return {{"seconds", t.total()},         {"transfer_s", t.transfer},
          {"kernel_s", t.kernel},         {"reduce_s", t.reduce},
          {"link_bytes", t.link_bytes},   {"host_bytes", t.host_bytes},
          {"local_bytes", t.local_bytes}, {"messages", t.messages}};
}

double total_seconds(const std::vector<StepTime>& steps) {
  double s = 0;
  for (const auto& t : steps) s += t.total();
  return s;
}

}  // namespace einsumdb::cli
