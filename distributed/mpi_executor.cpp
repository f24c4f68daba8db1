#include "einsumdb/distributed/mpi_executor.hpp"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <iostream>
#include <optional>
#include <thread>

#include <sched.h>

#include "einsumdb/db/store.hpp"
#include "einsumdb/planner/traffic.hpp"

namespace einsumdb {
namespace {

using Clock = std::chrono::steady_clock;

double since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

MPI_Datatype element_type(Dtype d) {
  return d == Dtype::f32 ? MPI_FLOAT : MPI_DOUBLE;
}

int as_int(std::int64_t v, const char* what) {
  if (v < 0 || v > std::numeric_limits<int>::max())
    throw Error(std::string(what) + " " + std::to_string(v) + " exceeds what MPI can address");
  return static_cast<int>(v);
}

// The elements `sub` at `start` of a row-major array of `shape`, as a committed MPI type that the
// caller frees once the operation using it is posted (MPI keeps it alive until that completes).
MPI_Datatype subarray(const std::vector<std::int64_t>& shape, const std::vector<std::int64_t>& sub,
                      const std::vector<std::int64_t>& start, Dtype dtype) {
  MPI_Datatype t;
  if (shape.empty()) {
    MPI_Type_contiguous(1, element_type(dtype), &t);
  } else {
    std::vector<int> sizes, subsizes, starts;
    for (std::size_t a = 0; a < shape.size(); ++a) {
      sizes.push_back(as_int(shape[a], "an axis of"));
      subsizes.push_back(as_int(sub[a], "an axis of"));
      starts.push_back(as_int(start[a], "an offset of"));
    }
    MPI_Type_create_subarray(static_cast<int>(shape.size()), sizes.data(), subsizes.data(),
                             starts.data(), MPI_ORDER_C, element_type(dtype), &t);
  }
  MPI_Type_commit(&t);
  return t;
}

std::vector<std::int64_t> minus(const std::vector<std::int64_t>& a,
                                const std::vector<std::int64_t>& b) {
  std::vector<std::int64_t> out(a.size());
  for (std::size_t k = 0; k < a.size(); ++k) out[k] = a[k] - b[k];
  return out;
}

// Copies the box of `length` at `from` in `src` to `to` in `dst` (same dtype).
void copy_box(const Tensor& src, const std::vector<std::int64_t>& from, Tensor& dst,
              const std::vector<std::int64_t>& to, const std::vector<std::int64_t>& length) {
  const std::size_t r = length.size(), esize = dtype_bytes(src.dtype());
  const auto ss = src.strides(), ds = dst.strides();
  const std::int64_t inner = r ? length[r - 1] : 1;
  std::int64_t rows = 1;
  for (std::size_t a = 0; a + 1 < r; ++a) rows *= length[a];
  std::vector<std::int64_t> idx(r > 0 ? r - 1 : 0, 0);
  const auto* s = static_cast<const char*>(src.raw());
  auto* d = static_cast<char*>(dst.raw());
  for (std::int64_t row = 0; row < rows; ++row) {
    std::int64_t so = 0, dof = 0;
    for (std::size_t a = 0; a < r; ++a) {
      const std::int64_t i = a + 1 < r ? idx[a] : 0;
      so += (from[a] + i) * ss[a];
      dof += (to[a] + i) * ds[a];
    }
    std::memcpy(d + dof * static_cast<std::int64_t>(esize),
                s + so * static_cast<std::int64_t>(esize), static_cast<std::size_t>(inner) * esize);
    for (std::size_t a = idx.size(); a-- > 0;) {
      if (++idx[a] < length[a]) break;
      idx[a] = 0;
    }
  }
}

template <typename T>
void combine_typed(T* acc, const T* x, std::int64_t n, AggOp op) {
  switch (op) {
    case AggOp::sum:
      for (std::int64_t i = 0; i < n; ++i) acc[i] += x[i];
      break;
    case AggOp::max:
      for (std::int64_t i = 0; i < n; ++i) acc[i] = std::max(acc[i], x[i]);
      break;
    case AggOp::min:
      for (std::int64_t i = 0; i < n; ++i) acc[i] = std::min(acc[i], x[i]);
      break;
  }
}

// acc ⊕= x, element-wise.
void combine(Tensor& acc, const Tensor& x, AggOp op) {
  if (acc.dtype() == Dtype::f32)
    combine_typed(acc.data<float>(), x.data<float>(), acc.size(), op);
  else
    combine_typed(acc.data<double>(), x.data<double>(), acc.size(), op);
}

class Runner {
 public:
  Runner(const Plan& plan, const Placement& placement, MPI_Comm comm,
         const DistributedOptions& options)
      : plan_(plan),
        placement_(placement),
        comm_(comm),
        options_(options),
        waiter_(comm, options.timeout_s) {
    MPI_Comm_rank(comm_, &me_);
    MPI_Comm_size(comm_, &procs_);
    EINSUMDB_ASSERT(procs_ == plan.procs, "the caller checks the number of ranks");
  }

