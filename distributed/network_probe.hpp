// Measuring the network a job runs on, for the time model of planner/network.hpp: messages sent
// back and forth (ping-pong) between rank 0 and the first rank of every other host, and between
// rank 0 and another rank of its own host, at a few sizes. Half a round trip is one message's
// time; the smallest size gives the latency, and the largest the bandwidth once the latency is
// taken off: bandwidth = n / (t(n) − latency).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <mpi.h>

#include "einsumdb/planner/network.hpp"

namespace einsumdb {

struct NetworkProbeOptions {
  std::vector<std::int64_t> sizes = {8, 65536, 1 << 20, 8 << 20};  // bytes; the first the latency's
  int repeat = 5;          // timed round trips per size (the fastest counts), after one untimed
  double timeout_s = 120;  // on every wait
  // Rank 0, when no other rank shares its host: the rate between ranks of one host, bytes/s (a
  // measured memory bandwidth, such as the machine's roofline).
  std::function<double()> memory_bandwidth;
};

struct PairProbe {
  int a = 0, b = 0;  // ranks
  std::string host_a, host_b;
  std::vector<std::pair<std::int64_t, double>> one_way;  // (bytes, seconds): half a round trip
  double latency_s = 0, bandwidth = 0;                   // bytes/s
};

struct NetworkProbe {
  Network network;                 // what the time model uses
  std::vector<std::string> hosts;  // per rank
  std::vector<PairProbe> pairs;    // between hosts, then within rank 0's host
  bool block_mapping = true;       // rank r on host r / ranks_per_host, as the model assumes
};

// Collective over `comm` (at least two ranks); the result is complete on rank 0. Throws
// TimeoutError when a partner does not answer within the time-out.
NetworkProbe probe_network(MPI_Comm comm, const NetworkProbeOptions& options);

}  // namespace einsumdb
