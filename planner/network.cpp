#include "einsumdb/planner/network.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <sstream>

#include "einsumdb/canon/metrics.hpp"
#include "einsumdb/core/error.hpp"
#include "einsumdb/planner/traffic.hpp"

namespace einsumdb {
namespace {

struct Message {
  int src = 0, dst = 0;
  double bytes = 0;
};

// The time of a phase in which `messages` are all in flight at once (network.hpp), adding its
// volumes to `t`.
double phase_seconds(const std::vector<Message>& messages, const Network& n, int procs,
                     StepTime& t) {
  const int hosts = n.host_of(procs - 1) + 1;
  std::vector<double> out(static_cast<std::size_t>(hosts)), in(static_cast<std::size_t>(hosts));
  std::vector<double> local_in(static_cast<std::size_t>(procs)),
      latency(static_cast<std::size_t>(procs));
  for (const Message& m : messages) {
    if (m.src == m.dst) continue;  // a copy, or the block itself, in the rank's own memory
    const auto d = static_cast<std::size_t>(m.dst);
    ++t.messages;
    const int hs = n.host_of(m.src), hd = n.host_of(m.dst);
    if (hs == hd) {
      local_in[d] += m.bytes;
      latency[d] += n.local_latency_s;
      t.local_bytes += m.bytes;
    } else {
      out[static_cast<std::size_t>(hs)] += m.bytes;
      in[static_cast<std::size_t>(hd)] += m.bytes;
      latency[d] += n.latency_s;
      t.host_bytes += m.bytes;
    }
  }
  double link = 0;
  for (int h = 0; h < hosts; ++h)
    link = std::max({link, out[static_cast<std::size_t>(h)], in[static_cast<std::size_t>(h)]});
  t.link_bytes = std::max(t.link_bytes, link);
  return *std::max_element(latency.begin(), latency.end()) + link / n.bandwidth +
         *std::max_element(local_in.begin(), local_in.end()) / n.local_bandwidth;
}

double positive(const nlohmann::json& j, const char* key, const std::string& where) {
  if (!j.contains(key) || !j[key].is_number() || !(j[key].get<double>() > 0))
    throw SpecError(where + ": '" + key + "' must be a positive number");
  return j[key].get<double>();
}

}  // namespace

nlohmann::ordered_json to_json(const Network& n) {
  return {{"latency_s", n.latency_s},
          {"bandwidth_gbs", n.bandwidth / 1e9},
          {"local_latency_s", n.local_latency_s},
          {"local_bandwidth_gbs", n.local_bandwidth / 1e9},
          {"ranks_per_host", n.ranks_per_host},
          {"source", n.source}};
}

Network network_from_json(const nlohmann::json& j, const std::string& where) {
  if (!j.is_object()) throw SpecError(where + ": a network must be a JSON object");
  Network n;
  n.latency_s = positive(j, "latency_s", where);
  n.bandwidth = positive(j, "bandwidth_gbs", where) * 1e9;
  n.local_latency_s = positive(j, "local_latency_s", where);
  n.local_bandwidth = positive(j, "local_bandwidth_gbs", where) * 1e9;
  if (!j.contains("ranks_per_host") || !j["ranks_per_host"].is_number_integer() ||
      j["ranks_per_host"].get<std::int64_t>() < 1)
    throw SpecError(where + ": 'ranks_per_host' must be a positive integer");
  n.ranks_per_host = j["ranks_per_host"].get<std::int64_t>();
  if (j.contains("source") && j["source"].is_string()) n.source = j["source"].get<std::string>();
  return n;
}

Network parse_network(const std::string& text) {
  std::map<std::string, double> v;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    const auto eq = item.find('=');
    const std::string key = item.substr(0, eq);
    static const std::set<std::string> known{"bandwidth", "latency", "local_bandwidth",
                                             "local_latency", "ranks_per_host"};
    if (eq == std::string::npos || !known.count(key))
      throw SpecError("network '" + text +
                      "': expected KEY=VALUE items among bandwidth, latency, "
                      "local_bandwidth, local_latency, ranks_per_host; got '" +
                      item + "'");
    double value = 0;
    try {
      std::size_t used = 0;
      value = std::stod(item.substr(eq + 1), &used);
      if (used != item.size() - eq - 1) throw std::invalid_argument("trailing");
    } catch (const std::exception&) {
      throw SpecError("network '" + text + "': " + key + " must be a number, got '" +
                      item.substr(eq + 1) + "'");
    }
    if (!(value > 0)) throw SpecError("network '" + text + "': " + key + " must be positive");
    v[key] = value;
  }
  if (!v.count("bandwidth") || !v.count("latency"))
    throw SpecError("network '" + text + "': bandwidth (bytes/s) and latency (s) are required");
  Network n;
  n.bandwidth = v["bandwidth"];
  n.latency_s = v["latency"];
  n.local_bandwidth = v.count("local_bandwidth") ? v["local_bandwidth"] : 10 * n.bandwidth;
  n.local_latency_s = v.count("local_latency") ? v["local_latency"] : n.latency_s / 10;
  if (v.count("ranks_per_host")) {
    const double r = v["ranks_per_host"];
    if (r != std::floor(r)) throw SpecError("network '" + text + "': ranks_per_host must be whole");
    n.ranks_per_host = static_cast<std::int64_t>(r);
  }
  n.source = "stated: " + text;
  return n;
}

