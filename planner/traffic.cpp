#include "einsumdb/planner/traffic.hpp"

namespace einsumdb {

std::vector<Transfer> join_transfers(const Plan& plan, const Placement& placement, int step) {
  const PlanStep& s = plan.graph.steps[static_cast<std::size_t>(step)];
  std::vector<Transfer> out;
  for_each_join_transfer(
      plan, placement, step, [&](int k, int src, int dst, std::int64_t block, const Region& box) {
        out.push_back({step, k, src, dst, s.inputs[static_cast<std::size_t>(k)], block, box});
      });
  return out;
}

std::vector<int> aggregation_group(const Plan& plan, const Placement& placement, int step,
                                   std::int64_t piece) {
  const PlanStep& s = plan.graph.steps[static_cast<std::size_t>(step)];
  const StepPlacement& sp = placement.steps[static_cast<std::size_t>(step)];
  const Relation& result = placement.relations.at(s.name);
  auto block_of = [&](std::int64_t q) { return result_block(s, sp, result.blocking, q); };
  const std::int64_t block = block_of(piece);
  const int owner = result.owner[static_cast<std::size_t>(block)];
  std::vector<int> group{owner};
  // Only the aggregated labels' coordinates vary within a group: enumerate those pieces alone.
  auto c = sp.coords(piece);
  std::vector<std::size_t> aggregated;
  for (std::size_t k = 0; k < sp.join_labels.size(); ++k)
    if (s.z.find(sp.join_labels[k]) == std::string::npos) aggregated.push_back(k), c[k] = 0;
  while (true) {
    std::int64_t q = 0;
    for (std::size_t k = 0; k < c.size(); ++k) q = q * sp.parts[k] + c[k];
    const int rank = sp.rank[static_cast<std::size_t>(q)];
    if (rank != owner) group.push_back(rank);
    std::size_t a = aggregated.size();
    while (a > 0 && c[aggregated[a - 1]] + 1 == sp.parts[aggregated[a - 1]])
      c[aggregated[a - 1]] = 0, --a;
    if (a == 0) break;
    ++c[aggregated[a - 1]];
  }
  return group;
}

BatchedEinsum piece_kernel(const PlanStep& s, const StepPlacement& p, std::int64_t piece) {
  BatchedEinsum kernel;
  kernel.inputs = {s.x};
  if (!s.y.empty()) kernel.inputs.push_back(s.y);
  kernel.output = s.z;
  kernel.join = s.join;
  kernel.agg = s.agg;
  std::vector<std::string> row;
  for (std::size_t k = 0; k < kernel.inputs.size(); ++k) {
    const std::string name = k == 0 ? "X" : "Y";
    ArrayInfo info;
    info.dtype = s.dtype;
    for (auto l : operand_region(s, p, piece, kernel.inputs[k]).length)
      info.shape.push_back(Length::of(l));
    kernel.arrays[name] = info;
    row.push_back(name);
  }
  kernel.batch = {row};
  return kernel;
}

std::string kernel_key(const BatchedEinsum& kernel) {
  std::string key = kernel.einsum_string() + " " + std::string(to_string(kernel.join)) + "," +
                    std::string(to_string(kernel.agg));
  for (const auto& [name, info] : kernel.arrays) {
    key += " " + name + ":" + std::string(to_string(info.dtype));
    for (const Length& l : info.shape) key += "," + std::to_string(l.value);
  }
  return key;
}

}  // namespace einsumdb
