// einsumdb run: execute a workload with the best known transform (or a chosen one).
#include <algorithm>
#include <filesystem>
#include <iostream>

#include "einsumdb/canon/canonicalize.hpp"
#include "einsumdb/canon/metrics.hpp"
#include "einsumdb/cli/commands.hpp"
#include "einsumdb/cli/common.hpp"
#include "einsumdb/cli/run_graph_command.hpp"
#include "einsumdb/cli/spec_flags.hpp"
#include "einsumdb/core/error.hpp"
#include "einsumdb/core/stats.hpp"
#include "einsumdb/engine/choose.hpp"
#include "einsumdb/executor/isa.hpp"
#include "einsumdb/executor/npy.hpp"
#include "einsumdb/tuner/sampling.hpp"
#include "einsumdb/tuner/tuner.hpp"

namespace einsumdb::cli {
namespace {

using ojson = nlohmann::ordered_json;

struct RunArgs {
  SpecArgs spec;
  DbArgs db;
  OutputArgs out;
  std::string transform = "best";
  std::vector<std::string> param;
  std::string params;
  std::vector<std::string> inputs;
  std::string output;
  int repeat = 1;
  double min_time = 0;  // seconds of timed runs, beside --repeat's count
  int threads = 0;
  std::uint64_t seed = 1;
  bool verify = false;
  std::optional<double> tolerance;
  // A graph of einsums (SPEC is a graph): run over the MPI job's ranks.
  std::string plan;
  std::string method = "eindecomp";
  double timeout = 300;
  bool overlap = false;
  bool no_overlap = false;
  std::string trace;
  std::string network;
  std::int64_t ranks_per_host = 0;
  bool no_record = false;
  std::vector<std::string> generate;
  std::string read_inputs = "owners";
  std::vector<std::string> bind;
};

int run_graph_command(const RunArgs& args) {
  if (!args.spec.flags.empty())
    throw SpecError(
        "--batch, --shape, --dtype, --join and --agg describe one einsum; a graph "
        "declares its inputs and nodes in its JSON");
  if (args.transform != "best" || !args.param.empty() || !args.params.empty())
    throw SpecError(
        "--transform, --param and --params choose one einsum's transform; a graph's "
        "kernels use the best known transform of each block's einsum");
  if (args.min_time > 0)
    throw SpecError("--min-time times one einsum; a graph's job runs --repeat times");
  GraphRunArgs g;
  g.spec = args.spec.spec;
  g.db = args.db;
  g.out = args.out;
  g.plan = args.plan;
  g.method = args.method;
  g.inputs = args.inputs;
  g.generate = args.generate;
  g.read_inputs = args.read_inputs;
  g.output = args.output;
  g.repeat = args.repeat;
  g.threads = args.threads;
  g.seed = args.seed;
  g.verify = args.verify;
  g.tolerance = args.tolerance;
  g.timeout = args.timeout;
  g.overlap = args.overlap ? Overlap::on : args.no_overlap ? Overlap::off : Overlap::automatic;
  g.no_record = args.no_record;
  g.trace = args.trace;
  g.network = args.network;
  g.ranks_per_host = args.ranks_per_host;
  g.command_line =
      "einsumdb run " + args.spec.spec + (args.plan.empty() ? "" : " --plan " + args.plan);
  return run_graph(g);
}

// The arrays the spec reads (a functional operand reads its expression's array).
std::vector<std::string> data_arrays(const BatchedEinsum& e, const Functions& functions) {
  std::vector<std::string> names;
  for (const auto& row : e.batch)
    for (const auto& name : row) {
      const auto f = functions.find(name);
      const std::string& array = f == functions.end() ? name : f->second.array();
      if (std::find(names.begin(), names.end(), array) == names.end()) names.push_back(array);
    }
  return names;
}

// Reads the given arrays, binds the spec's remaining symbols to the lengths they have, and
// generates the arrays not given.
Arrays load_inputs(const RunArgs& args, BatchedEinsum& e, const Functions& functions,
                   std::vector<std::string>& generated) {
  const auto names = data_arrays(e, functions);
  Arrays arrays;
  for (const auto& item : args.inputs) {
    const auto eq = item.find('=');
    std::string name, path = item;
    if (eq != std::string::npos) {
      name = item.substr(0, eq), path = item.substr(eq + 1);
    } else {
      name = std::filesystem::path(item).stem().string();
    }
    if (std::find(names.begin(), names.end(), name) == names.end()) {
      std::string known;
      for (const auto& n : names) known += (known.empty() ? "" : ", ") + n;
      throw SpecError("--inputs '" + item + "': the spec has no array '" + name +
                      "' (its arrays: " + known + "); write NAME=FILE.npy");
    }
    if (arrays.count(name)) throw SpecError("--inputs: array '" + name + "' is given twice");
    Tensor t = read_npy(path);
    // A size-1 axis that broadcasting dropped from the array (drop_broadcast_axes): the file
    // holds it, the einsum does not. The same elements, without it.
    if (const auto it = e.arrays.find(name);
        it != e.arrays.end() && it->second.shape.size() < t.rank()) {
      std::vector<std::int64_t> kept;
      for (auto l : t.shape())
        if (l != 1) kept.push_back(l);
      std::vector<std::int64_t> want;
      bool concrete = true;
      for (const auto& l : it->second.shape) {
        concrete = concrete && !l.symbolic();
        want.push_back(l.value);
      }
      std::vector<std::int64_t> want_kept;
      for (auto l : want)
        if (l != 1) want_kept.push_back(l);
      if (concrete && kept == want_kept) t = Tensor::slice(t, 0, want);
    }
    arrays.emplace(name, std::move(t));
  }
  // Symbols take their lengths from the data (a shape that disagrees is refused by Bound).
  Binding from_data;
  std::map<std::string, std::string> bound_by;  // symbol -> the array that bound it
  for (const auto& [name, tensor] : arrays) {
    const auto it = e.arrays.find(name);
    if (it == e.arrays.end()) continue;
    const auto& shape = it->second.shape;
    for (std::size_t a = 0; a < shape.size() && a < tensor.shape().size(); ++a) {
      if (!shape[a].symbolic()) continue;
      const std::int64_t n = tensor.shape()[a];
      const auto [b, added] = from_data.emplace(shape[a].symbol, n);
      if (!added && b->second != n)
        throw SpecError("--inputs: the symbol '" + shape[a].symbol + "' is " +
                        std::to_string(b->second) + " long in array '" + bound_by[shape[a].symbol] +
                        "' but " + std::to_string(n) + " in array '" + name + "'");
      bound_by.emplace(shape[a].symbol, name);
    }
  }
  if (!from_data.empty()) e = bind_symbols(e, from_data);
  // The rest from the seed, with the spec's shape (the idealized einsum knows every shape; a
  // function's array has its function's shape).
  for (const auto& name : names) {
    if (arrays.count(name)) continue;
    std::string operand = name;
    for (const auto& [f, expr] : functions)
      if (expr.array() == name && !e.arrays.count(name)) operand = f;
    BatchedEinsum one;
    one.arrays.emplace(name, e.arrays.at(operand));
    Arrays a = random_arrays(one, args.seed);
    arrays.emplace(name, std::move(a.at(name)));
    generated.push_back(name);
  }
  return arrays;
}

int run_run(RunArgs& args) {
  // Under mpirun every rank reads the graph itself, so that a rank whose host lacks the file is
  // named rather than left behind.
  if (launched_as_one_of_several_ranks() || read_graph_argument(args.spec.spec))
    return run_graph_command(args);
  if (!args.generate.empty() || args.read_inputs != "owners")
    throw SpecError(std::string(args.generate.empty() ? "--read-inputs" : "--generate") +
                    " is for a graph of einsums; '" + args.spec.spec + "' is not a graph");
  if (!args.plan.empty() || !args.trace.empty() || !args.network.empty() || args.tolerance)
    throw SpecError(std::string(!args.plan.empty()      ? "--plan"
                                : !args.trace.empty()   ? "--trace"
                                : !args.network.empty() ? "--network"
                                                        : "--tolerance") +
                    " is for a graph of einsums; '" + args.spec.spec +
                    "' is not a graph (JSON with \"inputs\" and \"nodes\", or a file of it)");
  Functions functions;
  BatchedEinsum e = read_spec(args.spec, &functions);
  if (!args.bind.empty()) e = bind_symbols(e, parse_binding(args.bind));
  if (args.repeat < 1) throw SpecError("--repeat must be at least 1");
  if (!(args.min_time >= 0 && args.min_time <= 3600))
    throw SpecError("--min-time must be from 0 to 3600 seconds");
  if (args.threads < 0 || args.threads > 256) throw SpecError("--threads must be from 1 to 256");
  std::vector<std::string> generated;
  const Arrays arrays = load_inputs(args, e, functions, generated);
  const Bound bound(e, arrays, functions);

  // The transform.
  Candidate chosen;
  std::string source;
  bool stored = false;
  if (args.transform == "best") {
    if (!args.param.empty() || !args.params.empty())
      throw SpecError("--param and --params go with --transform NAME, not with best");
    auto store = open_for_reading(args.db);
    const Choice choice =
        choose_transform(store ? &*store : nullptr, e, this_machine().fingerprint());
    chosen = choice.candidate;
    source = choice.source;
    stored = choice.stored;
    if (choice.stored && choice.distance > 0)
      std::cerr << "einsumdb: note: this size was never measured; using the best transform of "
                   "the nearest measured size (distance "
                << format_number(choice.distance, 3) << ")\n";
    if (!choice.stored)
      std::cerr << "einsumdb: note: no verified transform is known for this workload on this "
                   "machine; running "
                << chosen.strategy << " with default parameters (measure with: einsumdb tune)\n";
  } else {
    chosen.strategy = args.transform;
    source = "chosen";
    if (!args.params.empty()) {
      try {
        chosen.params = nlohmann::json::parse(args.params);
      } catch (const nlohmann::json::exception& err) {
        throw SpecError(std::string("--params is not valid JSON: ") + err.what());
      }
      if (!chosen.params.is_object()) throw SpecError("--params must be a JSON object");
    }
    for (const auto& p : args.param) apply_param(chosen.params, p);
  }
  if (args.threads > 0) chosen.params["threads"] = args.threads;

  Results results;
  std::vector<double> seconds;
  // At least --repeat runs, and more until they add up to --min-time.
  bool first = true;
  sample_calls(
      seconds, {args.repeat, args.min_time},
      [&] {
        results.clear();  // free the last run's result first: every run starts from the same memory
        std::string refused;
        results = execute_or_default(bound, chosen, first && stored, &refused);
        first = false;
        if (!refused.empty()) {
          std::cerr << "einsumdb: note: the stored transform does not run here (" << refused
                    << "); running the default\n";
          source = "default (the stored transform was refused)";
        }
      },
      [] { return false; });
  const double median_s = median(seconds);
  const double min_s = *std::min_element(seconds.begin(), seconds.end());
  const double flops = work_flops(e, bound.lengths());
  std::optional<double> err;
  bool verified = true;
  if (args.verify) {
    std::vector<double> scale;
    const Results want = run_reference(bound, &scale);
    err = verification_error(results, want, scale);
    verified = *err <= tolerance(result_dtype(e, 0), reduction_terms(e, bound.lengths()));
  }
  std::vector<std::string> written;
  if (!args.output.empty()) {
    if (results.size() == 1) {
      write_npy(args.output, results[0]);
      written.push_back(args.output);
    } else {
      const std::filesystem::path p(args.output);
      for (std::size_t r = 0; r < results.size(); ++r) {
        const auto path =
            (p.parent_path() / (p.stem().string() + "." + std::to_string(r) + ".npy")).string();
        write_npy(path, results[r]);
        written.push_back(path);
      }
    }
  }
  if (want_json(args.out)) {
    ojson out = {{"transform", {{"strategy", chosen.strategy}, {"params", chosen.params}}},
                 {"source", source},
                 {"kernels", isa_name(kernel_isa())},
                 {"repeat", seconds.size()},
                 {"median_s", median_s},
                 {"min_s", min_s},
                 {"gflops", flops / median_s * 1e-9},
                 {"generated_inputs", generated},
                 {"outputs", written}};
    if (err) {
      out["max_rel_err"] = *err;
      out["verified"] = verified;
    }
    print_json(out);
  } else {
    std::cout << chosen.strategy << " " << describe_params(chosen.params) << " (" << source
              << "): median " << format_seconds(median_s) << " over " << seconds.size()
              << " run(s), " << format_number(flops / median_s * 1e-9) << " GFLOP/s"
              << (is_complex(result_dtype(e, 0)) ? " (a complex multiply-add counts 8 FLOPs)" : "")
              << "\n";
    if (!generated.empty()) {
      std::cout << "inputs generated from seed " << args.seed << ":";
      for (const auto& g : generated) std::cout << " " << g;
      std::cout << "\n";
    }
    for (const auto& w : written) std::cout << "wrote " << w << "\n";
    if (err)
      std::cout << "verify: max relative error " << *err
                << " against the reference: " << (verified ? "ok" : "WRONG") << "\n";
  }
  if (!verified) {
    std::cerr << "einsumdb: error: the result differs from the reference (relative error " << *err
              << ")\n";
    return kExitRuntime;
  }
  return kExitOk;
}

}  // namespace

Command add_run_command(CLI::App& app) {
  auto args = std::make_shared<RunArgs>();
  auto* cmd = app.add_subcommand(
      "run",
      "Execute a workload with the best transform known for it on this machine (or a chosen "
      "one), and print the time and GFLOP/s. Given a graph of einsums (JSON or a file), run "
      "it on the ranks of an MPI job: mpirun -np P einsumdb run GRAPH --plan PLAN.json");
  cmd->footer(
      "Graphs:\n"
      "  mpirun -np 4 einsumdb run graph.json --plan plan.json --verify\n"
      "  mpirun -np 2 einsumdb run graph.json --inputs data/ --output out/ --repeat 5 --json\n"
      "  A graph without --plan is planned first (EinDecomp for the job's ranks, or --method).\n"
      "  Every rank reads the graph (and --plan) on its own host. Without --inputs every input\n"
      "  is generated block by block from --seed; with --inputs DIR each is DIR/NAME.npy, read\n"
      "  on the host of each rank that owns a block of it (or only on rank 0's host with\n"
      "  --read-inputs root), and a missing file is an error naming the rank and host unless\n"
      "  --generate NAME asks for that input to be generated. --output writes DIR/NAME.npy for\n"
      "  each graph output on rank 0's host. Each step's measured time and bytes are recorded\n"
      "  beside the plan's prediction (einsumdb plan --cost measured), unless --verify fails.");
  add_spec_options(cmd, args->spec);
  add_db_option(cmd, args->db);
  add_output_options(cmd, args->out);
  cmd->add_option("--transform", args->transform,
                  "best (default: the database's fastest verified transform, a default when "
                  "none is known) or a strategy: " +
                      strategy_names());
  cmd->add_option(
         "--param", args->param,
         "KEY=VALUE parameter of --transform NAME, in your index names (order=ikj, tile=e:256, "
         "threads=2); repeatable")
      ->take_all();
  cmd->add_option("--params", args->params, "All parameters of --transform NAME as JSON");
  cmd->add_option("--inputs", args->inputs,
                  "NAME=FILE.npy (or FILE.npy named after its array) for each array; arrays "
                  "not given are generated from --seed. A graph: one DIR holding NAME.npy")
      ->take_all();
  cmd->add_option("--generate", args->generate,
                  "Graph with --inputs: generate these inputs from --seed instead of reading "
                  "DIR/NAME.npy")
      ->take_all();
  cmd->add_option("--read-inputs", args->read_inputs,
                  "Graph with --inputs: owners (default: each rank reads its blocks on its own "
                  "host) or root (rank 0 reads DIR and sends every rank its blocks)");
  cmd->add_option("--output", args->output,
                  "Write the result to this .npy file (rows of a batch to FILE.0.npy, ...). A "
                  "graph: a DIR that receives NAME.npy for each graph output");
  cmd->add_option("--repeat", args->repeat, "Run this many times and report the median (1)");
  cmd->add_option("--min-time", args->min_time,
                  "Keep running past --repeat until the runs take this many seconds in all "
                  "(one einsum; default 0)");
  add_bind_option(cmd, args->bind,
                  "a symbol not bound here takes its length from the --inputs arrays");
  cmd->add_option("--threads", args->threads, "Threads for the transform (overrides its own)");
  cmd->add_option("--seed", args->seed, "Seed of generated inputs (default 1)");
  cmd->add_flag("--verify", args->verify,
                "Compare the result with the reference loop nest (a graph: with one process) "
                "and fail when it differs");
  cmd->add_option("--tolerance", args->tolerance,
                  "Graph, with --verify: the largest relative error against one process that "
                  "passes (default: the dtype's rounding bound for the graph's sums); a run that "
                  "does not pass exits 1 and records nothing");
  cmd->add_option("--plan", args->plan,
                  "Graph: the plan file to run (einsumdb plan GRAPH --procs P --output FILE)");
  cmd->add_option("--method", args->method,
                  "Graph without --plan: eindecomp (default), sqrt or data");
  cmd->add_option("--timeout", args->timeout,
                  "Graph: seconds any rank waits for another before it ends the job (300)");
  auto* overlap = cmd->add_flag(
      "--overlap", args->overlap,
      "Graph: send each block as soon as it exists, while later kernels run (the default "
      "unless the node's ranks share cores)");
  cmd->add_flag("--no-overlap", args->no_overlap,
                "Graph: exchange each step's data in a phase of its own (the default when the "
                "node's ranks share cores, where it is faster)")
      ->excludes(overlap);
  cmd->add_flag("--no-record", args->no_record,
                "Graph: do not record the measured partitionings in the database");
  cmd->add_option("--trace", args->trace,
                  "Graph: write every rank's timeline (send, wait, kernel, reduce per step and "
                  "run) to FILE as Chrome trace-event JSON; open it in Perfetto or "
                  "chrome://tracing");
  cmd->add_option(
      "--network", args->network,
      "Graph: also predict each step's time on this network (a file written by "
      "`einsumdb bench network --output`, `stored`, or bandwidth=BYTES_PER_S,latency=SECONDS"
      "[,...]); the prediction assumes --no-overlap");
  cmd->add_option("--ranks-per-host", args->ranks_per_host,
                  "Graph, with --network: ranks on each host, replacing the network's")
      ->check(CLI::Range(std::int64_t{1}, std::int64_t{1} << 20));
  return [args] { return run_run(*args); };
}

}  // namespace einsumdb::cli
