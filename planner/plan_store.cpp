#include "einsumdb/planner/plan_store.hpp"

#include <algorithm>
#include <limits>

#include "einsumdb/canon/metrics.hpp"
#include "einsumdb/core/error.hpp"
#include "einsumdb/core/stats.hpp"
#include "einsumdb/planner/eindecomp_cost.hpp"

namespace einsumdb {
namespace {

BatchedEinsum pairwise_einsum(const std::vector<std::string>& operands, const std::string& result,
                              const std::vector<std::string>& arrays,
                              const std::map<char, std::int64_t>& lengths, Dtype dtype, JoinOp join,
                              AggOp agg) {
  std::vector<std::pair<std::string, ArrayInfo>> described;
  for (std::size_t k = 0; k < operands.size(); ++k) {
    ArrayInfo info;
    info.dtype = dtype;
    for (char l : operands[k]) info.shape.push_back(Length::of(lengths.at(l)));
    described.emplace_back(arrays[k], std::move(info));
  }
  return one_row_einsum(operands, result, described, join, agg);
}

}  // namespace

BatchedEinsum step_einsum(const PlanStep& s) {
  std::vector<std::string> operands{s.x};
  if (!s.y.empty()) operands.push_back(s.y);
  std::vector<std::string> arrays(s.inputs.begin(), s.inputs.end());
  // The same tensor read twice with different labels is one array only if the shapes agree.
  if (arrays.size() == 2 && arrays[0] == arrays[1]) {
    std::vector<std::int64_t> a, b;
    for (char l : s.x) a.push_back(s.bounds.at(l));
    for (char l : s.y) b.push_back(s.bounds.at(l));
    if (a != b) arrays[1] += "'";
  }
  return pairwise_einsum(operands, s.z, arrays, s.bounds, s.dtype, s.join, s.agg);
}

Store::PartitionVector canonical_vector(const Canonical& c, const PartitionVector& d) {
  Store::PartitionVector v;
  for (const auto& [canon, input] : c.sigma.index)
    if (const auto it = d.find(input); it != d.end()) v[std::string(1, canon)] = it->second;
  return v;
}

MeasuredPartitionings::MeasuredPartitionings(Store& store, std::string machine, std::int64_t procs)
    : store_(store), machine_(std::move(machine)), procs_(procs) {
  double bytes = 0, seconds = 0;
  for (const auto& p : store_.measured_partitionings(machine_, static_cast<int>(procs_))) {
    ++entries_;
    if (p.predicted_bytes && *p.predicted_bytes > 0 && p.measured_seconds &&
        *p.measured_seconds > 0) {
      bytes += *p.predicted_bytes;
      seconds += *p.measured_seconds;
    }
  }
  bytes_per_second_ = seconds > 0 ? bytes / seconds : 0;
}

std::optional<double> MeasuredPartitionings::operator()(const PlanStep& s,
                                                        const PartitionVector& d) {
  if (entries_ == 0 || bytes_per_second_ <= 0) return std::nullopt;
  // The step's tensors fix its shapes and dtype within one graph.
  const std::string text = s.einsum_string() + "|" + std::string(to_string(s.join)) + "," +
                           std::string(to_string(s.agg)) + "|" + nlohmann::json(s.inputs).dump();
  auto it = known_.find(text);
  if (it == known_.end()) {
    Known k{canonicalize(step_einsum(s)), {}};
    std::map<PartitionVector, std::vector<double>> times;
    for (const auto& p : store_.partitionings(k.canonical.hash, static_cast<int>(procs_))) {
      if (p.machine != machine_ || !p.measured_seconds) continue;
      PartitionVector v;  // the canonical names back into the step's
      for (const auto& [canon, input] : k.canonical.sigma.index)
        if (const auto at = p.vector.find(std::string(1, canon)); at != p.vector.end())
          v[input] = at->second;
      times[v].push_back(*p.measured_seconds);
    }
    for (const auto& [v, t] : times) k.measured.emplace_back(v, median(t));
    it = known_.emplace(text, std::move(k)).first;
  }
  const auto& measured = it->second.measured;
  if (measured.empty()) return std::nullopt;
  const double floats_per_second = bytes_per_second_ / static_cast<double>(dtype_bytes(s.dtype));
  // Vectors compare with every label present (a label the vector does not split is 1).
  const auto full = [&](const PartitionVector& v) {
    PartitionVector out;
    for (char l : join_labels(s.x, s.y)) {
      const auto at = v.find(l);
      out[l] = at == v.end() ? 1 : at->second;
    }
    return out;
  };
  const PartitionVector want = full(d);
  const auto model = [&](const PartitionVector& v) {
    return join_cost(s.x, s.y, v, s.bounds, procs_) +
           aggregation_cost(s.x, s.y, s.z, v, s.bounds, procs_);
  };
  double estimate = std::numeric_limits<double>::infinity();
  for (const auto& [v, seconds] : measured) {
    if (full(v) == want) {
      ++hits_;
      return seconds * floats_per_second;
    }
    estimate =
        std::min(estimate, seconds * floats_per_second + std::max(0.0, model(want) - model(v)));
  }
  ++estimated_;
  return estimate * (1 + 1e-6) + 1;  // a tie goes to the measured vector
}

MeasuredSteps::MeasuredSteps(Store& store, std::string machine, Dtype dtype, JoinOp join, AggOp agg,
                             std::map<char, std::int64_t> lengths)
    : store_(store),
      machine_(std::move(machine)),
      dtype_(dtype),
      join_(join),
      agg_(agg),
      lengths_(std::move(lengths)) {
  ListFilter filter;
  filter.machine = machine_;
  std::vector<double> rates;
  for (const auto& w : store_.list(filter))
    if (w.best_gflops && *w.best_gflops > 0) rates.push_back(*w.best_gflops * 1e9);
  if (!rates.empty()) flops_per_second_ = median(rates);
}

std::optional<double> MeasuredSteps::operator()(const std::string& a, const std::string& b,
                                                const std::string& result) {
  if (flops_per_second_ <= 0) return std::nullopt;
  const BatchedEinsum e =
      pairwise_einsum({a, b}, result, {"X", "Y"}, lengths_, dtype_, join_, agg_);
  const auto fact = store_.best(canonicalize(e).hash, machine_);
  if (!fact || fact->median_s <= 0) return std::nullopt;
  ++hits_;
  return fact->median_s * flops_per_second_;
}

std::size_t record_plan(Store& store, const Plan& plan, const Machine& machine, const RunInfo& run,
                        const std::vector<MeasuredStep>* measured) {
  EINSUMDB_ASSERT(!measured || measured->size() == plan.graph.steps.size(),
                  "one measurement per step");
  Store::Transaction tx(store);
  const auto machine_id = store.machine_id(machine);
  const auto run_id = store.begin_run(run, machine_id);
  std::size_t rows = 0;
  for (std::size_t v = 0; v < plan.graph.steps.size(); ++v) {
    const auto& s = plan.graph.steps[v];
    const auto& c = plan.choice[v];
    const Canonical canon = canonicalize(step_einsum(s));
    Store::Partitioning p;
    p.graph_key = canon.hash;
    p.procs = static_cast<int>(plan.procs);
    p.vector = canonical_vector(canon, c.d);
    p.step = s.name;
    p.einsum = s.einsum_string();
    p.method = to_string(plan.method);
    p.predicted_bytes =
        (c.join + c.aggregation + c.repartition) * static_cast<double>(dtype_bytes(s.dtype));
    p.machine = machine.fingerprint();
    if (measured) {
      const MeasuredStep& m = (*measured)[v];
      p.measured_seconds = m.seconds;
      p.measured_bytes = m.bytes;
      p.measured = m.detail;
    }
    store.record_partitioning(run_id, p);
    ++rows;
  }
  tx.commit();
  return rows;
}

}  // namespace einsumdb
