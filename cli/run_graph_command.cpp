#include "einsumdb/cli/run_graph_command.hpp"

#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <optional>
#include <sstream>

#include "einsumdb/canon/canonicalize.hpp"
#include "einsumdb/cli/commands.hpp"
#include "einsumdb/cli/network_model.hpp"
#include "einsumdb/core/error.hpp"
#include "einsumdb/distributed/graph_job.hpp"
#include "einsumdb/engine/choose.hpp"
#include "einsumdb/executor/npy.hpp"
#include "einsumdb/planner/plan_file.hpp"
#include "einsumdb/planner/plan_store.hpp"

namespace einsumdb::cli {
namespace {

using ojson = nlohmann::ordered_json;

std::string read_text(const std::string& path, const char* what) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw SpecError(std::string("cannot read ") + what + " '" + path + "'");
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

nlohmann::json parse_json(const std::string& text, const std::string& where) {
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    throw SpecError(where + ": not valid JSON: " + e.what());
  }
}

std::string vector_text(const PartitionVector& d) {
  std::string s;
  for (const auto& [l, n] : d)
    s += (s.empty() ? "" : " ") + std::string(1, l) + "=" + std::to_string(n);
  return s;
}

std::string bytes_text(double b) {
  char buf[32];
  if (b >= 1e9)
    std::snprintf(buf, sizeof buf, "%.2f GB", b / 1e9);
  else if (b >= 1e6)
    std::snprintf(buf, sizeof buf, "%.2f MB", b / 1e6);
  else if (b >= 1e3)
    std::snprintf(buf, sizeof buf, "%.1f kB", b / 1e3);
  else
    std::snprintf(buf, sizeof buf, "%.0f B", b);
  return buf;
}

// The kernel column: the transform every rank ran, or each rank's when they differ.
std::string kernel_text(const StepReport& s) {
  if (s.kernels_agree()) return s.kernel.transform.strategy + " (" + s.kernel.source + ")";
  std::string text = "differs by rank:";
  for (std::size_t r = 0; r < s.kernels.size(); ++r)
    text += " " + std::to_string(r) + ": " + s.kernels[r].transform.strategy + " (" +
            s.kernels[r].source + ")" + (r + 1 < s.kernels.size() ? ";" : "");
  return text;
}

ChooseKernel kernel_chooser(const DbArgs& db) {
  auto store = std::make_shared<std::optional<Store>>();
  try {
    *store = open_for_reading(db);
  } catch (const Error&) {
    store->reset();  // an unreadable database only costs the kernels their tuning
  }
  const std::string machine = this_machine().fingerprint();
  return [store, machine](const BatchedEinsum& e) {
    const Choice c = choose_transform(*store ? &**store : nullptr, e, machine);
    return KernelChoice{c.candidate, c.source};
  };
}

// Everything a rank needs before the job's first message; built by every rank alike, and any
// rank's refusal is agreed on before anything runs.
struct PreparedJob {
  std::optional<Network> network;  // rank 0, with --network
  EinGraph graph;
  PlanFile pf;
  std::string plan_source;
  DistributedOptions options;
};

PreparedJob prepare_job(const GraphRunArgs& args, const MpiSession& mpi) {
  PreparedJob job;
  auto graph = read_graph_argument(args.spec);
  if (!graph) {
    std::error_code ec;
    const std::string path =
        args.spec.size() > 1 && args.spec[0] == '@' ? args.spec.substr(1) : args.spec;
    if (args.spec.find_first_not_of(" \t\r\n") != std::string::npos &&
        args.spec[args.spec.find_first_not_of(" \t\r\n")] != '{' &&
        !std::filesystem::exists(path, ec))
      throw SpecError("no graph file '" + path + "' here (every rank reads the graph)");
    throw SpecError("'" + args.spec +
                    "' is not a graph of einsums (JSON with \"inputs\" and \"nodes\", or a file "
                    "of it); under mpirun, einsumdb run takes a graph");
  }
  job.graph = std::move(*graph);
  const EinGraph& g = job.graph;
  PlanFile& pf = job.pf;
  if (!args.plan.empty()) {
    const auto j = parse_json(read_text(args.plan, "the plan file"), args.plan);
    try {
      pf = read_plan(j, g, mpi.size());
    } catch (const SpecError& e) {
      throw SpecError(args.plan + ": " + e.what());
    }
    job.plan_source = args.plan;
  } else {
    const auto method = parse_plan_method(args.method);
    if (!method)
      throw SpecError("--method must be eindecomp, sqrt or data, got '" + args.method + "'");
    PlanOptions options;
    options.procs = mpi.size();
    options.method = *method;
    try {
      pf.plan = make_plan(expand(g), options);
    } catch (const SpecError& e) {
      throw SpecError(std::string(e.what()) + " (this job has " + std::to_string(mpi.size()) +
                      " ranks; run it with mpirun -np 1, 2, 4, ...)");
    }
    pf.placement = place(pf.plan);
    job.plan_source = "planned here";
  }
  if (args.repeat < 1) throw SpecError("--repeat must be at least 1");
  if (args.threads < 0 || args.threads > 256) throw SpecError("--threads must be from 1 to 256");
  if (!(args.timeout > 0)) throw SpecError("--timeout must be positive");
  if (args.tolerance && !args.verify) throw SpecError("--tolerance is --verify's; give both");
  if (args.tolerance && !(*args.tolerance >= 0 && std::isfinite(*args.tolerance)))
    throw SpecError("--tolerance must be a relative error of 0 or more");
  DistributedOptions& options = job.options;
  options.repeat = args.repeat;
  options.timeout_s = args.timeout;
  options.overlap = args.overlap;
  options.gather = args.verify || !args.output.empty();
  options.gather_inputs = args.verify;
  options.threads = args.threads > 0 ? args.threads : 1;
  options.inputs.seed = args.seed;
  if (args.read_inputs == "root")
    options.inputs.reader = InputReader::root;
  else if (args.read_inputs != "owners")
    throw SpecError("--read-inputs must be owners or root, got '" + args.read_inputs + "'");
  if (args.inputs.size() > 1)
    throw SpecError("--inputs: a graph reads its inputs from one directory (DIR/NAME.npy)");
  for (const auto& name : args.generate) {
    if (!g.inputs.count(name)) {
      std::string known;
      for (const auto& [n, t] : g.inputs) known += (known.empty() ? "" : ", ") + n;
      throw SpecError("--generate: the graph has no input '" + name + "' (its inputs: " + known +
                      ")");
    }
    options.inputs.generate.insert(name);
  }
  if (!args.generate.empty() && args.inputs.empty())
    throw SpecError(
        "--generate names inputs to generate beside --inputs DIR; without --inputs "
        "every input is generated");
  if (!args.inputs.empty()) {
    options.inputs.dir = args.inputs[0];
    // The directory is needed on a rank that reads it: every rank when each reads its blocks,
    // rank 0 alone when it reads them for all.
    const bool reads = options.inputs.reader == InputReader::owners || mpi.rank() == 0;
    if (reads && !std::filesystem::is_directory(options.inputs.dir))
      throw SpecError("--inputs: '" + options.inputs.dir +
                      "' is not a directory here (a graph reads DIR/NAME.npy for each input)");
  }
  if (mpi.rank() == 0) options.choose = kernel_chooser(args.db);
  if (mpi.rank() == 0 && !args.network.empty())
    job.network = network_argument(args.network, args.ranks_per_host, args.db);
  options.trace = !args.trace.empty();
  return job;
}

// Prints what the ranks refused (rank 0 does, once: a message every rank gave is printed without
// the ranks) and returns the job's exit code; aborts the job when some rank never answered.
int report_refusals(const JobRefused& e, const MpiSession& mpi) {
  if (mpi.rank() == 0) {
    std::map<std::string, std::vector<const Refusal*>> by_message;
    std::vector<std::string> order;
    for (const auto& r : e.refusals()) {
      if (!by_message.count(r.message)) order.push_back(r.message);
      by_message[r.message].push_back(&r);
    }
    for (const auto& message : order) {
      const auto& rs = by_message[message];
      std::string who;
      if (static_cast<int>(rs.size()) < mpi.size()) {
        std::string hosts;
        for (const Refusal* r : rs) {
          who += (who.empty() ? "" : ", ") + std::to_string(r->rank);
          if (!r->host.empty() && hosts.find(r->host) == std::string::npos)
            hosts += (hosts.empty() ? "" : ", ") + r->host;
        }
        who = (rs.size() == 1 ? "rank " : "ranks ") + who + " of " + std::to_string(mpi.size()) +
              (hosts.empty() ? "" : " on " + hosts) + ": ";
      }
      std::cerr << "einsumdb: error: " << who << message << "\n";
    }
    std::cerr << std::flush;
  }
  if (!e.everyone_knows()) MPI_Abort(MPI_COMM_WORLD, e.code());
  return e.code();
}

int run_on_ranks(const GraphRunArgs& args, const MpiSession& mpi) {
  const bool root = mpi.rank() == 0;
  // Everything that can be refused is checked here, by every rank, and agreed on before any
  // other message: a rank whose host lacks a file is named, and every rank leaves.
  std::optional<PreparedJob> job;
  std::optional<Refusal> refusal;
  try {
    job = prepare_job(args, mpi);
  } catch (const std::exception& e) {
    refusal = refusal_of(MPI_COMM_WORLD, e);
  }
  try {
    agree(Waiter(MPI_COMM_WORLD, args.timeout > 0 ? args.timeout : 300), refusal);
  } catch (const JobRefused& e) {
    return report_refusals(e, mpi);
  }
  const EinGraph& graph = job->graph;
  const PlanFile& pf = job->pf;
  const std::string& plan_source = job->plan_source;
  const DistributedOptions& options = job->options;

  // From here on a failure on one rank must end every rank.
  DistributedReport report;
  try {
    report = run_distributed(pf.plan, pf.placement, MPI_COMM_WORLD, options);
  } catch (const JobRefused& e) {
    return report_refusals(e, mpi);
  } catch (const std::exception& e) {
    std::cerr << "einsumdb: error: rank " << mpi.rank() << " of " << mpi.size() << " on "
              << host_name() << ": " << e.what() << "\n"
              << std::flush;
    MPI_Abort(MPI_COMM_WORLD, kExitRuntime);
  }
  if (!root) return kExitOk;

  const Plan& plan = pf.plan;
  const double median = summarize(report.seconds).median_s;
  double predicted = 0, measured = 0;
  for (const auto& s : report.steps)
    predicted += s.predicted_bytes, measured += static_cast<double>(s.sent);

  // The time model's prediction for each step, beside what was measured.
  std::vector<StepTime> times;
  if (job->network) {
    KernelTimes kernels(args.db);
    times = predict_times(plan, pf.placement, *job->network,
                          [&](const BatchedEinsum& e) { return kernels(e); });
  }

  // Verification against one process.
  ojson verify;
  bool verified = true;
  if (args.verify) {
    GraphVerification v = verify_against_one_process(graph, report, options);
    if (args.tolerance) {
      v.tolerance = *args.tolerance;
      v.ok = v.max_rel_err <= v.tolerance;
    }
    verified = v.ok;
    verify = {{"max_rel_err", v.max_rel_err},
              {"tolerance", v.tolerance},
              {"ok", v.ok},
              {"outputs", v.per_output}};
  }
  if (!args.trace.empty()) {
    // Written whole, then renamed: a reader never sees half a trace.
    const std::string partial = args.trace + ".partial";
    {
      std::ofstream f(partial);
      f << report.trace.dump() << '\n';
      if (!f) throw Error("cannot write the trace to '" + args.trace + "'");
    }
    std::filesystem::rename(partial, args.trace);
  }
  std::vector<std::string> written;
  if (!args.output.empty()) {
    std::filesystem::create_directories(args.output);
    for (const auto& name : graph.outputs) {
      const auto path = (std::filesystem::path(args.output) / (name + ".npy")).string();
      write_npy(path, report.outputs.at(name));
      written.push_back(path);
    }
  }

  // The measurements, beside the predictions, in the partitionings table.
  ojson recorded;
  if (!args.no_record && verified) {
    Store store = open_for_writing(args.db);
    RunInfo run;
    run.label = "distributed run P=" + std::to_string(plan.procs);
    run.command = args.command_line;
    const std::size_t rows =
        record_measured_run(store, plan, report, report.overlap, this_machine(), run);
    recorded = {{"partitionings", rows}, {"db", store.path()}};
  }

  if (want_json(args.out)) {
    ojson steps = ojson::array();
    for (std::size_t v = 0; v < report.steps.size(); ++v) {
      const auto& s = report.steps[v];
      const auto& ps = plan.graph.steps[v];
      ojson d = ojson::object();
      for (const auto& [l, n] : plan.choice[v].d) d[std::string(1, l)] = n;
      ojson ranks = ojson::array();
      for (const auto& r : s.ranks)
        ranks.push_back(
            {{"seconds", r.seconds}, {"sent_bytes", r.sent}, {"received_bytes", r.received}});
      ojson rank_kernels = ojson::array();
      for (const auto& k : s.kernels)
        rank_kernels.push_back({{"strategy", k.transform.strategy},
                                {"params", k.transform.params},
                                {"source", k.source}});
      steps.push_back({{"name", ps.name},
                       {"einsum", ps.einsum_string()},
                       {"inputs", ps.inputs},
                       {"partition", d},
                       {"seconds", s.seconds},
                       {"sent_bytes", s.sent},
                       {"predicted_bytes", s.predicted_bytes},
                       {"kernel",
                        {{"strategy", s.kernel.transform.strategy},
                         {"params", s.kernel.transform.params},
                         {"source", s.kernel.source}}},
                       {"predicted_time", times.empty() ? ojson() : to_json(times[v])},
                       {"kernels_agree", s.kernels_agree()},
                       {"rank_kernels", rank_kernels},
                       {"ranks", ranks}});
    }
    ojson out = {{"procs", plan.procs},
                 {"method", to_string(plan.method)},
                 {"plan", plan_source},
                 {"placement", pf.placement_given ? "from the plan file" : "computed"},
                 {"overlap", report.overlap},
                 {"ranks_share_cores", report.ranks_share_cores},
                 {"repeat", args.repeat},
                 {"median_s", median},
                 {"seconds", report.seconds},
                 {"setup_s", report.setup_seconds},
                 {"predicted_bytes", predicted},
                 {"sent_bytes", measured},
                 {"steps", steps},
                 {"generated_inputs", report.generated},
                 {"outputs", written}};
    if (job->network) {
      out["network"] = to_json(*job->network);
      out["predicted_seconds"] = total_seconds(times);
    }
    if (args.verify) out["verify"] = verify;
    if (!recorded.is_null()) out["recorded"] = recorded;
    print_json(out);
  } else {
    std::cout << "graph: " << plan.graph.steps.size() << " steps on " << plan.procs
              << " ranks, plan " << plan_source << " (" << to_string(plan.method) << ")"
              << (report.overlap ? "" : ", no overlap")
              << (report.ranks_share_cores ? ", ranks share cores (waiting ranks sleep)" : "")
              << "\n";
    std::vector<std::vector<std::string>> rows;
    for (std::size_t v = 0; v < report.steps.size(); ++v) {
      const auto& s = report.steps[v];
      rows.push_back({plan.graph.steps[v].name, plan.graph.steps[v].einsum_string(),
                      vector_text(plan.choice[v].d), format_seconds(s.seconds),
                      bytes_text(static_cast<double>(s.sent)), bytes_text(s.predicted_bytes),
                      kernel_text(s)});
      if (!times.empty())
        rows.back().insert(rows.back().begin() + 4, format_seconds(times[v].total()));
    }
    std::vector<std::string> header{"step", "einsum",    "partition", "time",
                                    "sent", "predicted", "kernel"};
    if (!times.empty()) header.insert(header.begin() + 4, "predicted time");
    print_table(header, rows);
    if (!times.empty())
      std::cout << "predicted on the network: " << format_seconds(total_seconds(times)) << " ("
                << job->network->source << ")\n";
    std::cout << "total: median " << format_seconds(median) << " over " << args.repeat
              << " run(s); sent " << bytes_text(measured) << " of " << bytes_text(predicted)
              << " predicted\n";
    if (!report.generated.empty()) {
      std::cout << "inputs generated from seed " << args.seed << ":";
      for (const auto& g : report.generated) std::cout << " " << g;
      std::cout << "\n";
    }
    for (const auto& w : written) std::cout << "wrote " << w << "\n";
    if (args.verify)
      std::cout << "verify: max relative error " << verify["max_rel_err"].get<double>()
                << " against one process: " << (verified ? "ok" : "WRONG") << "\n";
    if (!recorded.is_null())
      std::cout << "recorded " << recorded["partitionings"] << " partitionings in "
                << recorded["db"].get<std::string>() << "\n";
  }
  if (!verified) {
    std::cerr << "einsumdb: error: the distributed result differs from one process (relative "
                 "error "
              << verify["max_rel_err"].get<double>() << ")\n";
    return kExitRuntime;
  }
  return kExitOk;
}

}  // namespace

