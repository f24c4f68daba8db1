#include "einsumdb/distributed/network_probe.hpp"

#include <algorithm>
#include <chrono>
#include <limits>
#include <sstream>

#include "einsumdb/canon/metrics.hpp"
#include "einsumdb/core/stats.hpp"
#include "einsumdb/distributed/collectives.hpp"

namespace einsumdb {
namespace {

using Clock = std::chrono::steady_clock;
constexpr int kPingTag = 1, kPongTag = 2;

std::vector<std::string> split_lines(const std::string& text) {
  std::vector<std::string> out;
  std::stringstream in(text);
  std::string line;
  while (std::getline(in, line)) out.push_back(line);
  return out;
}

// The fastest half round trip of `bytes` between this rank and `partner`; `first` sends first.
double ping_pong(const Waiter& waiter, int partner, bool first, std::vector<char>& buffer,
                 std::int64_t bytes, int repeat) {
  const int count = static_cast<int>(bytes);
  const std::string what = "a message of " + std::to_string(bytes) + " bytes to or from rank " +
                           std::to_string(partner) + " (einsumdb bench network)";
  double best = std::numeric_limits<double>::infinity();
  for (int k = 0; k <= repeat; ++k) {  // the first round trip is untimed
    std::vector<MPI_Request> r(1);
    const auto t0 = Clock::now();
    if (first) {
      MPI_Isend(buffer.data(), count, MPI_BYTE, partner, kPingTag, waiter.comm(), r.data());
      waiter.wait(r, what);
      r.resize(1);
      MPI_Irecv(buffer.data(), count, MPI_BYTE, partner, kPongTag, waiter.comm(), r.data());
      waiter.wait(r, what);
    } else {
      MPI_Irecv(buffer.data(), count, MPI_BYTE, partner, kPingTag, waiter.comm(), r.data());
      waiter.wait(r, what);
      r.resize(1);
      MPI_Isend(buffer.data(), count, MPI_BYTE, partner, kPongTag, waiter.comm(), r.data());
      waiter.wait(r, what);
    }
    const double t = std::chrono::duration<double>(Clock::now() - t0).count() / 2;
    if (k > 0) best = std::min(best, t);
  }
  return best;
}

}  // namespace

NetworkProbe probe_network(MPI_Comm comm, const NetworkProbeOptions& options) {
  int me = 0, procs = 1;
  MPI_Comm_rank(comm, &me);
  MPI_Comm_size(comm, &procs);
  if (procs < 2) throw SpecError("measuring the network needs at least two ranks (mpirun -np 2 …)");
  if (options.sizes.empty()) throw SpecError("measuring the network needs at least one size");
  for (auto n : options.sizes)
    if (n < 1 || n > std::numeric_limits<int>::max())
      throw SpecError("message sizes must be from 1 byte to 2 GiB, got " + std::to_string(n));
  const Waiter waiter(comm, options.timeout_s);

  NetworkProbe out;
  std::string all;
  for (const auto& h : gather_text(waiter, host_name(), "the ranks' host names")) all += h + "\n";
  out.hosts = split_lines(broadcast_text(waiter, all, "the ranks' host names"));

  // Rank 0's partners: the first rank of every other host, then one more rank of its own host.
  std::vector<int> partners;
  std::vector<std::string> seen{out.hosts[0]};
  for (int r = 1; r < procs; ++r)
    if (std::find(seen.begin(), seen.end(), out.hosts[static_cast<std::size_t>(r)]) == seen.end()) {
      seen.push_back(out.hosts[static_cast<std::size_t>(r)]);
      partners.push_back(r);
    }
  for (int r = 1; r < procs; ++r)
    if (out.hosts[static_cast<std::size_t>(r)] == out.hosts[0]) {
      partners.push_back(r);
      break;
    }

  std::vector<char> buffer(
      static_cast<std::size_t>(*std::max_element(options.sizes.begin(), options.sizes.end())));
  for (int partner : partners) {
    if (me != 0 && me != partner) continue;
    PairProbe p{0, partner, out.hosts[0], out.hosts[static_cast<std::size_t>(partner)], {}, 0, 0};
    for (auto n : options.sizes) {
      const int repeat = n <= 65536 ? 4 * options.repeat : options.repeat;
      p.one_way.emplace_back(n,
                             ping_pong(waiter, me == 0 ? partner : 0, me == 0, buffer, n, repeat));
    }
    p.latency_s = p.one_way.front().second;
    const auto& [n, t] = p.one_way.back();
    p.bandwidth = static_cast<double>(n) / std::max(t - p.latency_s, 1e-12);
    if (me == 0) out.pairs.push_back(p);
  }
  broadcast_text(waiter, "done", "the end of the measurement");
  if (me != 0) return out;

  // The model's figures: the median over the pairs between hosts, and the pair within a host.
  std::vector<double> lat, bw;
  const PairProbe* local = nullptr;
  for (const auto& p : out.pairs) {
    if (p.host_a == p.host_b) {
      local = &p;
    } else {
      lat.push_back(p.latency_s);
      bw.push_back(p.bandwidth);
    }
  }
  Network& n = out.network;
  std::ostringstream source;
  source << "measured by einsumdb bench network over " << seen.size() << " host(s) (";
  for (std::size_t h = 0; h < seen.size(); ++h) source << (h ? ", " : "") << seen[h];
  source << ")";
  if (local) {
    n.local_latency_s = local->latency_s;
    n.local_bandwidth = local->bandwidth;
  } else {
    if (!options.memory_bandwidth)
      throw SpecError("one rank per host: measuring the network needs the memory's bandwidth");
    n.local_bandwidth = options.memory_bandwidth();
    n.local_latency_s = lat.empty() ? 1e-6 : median(lat) / 10;
    source << "; within a host: the memory's bandwidth, a tenth of the link's latency";
  }
  if (lat.empty()) {
    n.latency_s = n.local_latency_s;
    n.bandwidth = n.local_bandwidth;
    source << "; one host: between hosts as within it";
  } else {
    n.latency_s = median(lat);
    n.bandwidth = median(bw);
  }
  // Ranks per host as mpirun placed them, and whether they fill the hosts in order.
  n.ranks_per_host = std::count(out.hosts.begin(), out.hosts.end(), out.hosts[0]);
  for (int r = 0; r < procs; ++r)
    if (out.hosts[static_cast<std::size_t>(r)] !=
        out.hosts[static_cast<std::size_t>(r / n.ranks_per_host * n.ranks_per_host)])
      out.block_mapping = false;
  n.source = source.str();
  return out;
}

}  // namespace einsumdb