  DistributedReport run();

 private:
  struct StepState {
    std::int64_t piece = 0;
    std::vector<std::string> labels;  // per operand
    std::vector<Region> regions;      // per operand: what this rank's piece reads
    // Per operand: read in place from a block this rank owns (one local transfer covering the
    // whole block and the whole region), without a copy.
    std::vector<bool> in_place;
    BatchedEinsum kernel;
    KernelChoice choice;
    std::vector<int> group;  // the ranks reducing this rank's result block, its owner first
    int position = 0;        // this rank's place in `group`
    std::int64_t result_block = 0;
    std::vector<std::int64_t> result_shape;
  };

  // What each rank sets up alone, before any message: the steps' transfers and kernels, this
  // rank's input blocks (or, reading for every rank, rank 0's check of the files) and, on rank
  // 0, the transforms of every rank's kernels (returned as JSON text; "" elsewhere).
  std::string setup();
  // Rank 0: the transform of every (step, piece), chosen once per distinct kernel.
  std::string choose_kernels() const;
  // Takes this rank's kernels out of rank 0's choices.
  void take_kernels(const std::string& choices);
  // Rank 0 reads every input block that is not generated and sends it to its owner.
  void ship_inputs();
  // Whether this node's ranks × threads exceed its cores (then waiting ranks sleep).
  bool ranks_share_cores();
  void run_once(std::vector<double>& step_seconds);
  // The step's kernel on this rank's operands; falls back to the default transform when the
  // chosen one is refused.
  Results run_kernel(int step, const Arrays& arrays);
  void post_receives(int step);
  // Sends (or copies locally) what `tensor`'s block `block` owes to later joins.
  void deliver(const std::string& tensor, std::int64_t block);
  // One transfer out of a block this rank owns: an MPI send, or a copy when it stays here.
  void send(std::size_t transfer);
  void aggregate(int step, Tensor& partial, Tensor* result);
  void wait(std::vector<MPI_Request>& requests, const std::string& what) {
    waiter_.wait(requests, what);
  }
  void progress();
  int tag(int step, int kind) const { return 4 * step + kind; }
  const Tensor& owned(const std::string& tensor, std::int64_t block) const;
  // Assembles the blocks of `relations` named in `names` whole on rank 0.
  void gather_whole(const std::vector<std::string>& names, int first_tag,
                    std::map<std::string, Tensor>& out, const std::string& what);
  void gather(DistributedReport& report);
  void collect(const std::vector<std::vector<double>>& runs, DistributedReport& report);

  const Plan& plan_;
  const Placement& placement_;
  MPI_Comm comm_;
  const DistributedOptions& options_;
  Waiter waiter_;
  int me_ = 0, procs_ = 1;
  bool ranks_share_cores_ = false;
  bool overlap_ = true;  // options_.overlap resolved

  std::vector<StepState> steps_;
  std::vector<Transfer> transfers_;
  std::map<std::pair<std::string, std::int64_t>, std::vector<std::size_t>> out_of_;  // src == me
  std::vector<std::vector<std::size_t>> into_;  // per step: transfers with dst == me
  std::vector<std::vector<std::size_t>> from_;  // per step: transfers with src == me
  std::map<std::string, std::map<std::int64_t, Tensor>> inputs_;   // owned input blocks
  std::map<std::string, std::map<std::int64_t, Tensor>> results_;  // owned result blocks, per run

  // Per run.
  std::vector<std::vector<Tensor>> operands_;
  std::vector<std::vector<MPI_Request>> receives_;
  std::vector<MPI_Request> sends_;
  std::vector<Tensor> in_flight_;  // partial results being sent
  std::vector<std::int64_t> sent_, received_;

  // The timeline (options_.trace): phases of steps, in seconds since origin_.
  enum Phase : int { kSend, kWait, kKernel, kReduce, kFinish, kPhases };
  struct Event {
    int phase, step, run;
    double start, end;
  };
  std::vector<Event> events_;
  Clock::time_point origin_;
  int run_ = 0;
  // Times one phase of a step until it goes out of scope (nothing without options_.trace).
  class Span {
   public:
    Span(Runner& r, int phase, int step) : r_(r), phase_(phase), step_(step) {
      if (r_.options_.trace) start_ = Clock::now();
    }
    Span(const Span&) = delete;
    Span& operator=(const Span&) = delete;
    ~Span() {
      if (!r_.options_.trace) return;
      auto at = [&](Clock::time_point t) {
        return std::chrono::duration<double>(t - r_.origin_).count();
      };
      r_.events_.push_back({phase_, step_, r_.run_, at(start_), at(Clock::now())});
    }

