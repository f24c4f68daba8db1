// The time a plan takes on a network: the data planner/traffic.hpp says each step moves, priced
// by a latency–bandwidth (α–β) model of the links, plus each piece's kernel time.
//
// The network is a set of hosts, each with one link to a switch that never congests (a
// full-bisection fabric, or the fixture's bridge): a host sends and receives at `bandwidth`
// bytes/s in each direction at once, shared by its ranks, and each message costs `latency_s`
// before its bytes flow. Ranks of one host exchange through memory at their own rates. Ranks
// fill the hosts in order, `ranks_per_host` to a host (mpirun's --map-by ppr:N:node, or a
// hostfile with N slots per host).
//
// A step runs as the executor runs it without overlap (`einsumdb run --no-overlap`): its
// transfers, then its kernels, then the reduction of partial results; each phase ends when its
// slowest rank does. A phase of messages takes the latency of the most messages any rank
// receives, plus the most bytes any host's link carries in one direction over `bandwidth`, plus
// the most bytes any rank receives from its own host over `local_bandwidth`. A reduction is
// ceil(log2 n) such phases (the binomial tree's rounds), each followed by combining the partial
// results in memory. With overlap, transfers proceed under earlier kernels, so a run takes at most
// the predicted time.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "einsumdb/canon/model.hpp"
#include "einsumdb/planner/eindecomp.hpp"
#include "einsumdb/planner/placement.hpp"

namespace einsumdb {

struct Network {
  double latency_s = 0;             // per message between hosts
  double bandwidth = 0;             // bytes/s, each direction of a host's link
  double local_latency_s = 0;       // per message between ranks of one host
  double local_bandwidth = 0;       // bytes/s between ranks of one host (and copies in memory)
  std::int64_t ranks_per_host = 1;  // rank r runs on host r / ranks_per_host
  std::string source;               // how the figures were obtained (measured where, or stated)

  int host_of(int rank) const { return static_cast<int>(rank / ranks_per_host); }
};

// {"latency_s", "bandwidth_gbs", "local_latency_s", "local_bandwidth_gbs", "ranks_per_host",
// "source"} (+ whatever else the measurement recorded, ignored here).
nlohmann::ordered_json to_json(const Network& n);
// Reads it back; throws SpecError naming the field that is missing or not a positive number.
Network network_from_json(const nlohmann::json& j, const std::string& where);
// "bandwidth=25e9,latency=2e-6[,local_bandwidth=…,local_latency=…,ranks_per_host=64]" (bytes/s,
// seconds): a network stated rather than measured. Missing local figures default to 10 times the
// link's bandwidth and a tenth of its latency.
Network parse_network(const std::string& text);

// The seconds one rank's kernel takes on the piece's blocks (a measured transform's time from
// the store, or an estimate from the roofline).
using KernelSeconds = std::function<double(const BatchedEinsum&)>;

struct StepTime {
  double transfer = 0, kernel = 0, reduce = 0;
  double total() const { return transfer + kernel + reduce; }
  double link_bytes = 0;   // the most bytes any host's link carried in one direction
  double local_bytes = 0;  // bytes moved between ranks of one host, all ranks
  double host_bytes = 0;   // bytes moved between hosts, all ranks
  std::int64_t messages = 0;
};

// The predicted time of every step of `plan` placed by `placement` on `network`.
std::vector<StepTime> predict_times(const Plan& plan, const Placement& placement,
                                    const Network& network, const KernelSeconds& kernel_seconds);

}  // namespace einsumdb
