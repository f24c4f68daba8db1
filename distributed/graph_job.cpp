#include "einsumdb/distributed/graph_job.hpp"

#include <mpi.h>

#include <algorithm>

#include "einsumdb/canon/metrics.hpp"
#include "einsumdb/planner/plan_store.hpp"

namespace einsumdb {

MpiSession::MpiSession() {
  int provided = 0;
  MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
  MPI_Comm_size(MPI_COMM_WORLD, &size_);
}

MpiSession::~MpiSession() {
  MPI_Finalize();
}

double graph_reduction_terms(const EinGraph& g) {
  double terms = 0;
  for (const auto& n : g.nodes) terms += reduction_terms(node_einsum(g, n), g.bounds(n));
  return terms;
}

GraphVerification verify_against_one_process(const EinGraph& graph, const DistributedReport& report,
                                             const DistributedOptions& options) {
  // The inputs the ranks ran on, gathered (they may live on other hosts than rank 0's), else
  // read or generated here.
  std::map<std::string, Tensor> inputs;
  for (const auto& [name, t] : report.inputs) inputs.emplace(name, Tensor::view(t));
  const auto want =
      inputs.empty() ? run_graph_locally(graph, options.inputs, options.choose, options.threads)
                     : run_graph_locally(graph, std::move(inputs), options.choose, options.threads);
  GraphVerification v;
  v.tolerance = tolerance(graph.tensor(graph.outputs.at(0)).dtype, graph_reduction_terms(graph));
  for (const auto& name : graph.outputs) {
    const double err = max_relative_error(report.outputs.at(name), want.at(name));
    v.per_output[name] = err;
    v.max_rel_err = std::max(v.max_rel_err, err);
  }
  v.ok = v.max_rel_err <= v.tolerance;
  return v;
}

std::size_t record_measured_run(Store& store, const Plan& plan, const DistributedReport& report,
                                bool overlap, const Machine& machine, const RunInfo& run) {
  std::vector<MeasuredStep> steps;
  for (const auto& s : report.steps) {
    MeasuredStep m;
    m.seconds = s.seconds;
    m.bytes = static_cast<double>(s.sent);
    m.detail = {{"overlap", overlap},
                {"transform",
                 {{"strategy", s.kernel.transform.strategy},
                  {"params", s.kernel.transform.params},
                  {"source", s.kernel.source}}},
                {"kernels_agree", s.kernels_agree()},
                {"ranks", nlohmann::json::array()}};
    for (std::size_t k = 0; k < s.ranks.size(); ++k) {
      const auto& r = s.ranks[k];
      nlohmann::json rank = {{"seconds", r.seconds}, {"sent", r.sent}, {"received", r.received}};
      if (k < s.kernels.size())
        rank["strategy"] = s.kernels[k].transform.strategy, rank["source"] = s.kernels[k].source;
      m.detail["ranks"].push_back(std::move(rank));
    }
    steps.push_back(std::move(m));
  }
  return record_plan(store, plan, machine, run, &steps);
}

}  // namespace einsumdb