   private:
    Runner& r_;
    int phase_, step_;
    Clock::time_point start_;
  };
  nlohmann::json gather_trace();
};

void Runner::progress() {
  if (sends_.empty()) return;
  int done = 0;
  MPI_Testall(static_cast<int>(sends_.size()), sends_.data(), &done, MPI_STATUSES_IGNORE);
  if (done) {
    sends_.clear();
    in_flight_.clear();
  }
}

const Tensor& Runner::owned(const std::string& tensor, std::int64_t block) const {
  if (plan_.graph.producer(tensor) < 0) return inputs_.at(tensor).at(block);
  return results_.at(tensor).at(block);
}

std::string Runner::setup() {
  const auto& g = plan_.graph;
  const int S = static_cast<int>(g.steps.size());
  // Tags 4 × (step, output, the inputs' shipment and gathering) + kind, below the agreement's.
  if (4 * static_cast<std::int64_t>(g.steps.size() + g.outputs.size() + g.inputs.size()) + 8 >
      first_reserved_tag(comm_))
    throw Error("the plan has more steps than this MPI's message tags can tell apart");
  steps_.resize(static_cast<std::size_t>(S));
  into_.assign(static_cast<std::size_t>(S), {});
  from_.assign(static_cast<std::size_t>(S), {});
  for (int v = 0; v < S; ++v) {
    const PlanStep& s = g.steps[static_cast<std::size_t>(v)];
    const StepPlacement& sp = placement_.steps[static_cast<std::size_t>(v)];
    StepState& st = steps_[static_cast<std::size_t>(v)];
    st.labels = {s.x};
    if (!s.y.empty()) st.labels.push_back(s.y);
    st.piece = std::find(sp.rank.begin(), sp.rank.end(), me_) - sp.rank.begin();
    for (const auto& l : st.labels) st.regions.push_back(operand_region(s, sp, st.piece, l));

    st.kernel = piece_kernel(s, sp, st.piece);

    const Relation& result = placement_.relations.at(s.name);
    st.result_block = result_block(s, sp, result.blocking, st.piece);
    st.result_shape = result.blocking.block_shape(st.result_block);
    st.group = aggregation_group(plan_, placement_, v, st.piece);
    st.position =
        static_cast<int>(std::find(st.group.begin(), st.group.end(), me_) - st.group.begin());

    for (Transfer& t : join_transfers(plan_, placement_, v)) {
      const std::size_t id = transfers_.size();
      if (t.dst == me_) into_[static_cast<std::size_t>(v)].push_back(id);
      if (t.src == me_) {
        from_[static_cast<std::size_t>(v)].push_back(id);
        out_of_[{t.tensor, t.block}].push_back(id);
      }
      transfers_.push_back(std::move(t));
    }
  }
  for (int v = 0; v < S; ++v) {
    StepState& st = steps_[static_cast<std::size_t>(v)];
    st.in_place.assign(st.labels.size(), false);
    for (std::size_t k = 0; k < st.labels.size(); ++k) {
      int count = 0;
      bool whole = false;
      for (std::size_t id : into_[static_cast<std::size_t>(v)]) {
        const Transfer& t = transfers_[id];
        if (t.operand != static_cast<int>(k)) continue;
        ++count;
        const Region block = placement_.relations.at(t.tensor).blocking.region(t.block);
        whole = t.src == me_ && t.box.start == block.start && t.box.length == block.length &&
                t.box.length == st.regions[k].length;
      }
      st.in_place[k] = count == 1 && whole;
    }
  }
  // The input blocks this rank owns, once for every run: generated, or read here (unless rank 0
  // reads them for every rank: then it checks the files now and sends the blocks once the ranks
  // agree to go on).
  const InputSource& src = options_.inputs;
  for (const auto& [name, t] : g.inputs) {
    const auto it = placement_.relations.find(name);
    if (it == placement_.relations.end()) continue;
    const Relation& r = it->second;
    const bool shipped = !src.generated(name) && src.reader == InputReader::root;
    if (shipped && me_ == 0) check_input_file(src, name, t);
    if (shipped) continue;
    for (std::int64_t b = 0; b < r.blocking.blocks(); ++b)
      if (r.owner[static_cast<std::size_t>(b)] == me_)
        inputs_[name].emplace(b, input_region(src, name, t, r.blocking.region(b)));
  }
  return me_ == 0 ? choose_kernels() : std::string();
}

std::string Runner::choose_kernels() const {
  // Pieces of one step mostly share one block shape, so a step asks the store once or twice.
  std::map<std::string, nlohmann::json> chosen;
  nlohmann::json all = nlohmann::json::array();
  for (std::size_t v = 0; v < plan_.graph.steps.size(); ++v) {
    nlohmann::json pieces = nlohmann::json::array();
    for (std::int64_t q = 0; q < procs_; ++q) {
      const BatchedEinsum kernel = piece_kernel(plan_.graph.steps[v], placement_.steps[v], q);
      const std::string key = kernel_key(kernel);
      auto it = chosen.find(key);
      if (it == chosen.end()) {
        const KernelChoice c = options_.choose(kernel);
        it = chosen
                 .emplace(key, nlohmann::json{{"strategy", c.transform.strategy},
                                              {"params", c.transform.params},
                                              {"source", c.source}})
                 .first;
      }
      pieces.push_back(it->second);
    }
    all.push_back(std::move(pieces));
  }
  return all.dump();
}

void Runner::take_kernels(const std::string& choices) {
  const auto all = nlohmann::json::parse(choices);
  for (std::size_t v = 0; v < steps_.size(); ++v) {
    StepState& st = steps_[v];
    const auto& c = all.at(v).at(static_cast<std::size_t>(st.piece));
    st.choice.transform.strategy = c.at("strategy").get<std::string>();
    st.choice.transform.params = c.at("params");
    st.choice.source = c.at("source").get<std::string>();
    st.choice.transform.params["threads"] = options_.threads;
  }
}

void Runner::ship_inputs() {
  const InputSource& src = options_.inputs;
  const int ship_tag =
      tag(static_cast<int>(plan_.graph.steps.size() + plan_.graph.outputs.size()), 0);
  for (const auto& [name, t] : plan_.graph.inputs) {
    const auto it = placement_.relations.find(name);
    if (it == placement_.relations.end() || src.generated(name) || src.reader != InputReader::root)
      continue;
    const Relation& r = it->second;
    std::vector<MPI_Request> requests;
    std::vector<Tensor> outgoing;
    for (std::int64_t b = 0; b < r.blocking.blocks(); ++b) {
      const int owner = r.owner[static_cast<std::size_t>(b)];
      const Region region = r.blocking.region(b);
      if (me_ == 0) {
        Tensor block = input_region(src, name, t, region);
        if (owner == 0) {
          inputs_[name].emplace(b, std::move(block));
          continue;
        }
        outgoing.push_back(std::move(block));
        requests.emplace_back();
        MPI_Isend(outgoing.back().raw(), as_int(outgoing.back().size(), "a block of"),
                  element_type(t.dtype), owner, ship_tag, comm_, &requests.back());
      } else if (owner == me_) {
        Tensor& block = inputs_[name]
                            .emplace(b, Tensor(t.dtype, region.length, Tensor::Uninitialized{}))
                            .first->second;
        requests.emplace_back();
        MPI_Irecv(block.raw(), as_int(block.size(), "a block of"), element_type(t.dtype), 0,
                  ship_tag, comm_, &requests.back());
      }
    }
    wait(requests, "sending input '" + name + "' from rank 0 to the ranks that own its blocks");
  }
}

bool Runner::ranks_share_cores() {
  // The node's cores are those any of its ranks may run on (bound ranks see one each); ranks
  // are on one node when they report one host name.
  struct Record {
    char host[MPI_MAX_PROCESSOR_NAME];
    cpu_set_t cpus;
  };
  Record mine{};
  const std::string host = host_name();
  std::snprintf(mine.host, sizeof mine.host, "%s", host.c_str());
  CPU_ZERO(&mine.cpus);
  if (sched_getaffinity(0, sizeof mine.cpus, &mine.cpus) != 0)
    for (unsigned c = 0; c < std::thread::hardware_concurrency() && c < CPU_SETSIZE; ++c)
      CPU_SET(c, &mine.cpus);
  std::vector<Record> all(static_cast<std::size_t>(procs_));
  std::vector<MPI_Request> req(1);
  MPI_Iallgather(&mine, static_cast<int>(sizeof mine), MPI_BYTE, all.data(),
                 static_cast<int>(sizeof mine), MPI_BYTE, comm_, req.data());
  wait(req, "learning which ranks share this node");
  int local = 0;
  cpu_set_t cores;
  CPU_ZERO(&cores);
  for (const Record& r : all) {
    if (std::strncmp(r.host, mine.host, sizeof r.host) != 0) continue;
    ++local;
    CPU_OR(&cores, &cores, &r.cpus);
  }
  return static_cast<std::int64_t>(local) * std::max(1, options_.threads) > CPU_COUNT(&cores);
}

void Runner::post_receives(int v) {
  const auto& g = plan_.graph;
  StepState& st = steps_[static_cast<std::size_t>(v)];
  const Dtype dtype = g.steps[static_cast<std::size_t>(v)].dtype;
  auto& ops = operands_[static_cast<std::size_t>(v)];
  ops.clear();
  for (std::size_t k = 0; k < st.regions.size(); ++k)
    ops.push_back(st.in_place[k] ? Tensor()
                                 : Tensor(dtype, st.regions[k].length, Tensor::Uninitialized{}));
  for (std::size_t id : into_[static_cast<std::size_t>(v)]) {
    const Transfer& t = transfers_[id];
    if (t.src == me_) continue;  // copied locally when the block exists
    const Region& region = st.regions[static_cast<std::size_t>(t.operand)];
    MPI_Datatype type =
        subarray(region.length, t.box.length, minus(t.box.start, region.start), dtype);
    MPI_Request req;
    MPI_Irecv(ops[static_cast<std::size_t>(t.operand)].raw(), 1, type, t.src, tag(v, t.operand),
              comm_, &req);
    MPI_Type_free(&type);
    receives_[static_cast<std::size_t>(v)].push_back(req);
    received_[static_cast<std::size_t>(v)] +=
        t.box.size() * static_cast<std::int64_t>(dtype_bytes(dtype));
  }
}

void Runner::deliver(const std::string& tensor, std::int64_t block) {
  const auto it = out_of_.find({tensor, block});
  if (it == out_of_.end()) return;
  for (std::size_t id : it->second) send(id);
}

void Runner::send(std::size_t id) {
  const Transfer& t = transfers_[id];
  const Tensor& data = owned(t.tensor, t.block);
  const Region whole = placement_.relations.at(t.tensor).blocking.region(t.block);
  const Region& region =
      steps_[static_cast<std::size_t>(t.step)].regions[static_cast<std::size_t>(t.operand)];
  if (t.dst == me_ &&
      steps_[static_cast<std::size_t>(t.step)].in_place[static_cast<std::size_t>(t.operand)]) {
    operands_[static_cast<std::size_t>(t.step)][static_cast<std::size_t>(t.operand)] =
        Tensor::view(data);
    return;
  }
  if (t.dst == me_) {
    copy_box(data, minus(t.box.start, whole.start),
             operands_[static_cast<std::size_t>(t.step)][static_cast<std::size_t>(t.operand)],
             minus(t.box.start, region.start), t.box.length);
    return;
  }
  MPI_Datatype type =
      subarray(whole.length, t.box.length, minus(t.box.start, whole.start), data.dtype());
  MPI_Request req;
  MPI_Isend(data.raw(), 1, type, t.dst, tag(t.step, t.operand), comm_, &req);
  MPI_Type_free(&type);
  sends_.push_back(req);
  sent_[static_cast<std::size_t>(t.step)] +=
      t.box.size() * static_cast<std::int64_t>(dtype_bytes(data.dtype()));
}

// Binomial-tree reduction of the group's partial results onto its owner (position 0).
void Runner::aggregate(int v, Tensor& partial, Tensor* result) {
  StepState& st = steps_[static_cast<std::size_t>(v)];
  const int n = static_cast<int>(st.group.size()), i = st.position;
  const AggOp op = plan_.graph.steps[static_cast<std::size_t>(v)].agg;
  const auto bytes = static_cast<std::int64_t>(partial.bytes());
  const MPI_Datatype type = element_type(partial.dtype());
  const int count = as_int(partial.size(), "a block of");
  for (int stride = 1; stride < n; stride <<= 1) {
    if (i & stride) {
      MPI_Request req;
      MPI_Isend(partial.raw(), count, type, st.group[static_cast<std::size_t>(i - stride)],
                tag(v, 2), comm_, &req);
      sends_.push_back(req);
      sent_[static_cast<std::size_t>(v)] += bytes;
      in_flight_.push_back(std::move(partial));
      return;
    }
    if (i + stride < n) {
      Tensor other(partial.dtype(), partial.shape(), Tensor::Uninitialized{});
      std::vector<MPI_Request> req(1);
      MPI_Irecv(other.raw(), count, type, st.group[static_cast<std::size_t>(i + stride)], tag(v, 2),
                comm_, req.data());
      wait(req, "reducing the partial results of step '" +
                    plan_.graph.steps[static_cast<std::size_t>(v)].name + "'");
      received_[static_cast<std::size_t>(v)] += bytes;
      combine(partial, other, op);
    }
  }
  *result = std::move(partial);
}

Results Runner::run_kernel(int v, const Arrays& arrays) {
  StepState& st = steps_[static_cast<std::size_t>(v)];
  std::string refused;
  Results r = execute_kernel(Bound(st.kernel, arrays), st.choice, options_.threads, &refused);
  if (!refused.empty())
    std::cerr << "einsumdb: note: rank " << me_ << " on " << host_name() << ", step '"
              << plan_.graph.steps[static_cast<std::size_t>(v)].name
              << "': the stored transform does not run here (" << refused
              << "); using the default\n";
  return r;
}

void Runner::run_once(std::vector<double>& step_seconds) {
  const auto& g = plan_.graph;
  const int S = static_cast<int>(g.steps.size());
  operands_.clear();
  operands_.resize(static_cast<std::size_t>(S));
  receives_.assign(static_cast<std::size_t>(S), {});
  sent_.assign(static_cast<std::size_t>(S), 0);
  received_.assign(static_cast<std::size_t>(S), 0);
  results_.clear();
  step_seconds.assign(static_cast<std::size_t>(S), 0);

  auto t = Clock::now();
  if (overlap_) {
    Span span(*this, kSend, -1);
    for (int v = 0; v < S; ++v) post_receives(v);
    for (const auto& [name, blocks] : inputs_)
      for (const auto& [b, data] : blocks) deliver(name, b);
  }
  for (int v = 0; v < S; ++v) {
    const PlanStep& s = g.steps[static_cast<std::size_t>(v)];
    StepState& st = steps_[static_cast<std::size_t>(v)];
    if (!overlap_) {
      Span span(*this, kSend, v);
      post_receives(v);
      for (std::size_t id : from_[static_cast<std::size_t>(v)]) send(id);
      wait(sends_, "sending the operands of step '" + s.name + "'");
      in_flight_.clear();
    }
    {
      Span span(*this, kWait, v);
      wait(receives_[static_cast<std::size_t>(v)],
           "receiving the operands of step '" + s.name + "'");
    }

    Arrays arrays;
    auto& ops = operands_[static_cast<std::size_t>(v)];
    for (std::size_t k = 0; k < ops.size(); ++k)
      arrays.emplace(k == 0 ? "X" : "Y", Tensor::view(ops[k]));
    Results r = [&] {
      Span span(*this, kKernel, v);
      return run_kernel(v, arrays);
    }();
    arrays.clear();
    ops.clear();

    Tensor result;
    {
      Span span(*this, kReduce, v);
      aggregate(v, r.at(0), &result);
    }
    if (st.position == 0) {
      auto& slot = results_[s.name][st.result_block];
      slot = std::move(result);
      if (overlap_) {
        Span span(*this, kSend, v);
        deliver(s.name, st.result_block);
      }
    }
    progress();
    const auto now = Clock::now();
    step_seconds[static_cast<std::size_t>(v)] = std::chrono::duration<double>(now - t).count();
    t = now;
  }
  Span span(*this, kFinish, -1);
  wait(sends_, "finishing the sends of the last steps");
  in_flight_.clear();
}

void Runner::gather_whole(const std::vector<std::string>& names, int first_tag,
                          std::map<std::string, Tensor>& out, const std::string& what) {
  std::vector<MPI_Request> requests;
  for (std::size_t o = 0; o < names.size(); ++o) {
    const std::string& name = names[o];
    const Relation& rel = placement_.relations.at(name);
    const int v = plan_.graph.producer(name);
    const Dtype dtype = v < 0 ? plan_.graph.inputs.at(name).dtype
                              : plan_.graph.steps[static_cast<std::size_t>(v)].dtype;
    const int gtag = first_tag + 4 * static_cast<int>(o);
    Tensor* full = nullptr;
    if (me_ == 0) full = &out.emplace(name, Tensor(dtype, rel.blocking.shape)).first->second;
    for (std::int64_t b = 0; b < rel.blocking.blocks(); ++b) {
      const int owner = rel.owner[static_cast<std::size_t>(b)];
      const Region box = rel.blocking.region(b);
      if (owner == me_ && me_ == 0) {
        copy_box(owned(name, b), std::vector<std::int64_t>(box.start.size(), 0), *full, box.start,
                 box.length);
      } else if (owner == me_) {
        const Tensor& data = owned(name, b);
        MPI_Request req;
        MPI_Isend(data.raw(), as_int(data.size(), "a block of"), element_type(dtype), 0, gtag,
                  comm_, &req);
        requests.push_back(req);
      } else if (me_ == 0) {
        MPI_Datatype type = subarray(rel.blocking.shape, box.length, box.start, dtype);
        MPI_Request req;
        MPI_Irecv(full->raw(), 1, type, owner, gtag, comm_, &req);
        MPI_Type_free(&type);
        requests.push_back(req);
      }
    }
  }
  wait(requests, what);
}

void Runner::gather(DistributedReport& report) {
  const auto& g = plan_.graph;
  const int S = static_cast<int>(g.steps.size());
  gather_whole(g.outputs, tag(S, 3), report.outputs, "gathering the outputs on rank 0");
  if (!options_.gather_inputs) return;
  // Tags 4 * (S + O) + 1 on: free (ship_inputs uses + 0), and the plan check leaves room.
  std::vector<std::string> names;
  for (const auto& [name, t] : g.inputs)
    if (placement_.relations.count(name)) names.push_back(name);
  gather_whole(names, tag(S + static_cast<int>(g.outputs.size()), 1), report.inputs,
               "gathering the inputs on rank 0");
}

void Runner::collect(const std::vector<std::vector<double>>& runs, DistributedReport& report) {
  const std::size_t S = plan_.graph.steps.size(), R = runs.size();
  // Per rank: the step times of every run, then the bytes sent and received per step.
  std::vector<double> mine;
  for (const auto& run : runs) mine.insert(mine.end(), run.begin(), run.end());
  for (std::size_t v = 0; v < S; ++v) mine.push_back(static_cast<double>(sent_[v]));
  for (std::size_t v = 0; v < S; ++v) mine.push_back(static_cast<double>(received_[v]));
  std::vector<double> all(me_ == 0 ? mine.size() * static_cast<std::size_t>(procs_) : 0);
  std::vector<MPI_Request> req(1);
  MPI_Igather(mine.data(), static_cast<int>(mine.size()), MPI_DOUBLE, all.data(),
              static_cast<int>(mine.size()), MPI_DOUBLE, 0, comm_, req.data());
  wait(req, "collecting the measurements on rank 0");
  // What each rank ran: a stored transform may have been refused on some ranks only.
  nlohmann::json kernels = nlohmann::json::array();
  for (const auto& st : steps_)
    kernels.push_back({st.choice.transform.strategy, st.choice.transform.params, st.choice.source});
  const auto ran = gather_text(waiter_, kernels.dump(), "collecting the kernels on rank 0");
  if (me_ != 0) return;
  const std::size_t per = mine.size();
  report.seconds.assign(R, 0);
  report.steps.assign(S, {});
  for (std::size_t v = 0; v < S; ++v) {
    StepReport& sr = report.steps[v];
    const PlanStep& s = plan_.graph.steps[v];
    const StepChoice& c = plan_.choice[v];
    sr.predicted_bytes =
        (c.join + c.aggregation + c.repartition) * static_cast<double>(dtype_bytes(s.dtype));
    sr.kernel = steps_[v].choice;
    for (const auto& text : ran) {
      const auto k = nlohmann::json::parse(text).at(v);
      KernelChoice choice;
      choice.transform.strategy = k.at(0).get<std::string>();
      choice.transform.params = k.at(1);
      choice.source = k.at(2).get<std::string>();
      sr.kernels.push_back(std::move(choice));
    }
    std::vector<double> slowest(R, 0);
    for (int p = 0; p < procs_; ++p) {
      const double* row = all.data() + static_cast<std::size_t>(p) * per;
      std::vector<double> times;
      for (std::size_t k = 0; k < R; ++k) {
        times.push_back(row[k * S + v]);
        slowest[k] = std::max(slowest[k], row[k * S + v]);
      }
      RankStep rs;
      rs.seconds = summarize(times).median_s;
      rs.sent = static_cast<std::int64_t>(row[R * S + v]);
      rs.received = static_cast<std::int64_t>(row[R * S + S + v]);
      sr.sent += rs.sent;
      sr.ranks.push_back(rs);
    }
    sr.seconds = summarize(slowest).median_s;
  }
  for (std::size_t k = 0; k < R; ++k)
    for (int p = 0; p < procs_; ++p) {
      const double* row = all.data() + static_cast<std::size_t>(p) * per;
      double total = 0;
      for (std::size_t v = 0; v < S; ++v) total += row[k * S + v];
      report.seconds[k] = std::max(report.seconds[k], total);
    }
}

DistributedReport Runner::run() {
  DistributedReport report;
  const auto t0 = Clock::now();
  // Set-up can fail on one rank alone (its host lacks an input, say): the ranks agree first, so
  // that every rank learns of it and leaves instead of waiting for that rank's messages.
  std::optional<Refusal> refusal;
  std::string choices;
  try {
    choices = setup();
  } catch (const std::exception& e) {
    refusal = refusal_of(comm_, e);
  }
  agree(waiter_, refusal);
  take_kernels(broadcast_text(waiter_, choices, "sharing rank 0's choice of kernels"));
  ship_inputs();
  for (const auto& [name, t] : plan_.graph.inputs)
    if (options_.inputs.generated(name)) report.generated.push_back(name);
  ranks_share_cores_ = ranks_share_cores();
  waiter_ = Waiter(comm_, options_.timeout_s, ranks_share_cores_);
  overlap_ = options_.overlap == Overlap::on ||
             (options_.overlap == Overlap::automatic && !ranks_share_cores_);
  report.setup_seconds = since(t0);
  report.ranks_share_cores = ranks_share_cores_;
  report.overlap = overlap_;
  std::vector<std::vector<double>> runs;
  for (int k = 0; k < options_.repeat; ++k) {
    std::vector<MPI_Request> barrier(1);
    MPI_Ibarrier(comm_, barrier.data());
    wait(barrier, "waiting for every rank to start");
    if (k == 0) origin_ = Clock::now();
    run_ = k;
    runs.emplace_back();
    run_once(runs.back());
  }
  if (options_.gather || options_.gather_inputs) gather(report);
  collect(runs, report);
  if (options_.trace) report.trace = gather_trace();
  return report;
}

nlohmann::json Runner::gather_trace() {
  static constexpr const char* kNames[kPhases] = {"send", "wait", "kernel", "reduce",
                                                  "finish sends"};
  std::vector<double> mine;
  for (const Event& e : events_)
    mine.insert(mine.end(), {static_cast<double>(e.phase), static_cast<double>(e.step),
                             static_cast<double>(e.run), e.start, e.end});
  int count = static_cast<int>(mine.size());
  std::vector<int> counts(static_cast<std::size_t>(procs_)), offsets(counts.size(), 0);
  std::vector<MPI_Request> req(1);
  MPI_Igather(&count, 1, MPI_INT, counts.data(), 1, MPI_INT, 0, comm_, req.data());
  wait(req, "collecting the timelines on rank 0");
  std::size_t total = static_cast<std::size_t>(counts[0]);
  for (std::size_t r = 1; r < counts.size(); ++r) {
    offsets[r] = offsets[r - 1] + counts[r - 1];
    total += static_cast<std::size_t>(counts[r]);
  }
  std::vector<double> all(me_ == 0 ? total : 0);
  std::vector<MPI_Request> reqv(1);
  MPI_Igatherv(mine.data(), count, MPI_DOUBLE, all.data(), counts.data(), offsets.data(),
               MPI_DOUBLE, 0, comm_, reqv.data());
  wait(reqv, "collecting the timelines on rank 0");
  if (me_ != 0) return nullptr;
  nlohmann::json events = nlohmann::json::array();
  events.push_back({{"name", "process_name"},
                    {"ph", "M"},
                    {"pid", 0},
                    {"args", {{"name", "einsumdb run (" + std::to_string(procs_) + " ranks)"}}}});
  for (int r = 0; r < procs_; ++r) {
    events.push_back({{"name", "thread_name"},
                      {"ph", "M"},
                      {"pid", 0},
                      {"tid", r},
                      {"args", {{"name", "rank " + std::to_string(r)}}}});
    const auto begin = static_cast<std::size_t>(offsets[static_cast<std::size_t>(r)]);
    const auto end = begin + static_cast<std::size_t>(counts[static_cast<std::size_t>(r)]);
    for (std::size_t k = begin; k + 5 <= end; k += 5) {
      const int phase = static_cast<int>(all[k]), step = static_cast<int>(all[k + 1]);
      const std::string step_name =
          step < 0 ? std::string("run") : plan_.graph.steps[static_cast<std::size_t>(step)].name;
      events.push_back({{"name", std::string(kNames[phase]) + " " + step_name},
                        {"cat", kNames[phase]},
                        {"ph", "X"},
                        {"pid", 0},
                        {"tid", r},
                        {"ts", all[k + 3] * 1e6},
                        {"dur", (all[k + 4] - all[k + 3]) * 1e6},
                        {"args",
                         {{"step", step_name},
                          {"run", static_cast<int>(all[k + 2])},
                          {"phase", kNames[phase]}}}});
    }
  }
  return {{"traceEvents", events}, {"displayTimeUnit", "ms"}};
}

}  // namespace

bool StepReport::kernels_agree() const {
  for (const auto& k : kernels)
    if (k.transform.strategy != kernel.transform.strategy || k.source != kernel.source ||
        k.transform.params != kernel.transform.params)
      return false;
  return true;
}

DistributedReport run_distributed(const Plan& plan, const Placement& placement, MPI_Comm comm,
                                  const DistributedOptions& options) {
  Runner runner(plan, placement, comm, options);
  return runner.run();
}

}  // namespace einsumdb
