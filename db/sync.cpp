#include "einsumdb/db/sync.hpp"

#include <filesystem>
#include <sstream>

#include "einsumdb/core/error.hpp"
#include "einsumdb/db/sql.hpp"

namespace einsumdb {

nlohmann::ordered_json to_json(const SyncResult& r) {
  return {{"machines", r.machines},
          {"rooflines", r.rooflines},
          {"networks", r.networks},
          {"measurements", r.measurements},
          {"inserted", r.inserted},
          {"duplicates", r.duplicates},
          {"runs", r.runs},
          {"partitionings", r.partitionings},
          {"partitionings_present", r.partitionings_present},
          {"batches", r.batches}};
}

SyncResult sync_stores(Store& from, Store& to, const SyncOptions& options,
                       const std::function<void(std::size_t, std::size_t)>& progress) {
  auto same = [](const std::string& a, const std::string& b) {
    if (sql::is_server_uri(a) || sql::is_server_uri(b)) return a == b;
    std::error_code ec1, ec2;
    return std::filesystem::weakly_canonical(a, ec1) == std::filesystem::weakly_canonical(b, ec2);
  };
  if (same(from.path(), to.path()))
    throw SpecError("sync from '" + from.path() + "' to itself: nothing to do");
  SyncResult r;
  // Machines first (partitionings, rooflines and networks name them), then their rooflines and
  // their latest network.
  for (const Machine& m : from.machines()) {
    const std::string fp = m.fingerprint();
    if (!to.find_machine(fp)) ++r.machines;
    const MachineId id = to.machine_id(m);
    for (const char* dtype : {"f32", "f64"}) {
      const auto here = from.roofline(fp, dtype);
      if (!here) continue;
      const auto there = to.roofline(fp, dtype);
      if (there && there->measured_at >= here->measured_at) continue;
      to.record_roofline(id, *here);
      ++r.rooflines;
    }
    const auto net = from.latest_network(fp);
    const auto there = net ? to.latest_network(fp) : std::nullopt;
    if (net && (!there || there->measured_at < net->measured_at)) {
      to.record_network(id, *net);
      ++r.networks;
    }
  }

  const std::size_t total =
      static_cast<std::size_t>(from.stats().value("measurements", std::int64_t{0}));
  const std::size_t batch = options.batch ? options.batch : 5000;
  for (std::int64_t after = 0;;) {
    std::stringstream page;
    std::size_t n = 0;
    const std::int64_t last = from.export_page(page, options.filter, after, batch, &n);
    if (n == 0) break;
    const std::string text = page.str();
    const std::string source =
        from.path() + " rows " + std::to_string(after + 1) + "..." + std::to_string(last);
    // A server may abort a batch that deadlocked with another writer: it is in memory, so it
    // is written again.
    const auto imported = sql::retrying([&] {
      std::istringstream in(text);
      return to.import_jsonl(in, source);
    });
    r.inserted += imported.inserted;
    r.duplicates += imported.duplicates;
    r.runs += imported.runs;
    r.measurements += n;
    ++r.batches;
    after = last;
    if (progress) progress(r.measurements, total);
    if (n < batch) break;
  }

  for (const auto& p : from.all_partitionings()) {
    if (to.import_partitioning(p))
      ++r.partitionings;
    else
      ++r.partitionings_present;
  }
  return r;
}

}  // namespace einsumdb
