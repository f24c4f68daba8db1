// einsumdb bench network: the latency and bandwidth between the hosts of an MPI job and between
// ranks of one host (distributed/network_probe.hpp), written for `einsumdb plan --network` and
// `einsumdb run --network` to predict time with.
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iostream>

#include "einsumdb/cli/commands.hpp"
#include "einsumdb/cli/common.hpp"
#include "einsumdb/cli/network_model.hpp"
#include "einsumdb/distributed/graph_job.hpp"
#include "einsumdb/distributed/network_probe.hpp"
#include "einsumdb/engine/this_machine.hpp"
#include "einsumdb/tuner/roofline.hpp"
#include "einsumdb/version.hpp"

namespace einsumdb::cli {
namespace {

using ojson = nlohmann::ordered_json;

struct BenchNetworkArgs {
  DbArgs db;
  bool record = false;
  OutputArgs out;
  std::string output;
  std::vector<std::int64_t> sizes;
  int repeat = 5;
  double timeout = 120;
};

std::string now_utc() {
  const std::time_t t = std::time(nullptr);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&t));
  return buf;
}

int measure(const BenchNetworkArgs& a, const MpiSession& mpi) {
  NetworkProbeOptions options;
  if (!a.sizes.empty()) options.sizes = a.sizes;
  options.repeat = a.repeat;
  options.timeout_s = a.timeout;
  options.memory_bandwidth = [&a] {
    // The machine's roofline (the store's, else measured now, about a second).
    std::optional<Store> store;
    try {
      store = open_for_reading(a.db);
    } catch (const Error&) {
      store.reset();
    }
    const auto r = store ? store->roofline(this_machine().fingerprint(), "f64") : std::nullopt;
    return (r ? *r : measure_roofline(Dtype::f64)).bandwidth_gbs * 1e9;
  };
  const NetworkProbe probe = probe_network(MPI_COMM_WORLD, options);
  if (mpi.rank() != 0) return kExitOk;

  ojson pairs = ojson::array();
  for (const auto& p : probe.pairs) {
    ojson one_way = ojson::array();
    for (const auto& [bytes, s] : p.one_way) one_way.push_back({{"bytes", bytes}, {"seconds", s}});
    pairs.push_back({{"ranks", {p.a, p.b}},
                     {"hosts", {p.host_a, p.host_b}},
                     {"latency_s", p.latency_s},
                     {"bandwidth_gbs", p.bandwidth / 1e9},
                     {"one_way", one_way}});
  }
  ojson j = {{"format", "einsumdb-network"},
             {"version", 1},
             {"network", to_json(probe.network)},
             {"ranks", mpi.size()},
             {"hosts", probe.hosts},
             {"ranks_fill_hosts_in_order", probe.block_mapping},
             {"pairs", pairs},
             {"measured_at", now_utc()},
             {"tool_version", kVersion}};
  if (!a.output.empty()) {
    const std::string partial = a.output + ".partial";
    {
      std::ofstream f(partial);
      f << j.dump(2) << '\n';
      if (!f.flush()) throw Error("cannot write the network to '" + a.output + "'");
    }
    std::filesystem::rename(partial, a.output);
  }
  if (a.record) {
    Store store = open_for_writing(a.db);
    store.record_network(store.machine_id(this_machine()), to_record(probe.network, probe.hosts));
    j["recorded"] = {{"db", store.path()}};
  }
  if (want_json(a.out)) {
    print_json(j);
    return kExitOk;
  }
  std::vector<std::vector<std::string>> rows;
  auto us = [](double s) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.1f us", s * 1e6);
    return std::string(buf);
  };
  auto gbs = [](double b) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.3f GB/s", b / 1e9);
    return std::string(buf);
  };
  for (const auto& p : probe.pairs)
    rows.push_back({std::to_string(p.a) + " - " + std::to_string(p.b), p.host_a + " - " + p.host_b,
                    p.host_a == p.host_b ? "within a host" : "between hosts", us(p.latency_s),
                    gbs(p.bandwidth)});
  print_table({"ranks", "hosts", "link", "latency", "bandwidth"}, rows);
  const Network& n = probe.network;
  std::cout << "network: between hosts " << us(n.latency_s) << ", " << gbs(n.bandwidth)
            << "; within a host " << us(n.local_latency_s) << ", " << gbs(n.local_bandwidth) << "; "
            << n.ranks_per_host << " rank(s) per host\n";
  if (!probe.block_mapping)
    std::cout << "note: the ranks do not fill the hosts in order (rank r on host r / "
              << n.ranks_per_host
              << "), which the time model assumes; launch with --map-by ppr:N:node or a "
                 "hostfile of N slots per host\n";
  if (!a.output.empty()) std::cout << "written to " << a.output << "\n";
  if (a.record) std::cout << "recorded in " << j["recorded"]["db"].get<std::string>() << "\n";
  return kExitOk;
}

int run_bench_network(const BenchNetworkArgs& a) {
  MpiSession mpi;
  if (mpi.size() < 2) {
    std::cerr << "einsumdb: error: bench network measures between ranks: run it under mpirun "
                 "with two or more, e.g. mpirun -np 2 einsumdb bench network\n";
    return kExitUsage;
  }
  try {
    return measure(a, mpi);
  } catch (const SpecError& e) {
    if (mpi.rank() == 0) std::cerr << "einsumdb: error: " << e.what() << "\n";
    return kExitUsage;  // every rank checked the same arguments
  } catch (const std::exception& e) {
    std::cerr << "einsumdb: error: rank " << mpi.rank() << " of " << mpi.size() << " on "
              << host_name() << ": " << e.what() << "\n"
              << std::flush;
    MPI_Abort(MPI_COMM_WORLD, kExitRuntime);
    return kExitRuntime;
  }
}

}  // namespace

Command add_bench_network_command(CLI::App& bench) {
  auto a = std::make_shared<BenchNetworkArgs>();
  auto* cmd = bench.add_subcommand(
      "network",
      "Measure latency and bandwidth between the hosts of an MPI job (and between ranks of one "
      "host) for the planner's time model; run under mpirun");
  cmd->footer(
      "Examples:\n"
      "  mpirun --hostfile hosts --map-by ppr:1:node -np 2 einsumdb bench network -o net.json\n"
      "  einsumdb plan graph.json --procs 2 --network net.json\n"
      "  mpirun -np 2 einsumdb bench network --record && einsumdb plan g.json -P 2 --network "
      "stored");
  cmd->add_option("--output,-o", a->output, "Write the measurement (JSON) here, on rank 0's host");
  cmd->add_option("--sizes", a->sizes,
                  "Message sizes in bytes, smallest first: the first gives the latency, the last "
                  "the bandwidth (default 8 65536 1048576 8388608)")
      ->check(CLI::Range(std::int64_t{1}, std::int64_t{1} << 30));
  cmd->add_option("--repeat", a->repeat,
                  "Timed round trips per size (four times as many up to 64 KiB)")
      ->capture_default_str()
      ->check(CLI::Range(1, 1000));
  cmd->add_option("--timeout", a->timeout, "Seconds to wait for any message before giving up")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd->add_flag("--record", a->record,
                "Record the network in the database (rank 0's host), under this machine: "
                "`einsumdb plan --network stored` then uses it");
  add_db_option(cmd, a->db);
  add_output_options(cmd, a->out);
  return [a] { return run_bench_network(*a); };
}

}  // namespace einsumdb::cli
