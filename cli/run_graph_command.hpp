// einsumdb run GRAPH: a graph of einsums run on the ranks of an MPI job (mpirun -np P einsumdb
// run GRAPH --plan PLAN.json), or on one process without mpirun.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "einsumdb/cli/common.hpp"
#include "einsumdb/distributed/mpi_executor.hpp"
#include "einsumdb/planner/eingraph.hpp"

namespace einsumdb::cli {

struct GraphRunArgs {
  std::string spec;  // the graph: inline JSON, a file, or @file (read by every rank)
  DbArgs db;
  OutputArgs out;
  std::string plan;  // PLAN.json; empty: plan for the job's ranks first
  std::string method = "eindecomp";
  std::vector<std::string> inputs;     // one directory of NAME.npy
  std::vector<std::string> generate;   // inputs generated from the seed beside --inputs
  std::string read_inputs = "owners";  // owners: each rank reads its blocks; root: rank 0 ships
  std::string output;                  // directory for NAME.npy of each graph output
  int repeat = 1;
  int threads = 0;
  std::uint64_t seed = 1;
  bool verify = false;
  std::optional<double> tolerance;  // --verify's bound on the relative error, replacing the default
  double timeout = 300;
  Overlap overlap = Overlap::automatic;  // --overlap / --no-overlap
  bool no_record = false;
  std::string trace;    // --trace FILE: every rank's timeline as Chrome trace-event JSON
  std::string network;  // --network: predict each step's time on it (rank 0), beside the measured
  std::int64_t ranks_per_host = 0;
  std::string command_line;
};

// The graph SPEC names, when it is one: inline JSON with "nodes", or a file (or @file) holding
// such JSON. nullopt for anything else (a batched einsum spec). Throws SpecError when the text
// is a graph with an error.
std::optional<EinGraph> read_graph_argument(const std::string& spec);

// Whether this process was started by mpirun as one of several ranks.
bool launched_as_one_of_several_ranks();

// Runs the graph args.spec under MPI (initializing and finalizing it): every rank reads the graph,
// the plan and its inputs on its own host, and any rank's refusal is reported, naming the rank
// and host, before anything runs. Returns the exit code.
int run_graph(const GraphRunArgs& args);

}  // namespace einsumdb::cli
