#include "einsumdb/planner/placement.hpp"

#include <algorithm>
#include <map>
#include <numeric>
#include <tuple>

#include "einsumdb/core/error.hpp"

namespace einsumdb {
namespace {

// The row-major coordinates of `index` over `parts`.
std::vector<std::int64_t> unravel(std::int64_t index, const std::vector<std::int64_t>& parts) {
  std::vector<std::int64_t> c(parts.size());
  for (std::size_t a = parts.size(); a-- > 0;) {
    c[a] = index % parts[a];
    index /= parts[a];
  }
  return c;
}

std::int64_t product(const std::vector<std::int64_t>& v) {
  return std::accumulate(v.begin(), v.end(), std::int64_t{1}, std::multiplies<>());
}

std::vector<std::string> operand_labels(const PlanStep& s) {
  std::vector<std::string> out{s.x};
  if (!s.y.empty()) out.push_back(s.y);
  return out;
}

StepPlacement pieces_of(const PlanStep& s, const PartitionVector& d) {
  StepPlacement p;
  p.join_labels = join_labels(s.x, s.y);
  for (char l : p.join_labels) {
    p.parts.push_back(d.at(l));
    if (s.z.find(l) == std::string::npos) p.aggregated_parts *= d.at(l);
  }
  return p;
}

bool is_reducer(const PlanStep& s, const StepPlacement& p, std::int64_t piece) {
  const auto c = p.coords(piece);
  for (std::size_t k = 0; k < p.join_labels.size(); ++k)
    if (s.z.find(p.join_labels[k]) == std::string::npos && c[k] != 0) return false;
  return true;
}

Blocking result_blocking(const PlanStep& s, const PartitionVector& d) {
  Blocking b;
  b.shape = s.result_shape();
  for (char l : s.z) b.parts.push_back(d.at(l));
  return b;
}

}  // namespace

bool intersect(const Region& a, const Region& b, Region& out) {
  out.start.resize(a.start.size());
  out.length.resize(a.start.size());
  for (std::size_t k = 0; k < a.start.size(); ++k) {
    const std::int64_t lo = std::max(a.start[k], b.start[k]);
    const std::int64_t hi = std::min(a.start[k] + a.length[k], b.start[k] + b.length[k]);
    if (hi <= lo) return false;
    out.start[k] = lo;
    out.length[k] = hi - lo;
  }
  return true;
}

std::string shape_text(const std::vector<std::int64_t>& shape) {
  std::string t = "[";
  for (std::size_t a = 0; a < shape.size(); ++a) t += (a ? "," : "") + std::to_string(shape[a]);
  return t + "]";
}

std::int64_t result_block(const PlanStep& s, const StepPlacement& p, const Blocking& result,
                          std::int64_t piece) {
  const auto c = p.coords(piece);
  std::vector<std::int64_t> rc;
  for (char l : s.z) rc.push_back(c[p.join_labels.find(l)]);
  return result.index(rc);
}

std::int64_t Blocking::blocks() const {
  return product(parts);
}

std::vector<std::int64_t> Blocking::coords(std::int64_t block) const {
  return unravel(block, parts);
}

std::int64_t Blocking::index(const std::vector<std::int64_t>& c) const {
  std::int64_t i = 0;
  for (std::size_t a = 0; a < parts.size(); ++a) i = i * parts[a] + c[a];
  return i;
}

std::vector<std::int64_t> Blocking::block_shape(std::int64_t block) const {
  const auto c = coords(block);
  std::vector<std::int64_t> s(c.size());
  for (std::size_t a = 0; a < c.size(); ++a) s[a] = length(a, c[a]);
  return s;
}

Region Blocking::region(std::int64_t block) const {
  const auto c = coords(block);
  Region r;
  for (std::size_t a = 0; a < c.size(); ++a) {
    r.start.push_back(start(a, c[a]));
    r.length.push_back(length(a, c[a]));
  }
  return r;
}

std::vector<std::int64_t> StepPlacement::coords(std::int64_t piece) const {
  return unravel(piece, parts);
}

std::int64_t Region::size() const {
  return product(length);
}

std::pair<std::int64_t, std::int64_t> parts_meeting(const Blocking& b, std::size_t axis,
                                                    std::int64_t lo, std::int64_t hi) {
  const std::int64_t n = b.parts[axis], bound = b.shape[axis];
  // Part k covers [k·bound/n, (k+1)·bound/n): the part holding element e is near e·n/bound.
  auto part_of = [&](std::int64_t e) {
    std::int64_t k = std::min(n - 1, e * n / std::max<std::int64_t>(bound, 1));
    while (k > 0 && b.start(axis, k) > e) --k;
    while (k + 1 < n && b.start(axis, k + 1) <= e) ++k;
    return k;
  };
  return {part_of(lo), part_of(hi - 1)};
}

Region operand_region(const PlanStep& s, const StepPlacement& p, std::int64_t piece,
                      const std::string& labels) {
  const auto c = p.coords(piece);
  Region r;
  for (char l : labels) {
    const std::size_t k = p.join_labels.find(l);
    const std::int64_t b = s.bounds.at(l), n = p.parts[k];
    r.start.push_back(Blocking::start(b, n, c[k]));
    r.length.push_back(Blocking::start(b, n, c[k] + 1) - Blocking::start(b, n, c[k]));
  }
  return r;
}

Placement place(const Plan& plan) {
  Placement out;
  out.procs = plan.procs;
  const auto P = plan.procs;
  std::vector<std::int64_t> load(static_cast<std::size_t>(P), 0);  // input elements owned
  for (std::size_t v = 0; v < plan.graph.steps.size(); ++v) {
    const PlanStep& s = plan.graph.steps[v];
    const PartitionVector& d = plan.choice[v].d;
    StepPlacement sp = pieces_of(s, d);
    EINSUMDB_ASSERT(product(sp.parts) == P, "a step has exactly P pieces");
    const auto labels = operand_labels(s);

    // Affinity of each (piece, rank): operand elements the rank already owns.
    std::vector<std::tuple<std::int64_t, std::int64_t, int>> pairs;  // (-affinity, piece, rank)
    for (std::int64_t q = 0; q < P; ++q) {
      std::map<int, std::int64_t> affinity;
      for (std::size_t k = 0; k < labels.size(); ++k) {
        const auto it = out.relations.find(s.inputs[k]);
        if (it == out.relations.end()) continue;
        const Relation& r = it->second;
        for_each_block_meeting(r.blocking, operand_region(s, sp, q, labels[k]),
                               [&](std::int64_t b, const Region& box) {
                                 affinity[r.owner[static_cast<std::size_t>(b)]] += box.size();
                               });
      }
      for (const auto& [rank, a] : affinity) pairs.emplace_back(-a, q, rank);
    }
    std::sort(pairs.begin(), pairs.end());
    sp.rank.assign(static_cast<std::size_t>(P), -1);
    std::vector<bool> taken(static_cast<std::size_t>(P), false);
    for (const auto& [a, q, rank] : pairs)
      if (sp.rank[q] < 0 && !taken[rank]) sp.rank[q] = rank, taken[rank] = true;
    for (std::int64_t q = 0; q < P; ++q) {
      if (sp.rank[q] >= 0) continue;
      int rank = !taken[q] ? static_cast<int>(q) : 0;
      while (taken[rank]) ++rank;
      sp.rank[q] = rank, taken[rank] = true;
    }

    // Graph inputs not yet placed: cut as this step reads them, owned by a reader.
    for (std::size_t k = 0; k < labels.size(); ++k) {
      const std::string& name = s.inputs[k];
      if (plan.graph.producer(name) >= 0 || out.relations.count(name)) continue;
      Relation r;
      r.blocking.shape = plan.graph.inputs.at(name).shape;
      for (char l : labels[k]) r.blocking.parts.push_back(d.at(l));
      // A block read whole by several pieces (Π d over the labels the operand lacks: the same for
      // every block) is cut once more along its longest axis, one share per reader as far as
      // the axis allows, each share owned by another reader. The readers then exchange shares,
      // each link carrying its part both ways at once, where one owner of the whole block would
      // send all of it alone: the busiest link's bytes fall by the number of shares, at the cost
      // of a message per share. Only blocks of kMinSharedBlock elements or more are cut: 2^16
      // doubles (512 KiB) take 21 µs at 25 GB/s and 0.4 ms at 10 Gbit/s, above a link's latency
      // (2–50 µs), while a much smaller block's messages would cost about what its shares save.
      constexpr std::int64_t kMinSharedBlock = std::int64_t{1} << 16;
      std::int64_t shares = 1;
      for (char l : sp.join_labels)
        if (labels[k].find(l) == std::string::npos) shares *= d.at(l);
      std::int64_t block_elements = 1;
      for (std::size_t a = 0; a < labels[k].size(); ++a)
        block_elements *= r.blocking.shape[a] / r.blocking.parts[a];
      if (labels[k].empty() || block_elements < kMinSharedBlock) shares = 1;
      std::size_t axis = 0;
      for (std::size_t a = 1; a < labels[k].size(); ++a)
        if (r.blocking.shape[a] * r.blocking.parts[axis] >
            r.blocking.shape[axis] * r.blocking.parts[a])
          axis = a;
      while (shares > 1 && r.blocking.parts[axis] * shares > r.blocking.shape[axis]) shares /= 2;
      if (shares > 1) r.blocking.parts[axis] *= shares;
      r.owner.assign(static_cast<std::size_t>(r.blocking.blocks()), -1);
      // The pieces that read each block whole, in piece order.
      std::vector<std::vector<std::int64_t>> readers(static_cast<std::size_t>(r.blocking.blocks()));
      for (std::int64_t q = 0; q < P; ++q)
        for_each_block_meeting(r.blocking, operand_region(s, sp, q, labels[k]),
                               [&](std::int64_t b, const Region& box) {
                                 if (box.length == r.blocking.region(b).length)
                                   readers[static_cast<std::size_t>(b)].push_back(q);
                               });
      for (std::int64_t b = 0; b < r.blocking.blocks(); ++b) {
        const std::int64_t size = product(r.blocking.block_shape(b));
        int best = -1;
        const auto& who = readers[static_cast<std::size_t>(b)];
        if (shares > 1 && !who.empty()) {
          // Share t of its block goes to the t-th reader (in piece order).
          const std::int64_t t = r.blocking.coords(b)[axis] % shares;
          best = sp.rank[who[static_cast<std::size_t>(t) % who.size()]];
        } else {
          for (std::int64_t q : who) {
            const int rank = sp.rank[q];
            if (best < 0 || load[rank] < load[best]) best = rank;
          }
        }
        if (best < 0)
          best = static_cast<int>(std::min_element(load.begin(), load.end()) - load.begin());
        r.owner[b] = best;
        load[best] += size;
      }
      out.relations.emplace(name, std::move(r));
    }

    // The result: each block owned by the piece whose aggregated coordinates are all zero.
    Relation result;
    result.blocking = result_blocking(s, d);
    result.owner.assign(static_cast<std::size_t>(result.blocking.blocks()), -1);
    for (std::int64_t q = 0; q < P; ++q)
      if (is_reducer(s, sp, q)) result.owner[result_block(s, sp, result.blocking, q)] = sp.rank[q];
    out.relations[s.name] = std::move(result);
    out.steps.push_back(std::move(sp));
  }
  return out;
}

nlohmann::ordered_json to_json(const Placement& p, const Plan& plan) {
  nlohmann::ordered_json j;
  j["inputs"] = nlohmann::ordered_json::object();
  for (const auto& [name, r] : p.relations)
    if (plan.graph.producer(name) < 0)
      j["inputs"][name] = {{"parts", r.blocking.parts}, {"owners", r.owner}};
  j["steps"] = nlohmann::ordered_json::array();
  for (std::size_t v = 0; v < p.steps.size(); ++v) {
    const auto& name = plan.graph.steps[v].name;
    j["steps"].push_back(
        {{"name", name}, {"ranks", p.steps[v].rank}, {"owners", p.relations.at(name).owner}});
  }
  return j;
}

Placement placement_from_json(const nlohmann::json& j, const Plan& plan) {
  const auto P = plan.procs;
  auto ints = [](const nlohmann::json& v, const std::string& where) {
    if (!v.is_array()) throw SpecError(where + " must be an array of integers");
    std::vector<std::int64_t> out;
    for (const auto& e : v) {
      if (!e.is_number_integer()) throw SpecError(where + " must be an array of integers");
      out.push_back(e.get<std::int64_t>());
    }
    return out;
  };
  auto ranks = [&](const nlohmann::json& v, std::size_t count, const std::string& where) {
    const auto r = ints(v, where);
    if (r.size() != count)
      throw SpecError(where + " has " + std::to_string(r.size()) + " entries; expected " +
                      std::to_string(count));
    std::vector<int> out;
    for (auto x : r) {
      if (x < 0 || x >= P)
        throw SpecError(where + " names rank " + std::to_string(x) + ", but the plan is for " +
                        std::to_string(P) + " ranks");
      out.push_back(static_cast<int>(x));
    }
    return out;
  };
  if (!j.is_object() || !j.contains("inputs") || !j.contains("steps") || !j["inputs"].is_object() ||
      !j["steps"].is_array())
    throw SpecError("placement: expected {\"inputs\": {...}, \"steps\": [...]}");
  Placement out;
  out.procs = P;
  for (const auto& [name, t] : plan.graph.inputs) {
    bool read = false;
    for (const auto& s : plan.graph.steps)
      read = read || std::count(s.inputs.begin(), s.inputs.end(), name) > 0;
    if (!j["inputs"].contains(name)) {
      if (read) throw SpecError("placement: input '" + name + "' has no placement");
      continue;
    }
    const auto& e = j["inputs"][name];
    const std::string where = "placement of input '" + name + "'";
    if (!e.is_object() || !e.contains("parts") || !e.contains("owners"))
      throw SpecError(where + ": expected {\"parts\": [...], \"owners\": [...]}");
    Relation r;
    r.blocking.shape = t.shape;
    r.blocking.parts = ints(e["parts"], where + ": parts");
    if (r.blocking.parts.size() != t.shape.size())
      throw SpecError(where + ": parts has " + std::to_string(r.blocking.parts.size()) +
                      " entries for a tensor of rank " + std::to_string(t.shape.size()));
    for (std::size_t a = 0; a < t.shape.size(); ++a)
      if (r.blocking.parts[a] < 1 || r.blocking.parts[a] > t.shape[a])
        throw SpecError(where + ": axis " + std::to_string(a) + " of length " +
                        std::to_string(t.shape[a]) + " cannot be cut into " +
                        std::to_string(r.blocking.parts[a]) + " parts");
    r.owner = ranks(e["owners"], static_cast<std::size_t>(r.blocking.blocks()), where + ": owners");
    out.relations.emplace(name, std::move(r));
  }
  for (const auto& [name, e] : j["inputs"].items())
    if (!plan.graph.inputs.count(name))
      throw SpecError("placement: '" + name + "' is not an input of the plan");
  if (j["steps"].size() != plan.graph.steps.size())
    throw SpecError("placement: " + std::to_string(j["steps"].size()) + " steps for a plan of " +
                    std::to_string(plan.graph.steps.size()));
  for (std::size_t v = 0; v < plan.graph.steps.size(); ++v) {
    const PlanStep& s = plan.graph.steps[v];
    const auto& e = j["steps"][v];
    const std::string where = "placement of step '" + s.name + "'";
    if (!e.is_object() || e.value("name", std::string()) != s.name)
      throw SpecError("placement: entry " + std::to_string(v) + " must be step '" + s.name + "'");
    StepPlacement sp = pieces_of(s, plan.choice[v].d);
    sp.rank =
        ranks(e.value("ranks", nlohmann::json()), static_cast<std::size_t>(P), where + ": ranks");
    std::vector<int> sorted = sp.rank;
    std::sort(sorted.begin(), sorted.end());
    for (int k = 0; k < P; ++k)
      if (sorted[k] != k)
        throw SpecError(where + ": ranks must give each rank one piece (rank " + std::to_string(k) +
                        " has " + std::to_string(std::count(sorted.begin(), sorted.end(), k)) +
                        ")");
    Relation result;
    result.blocking = result_blocking(s, plan.choice[v].d);
    result.owner = ranks(e.value("owners", nlohmann::json()),
                         static_cast<std::size_t>(result.blocking.blocks()), where + ": owners");
    for (std::int64_t b = 0; b < result.blocking.blocks(); ++b) {
      bool contributes = false;
      for (std::int64_t q = 0; q < P; ++q)
        contributes = contributes || (sp.rank[q] == result.owner[b] &&
                                      result_block(s, sp, result.blocking, q) == b);
      if (!contributes)
        throw SpecError(where + ": result block " + std::to_string(b) + " is owned by rank " +
                        std::to_string(result.owner[b]) + ", which computes no part of it");
    }
    out.relations[s.name] = std::move(result);
    out.steps.push_back(std::move(sp));
  }
  return out;
}

}  // namespace einsumdb