std::optional<EinGraph> read_graph_argument(const std::string& spec) {
  const auto first = spec.find_first_not_of(" \t\r\n");
  if (first == std::string::npos) return std::nullopt;
  std::string text, where;
  if (spec[first] == '{') {
    text = spec;
  } else {
    const std::string path = spec[0] == '@' ? spec.substr(1) : spec;
    std::error_code ec;
    if (!std::filesystem::is_regular_file(path, ec)) return std::nullopt;
    text = read_text(path, "the graph file");
    where = path + ": ";
  }
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception&) {
    return std::nullopt;  // the batched-einsum reader reports what is wrong
  }
  if (!j.is_object() || !j.contains("nodes")) return std::nullopt;
  try {
    return parse_eingraph(j);
  } catch (const SpecError& e) {
    throw SpecError(where + e.what());
  }
}

bool launched_as_one_of_several_ranks() {
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE"}) {
    const char* v = std::getenv(name);
    if (v && std::atoi(v) > 1) return true;
  }
  return false;
}

int run_graph(const GraphRunArgs& args) {
  MpiSession mpi;
  try {
    return run_on_ranks(args, mpi);
  } catch (const std::exception& e) {
    // After the run, on rank 0 (writing the outputs, the store): the other ranks are done.
    std::cerr << "einsumdb: error: rank " << mpi.rank() << " on " << host_name() << ": " << e.what()
              << "\n"
              << std::flush;
    MPI_Abort(MPI_COMM_WORLD, kExitRuntime);
    return kExitRuntime;
  }
}

}  // namespace einsumdb::cli