std::vector<StepTime> predict_times(const Plan& plan, const Placement& placement,
                                    const Network& network, const KernelSeconds& kernel_seconds) {
  const int P = static_cast<int>(placement.procs);
  std::vector<StepTime> out;
  std::map<std::string, double> kernels;  // by kernel_key
  for (int v = 0; v < static_cast<int>(plan.graph.steps.size()); ++v) {
    const PlanStep& s = plan.graph.steps[static_cast<std::size_t>(v)];
    const StepPlacement& sp = placement.steps[static_cast<std::size_t>(v)];
    StepTime t;

    std::vector<Message> into;
    const double element = static_cast<double>(dtype_bytes(s.dtype));
    for_each_join_transfer(
        plan, placement, v, [&](int, int src, int dst, std::int64_t, const Region& box) {
          if (src != dst) into.push_back({src, dst, static_cast<double>(box.size()) * element});
        });
    t.transfer = phase_seconds(into, network, P, t);

    for (std::int64_t q = 0; q < P; ++q) {
      const BatchedEinsum k = piece_kernel(s, sp, q);
      const std::string key = kernel_key(k);
      auto it = kernels.find(key);
      if (it == kernels.end()) it = kernels.emplace(key, kernel_seconds(k)).first;
      t.kernel = std::max(t.kernel, it->second);
    }

    // The reduction: every group's binomial tree, round by round, all groups at once.
    const Relation& result = placement.relations.at(s.name);
    std::vector<std::vector<int>> groups;
    std::set<std::int64_t> seen;
    std::vector<double> block_bytes;
    for (std::int64_t q = 0; q < P; ++q) {
      const std::int64_t b = result_block(s, sp, result.blocking, q);
      if (!seen.insert(b).second) continue;
      groups.push_back(aggregation_group(plan, placement, v, q));
      double n = dtype_bytes(s.dtype);
      for (auto l : result.blocking.block_shape(b)) n *= static_cast<double>(l);
      block_bytes.push_back(n);
    }
    std::size_t largest = 1;
    for (const auto& g : groups) largest = std::max(largest, g.size());
    for (std::size_t stride = 1; stride < largest; stride <<= 1) {
      std::vector<Message> round;
      double combine = 0;
      for (std::size_t k = 0; k < groups.size(); ++k)
        for (std::size_t i = stride; i < groups[k].size(); i += 2 * stride) {
          round.push_back({groups[k][i], groups[k][i - stride], block_bytes[k]});
          // Read two partial results, write one.
          combine = std::max(combine, 3 * block_bytes[k] / network.local_bandwidth);
        }
      t.reduce += phase_seconds(round, network, P, t) + combine;
    }
    out.push_back(t);
  }
  return out;
}

}  // namespace einsumdb
