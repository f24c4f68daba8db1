// What `einsumdb plan` and `einsumdb run` need to predict time on a network: the --network
// argument (a file written by `einsumdb bench network`, or figures stated on the command line),
// the kernel times of a plan's pieces, and the prediction as JSON.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "einsumdb/cli/common.hpp"
#include "einsumdb/planner/network.hpp"

namespace einsumdb::cli {

// A file written by `einsumdb bench network --output` (its "network" object), `stored` (the
// network last recorded from this machine in the store `db`, by `bench network --record`), or a
// stated network ("bandwidth=1.25e8,latency=50e-6,..."; parse_network). `ranks_per_host` > 0
// replaces the network's.
Network network_argument(const std::string& arg, std::int64_t ranks_per_host, const DbArgs& db);

// The record of a measured network in the store, and back.
Store::NetworkRecord to_record(const Network& n, const std::vector<std::string>& hosts);
Network from_record(const Store::NetworkRecord& r);

// A piece's kernel time on this machine: the median of the fastest verified transform of its
// exact workload in the store, else the roofline's bound (the store's roofline for the dtype,
// or one measured now, about a second). Counts which answered.
class KernelTimes {
 public:
  explicit KernelTimes(const DbArgs& db);
  double operator()(const BatchedEinsum& e);
  std::size_t measured() const { return measured_; }
  std::size_t estimated() const { return estimated_; }

 private:
  std::optional<Store> store_;
  std::string machine_;
  std::map<Dtype, Store::Roofline> rooflines_;
  std::size_t measured_ = 0, estimated_ = 0;
};

nlohmann::ordered_json to_json(const StepTime& t);
double total_seconds(const std::vector<StepTime>& steps);

}  // namespace einsumdb::cli
