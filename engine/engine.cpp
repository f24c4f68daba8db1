#include "einsumdb/engine/engine.hpp"

#include <cstring>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <unordered_map>

#include "einsumdb/canon/parse.hpp"
#include "einsumdb/core/error.hpp"
#include "einsumdb/db/location.hpp"
#include "einsumdb/engine/this_machine.hpp"
#include "einsumdb/executor/permute.hpp"

namespace einsumdb {
namespace {

std::size_t operands_count(const BatchedEinsum& e) {
  return e.inputs.size();
}

// A numpy-style call's operands by the names of the prepared einsum's arrays.
std::map<std::string, TensorRef> named_operands(const Prepared& p,
                                                const std::vector<TensorRef>& operands);

std::string shape_text(const std::vector<std::int64_t>& shape) {
  std::string s = "(";
  for (std::size_t a = 0; a < shape.size(); ++a) s += (a ? ", " : "") + std::to_string(shape[a]);
  return s + (shape.size() == 1 ? ",)" : ")");
}

std::int64_t element_count(const std::vector<std::int64_t>& shape) {
  std::int64_t n = 1;
  for (auto l : shape) n *= l;
  return n;
}

std::vector<std::int64_t> strides_of(const TensorRef& t) {
  return t.strides.empty() ? kernels::row_major_strides(t.shape) : t.strides;
}

// Throws SpecError naming `what` for a view the executor cannot read; `need_data`: a null
// pointer is an error (a prepare() call describes shapes only).
void check_ref(const TensorRef& t, const std::string& what, bool need_data = true) {
  if (!t.strides.empty() && t.strides.size() != t.shape.size())
    throw SpecError(what + " has " + std::to_string(t.shape.size()) + " axes but " +
                    std::to_string(t.strides.size()) + " strides");
  for (std::size_t a = 0; a < t.shape.size(); ++a)
    if (t.shape[a] < 0)
      throw SpecError(what + " axis " + std::to_string(a) + " has negative length " +
                      std::to_string(t.shape[a]));
  if (need_data && !t.data && element_count(t.shape) > 0)
    throw SpecError(what + " has no data (null pointer)");
  if (!executable_dtype(t.dtype))
    throw SpecError(what + " has dtype " + std::string(to_string(t.dtype)) +
                    "; the executor computes in f32, f64, c64 and c128");
  if (reinterpret_cast<std::uintptr_t>(t.data) % dtype_bytes(t.dtype) != 0)
    throw SpecError(what + " is not aligned to its element size");
}

// The caller's array as a tensor: in place when row-major, else a row-major copy.
Tensor to_tensor(const TensorRef& t) {
  if (t.row_major()) return Tensor::borrow(t.dtype, t.shape, t.data);
  Tensor copy(t.dtype, t.shape, Tensor::Uninitialized{});
  if (copy.size() > 0)
    kernels::copy_layout(t.data, strides_of(t), copy.raw(), copy.strides(), t.shape,
                         dtype_bytes(t.dtype));
  return copy;
}

void copy_out(const Tensor& result, const TensorRef& out, std::size_t row) {
  const std::string what = "output " + std::to_string(row);
  check_ref(out, what);
  if (out.shape != result.shape())
    throw SpecError(what + " has shape " + shape_text(out.shape) + "; the result has shape " +
                    shape_text(result.shape()));
  if (out.dtype != result.dtype())
    throw SpecError(what + " has dtype " + std::string(to_string(out.dtype)) + "; the result is " +
                    std::string(to_string(result.dtype())));
  if (result.size() == 0) return;
  if (out.row_major()) {
    std::memcpy(out.data, result.raw(), result.bytes());
    return;
  }
  kernels::copy_layout(result.raw(), result.strides(), out.data, strides_of(out), out.shape,
                       dtype_bytes(out.dtype));
}

// A text that identifies a spelling with its lengths and dtypes (the cache key): cheap to build,
// equal for equal einsums.
std::string spec_key(const BatchedEinsum& e) {
  std::string k = e.einsum_string();
  k += '|';
  k += to_string(e.join);
  k += ',';
  k += to_string(e.agg);
  for (const auto& row : e.batch) {
    k += '|';
    for (const auto& name : row) k += name + ',';
  }
  for (const auto& [name, info] : e.arrays) {
    k += '|' + name + ':' + std::string(to_string(info.dtype));
    for (const auto& l : info.shape) k += ',' + to_string(l);
  }
  return k;
}

// The array of each operand of a numpy-style call: T<k>, or the earlier operand's name when the
// same memory is passed again with the same dtype, shape and strides.
std::vector<std::size_t> alias_of(const std::vector<TensorRef>& operands) {
  std::vector<std::size_t> alias(operands.size());
  for (std::size_t k = 0; k < operands.size(); ++k) {
    alias[k] = k;
    for (std::size_t j = 0; j < k; ++j)
      if (operands[k].data && operands[j].data == operands[k].data &&
          operands[j].dtype == operands[k].dtype && operands[j].shape == operands[k].shape &&
          strides_of(operands[j]) == strides_of(operands[k])) {
        alias[k] = alias[j];
        break;
      }
  }
  return alias;
}

std::string operand_name(std::size_t k) {
  return "T" + std::to_string(k);
}

// numpy's broadcasting rule in the caller's terms: every index has one length among the operands
// that give it a length other than 1. Throws SpecError naming the operands and axes (and, for the
// axes "..." stands for, the ellipsis) before the model, whose arrays the caller never named.
void check_broadcast(std::string_view subscripts, const EinsumPattern& expanded,
                     const std::vector<TensorRef>& operands) {
  const EinsumPattern given = parse_einsum_pattern(subscripts);
  auto where = [&](std::size_t k, std::size_t a) {
    std::string w = "operand " + std::to_string(k) + " axis " + std::to_string(a);
    const int at = given.ellipsis[k];
    const std::size_t extra = expanded.inputs[k].size() - given.inputs[k].size();
    if (at >= 0 && a >= static_cast<std::size_t>(at) && a < static_cast<std::size_t>(at) + extra)
      w += " (under '...')";
    return w;
  };
  std::map<char, std::pair<std::size_t, std::size_t>> first;  // index -> (operand, axis)
  for (std::size_t k = 0; k < operands.size(); ++k)
    for (std::size_t a = 0; a < expanded.inputs[k].size(); ++a) {
      const std::int64_t n = operands[k].shape[a];
      if (n == 1) continue;
      const char c = expanded.inputs[k][a];
      const auto [it, added] = first.emplace(c, std::make_pair(k, a));
      if (added) continue;
      const auto [k0, a0] = it->second;
      const std::int64_t n0 = operands[k0].shape[a0];
      if (n0 == n) continue;
      const bool fresh = given.inputs[k].find(c) == std::string::npos;
      throw SpecError(
          "einsum '" + std::string(subscripts) + "': operands could not be broadcast together: " +
          (fresh ? std::string("an axis under '...'") : "index '" + std::string(1, c) + "'") +
          " has length " + std::to_string(n0) + " at " + where(k0, a0) + " but length " +
          std::to_string(n) + " at " + where(k, a) + " (lengths must be equal, or 1 to broadcast)");
    }
}

// `t` without `axes` (each of length 1): the same elements, a view.
TensorRef drop_axes(const TensorRef& t, const std::vector<std::size_t>& axes,
                    const std::string& what) {
  TensorRef out;
  out.dtype = t.dtype;
  out.data = t.data;
  const auto strides = strides_of(t);
  for (std::size_t a = 0; a < t.shape.size(); ++a) {
    if (std::find(axes.begin(), axes.end(), a) != axes.end()) {
      if (t.shape[a] != 1)
        throw SpecError(what + " axis " + std::to_string(a) + " has length " +
                        std::to_string(t.shape[a]) +
                        "; the einsum was prepared for a broadcast axis of length 1");
      continue;
    }
    out.shape.push_back(t.shape[a]);
    out.strides.push_back(strides[a]);
  }
  return out;
}

}  // namespace

bool TensorRef::row_major() const {
  if (strides.empty()) return true;
  std::int64_t expect = 1;
  for (std::size_t a = shape.size(); a-- > 0;) {
    if (shape[a] != 1 && strides[a] != expect) return false;
    expect *= shape[a];
  }
  return true;
}

Prepared::Prepared(BatchedEinsum e, Choice choice, DroppedAxes dropped)
    : einsum_(std::move(e)), choice_(std::move(choice)), dropped_(std::move(dropped)) {
  dtype_ = result_dtype(einsum_, 0);
  bool concrete = true;
  for (const auto& [c, l] : einsum_.index_lengths()) concrete = concrete && !l.symbolic();
  if (concrete) {
    const auto lengths = einsum_.index_lengths();
    for (char c : einsum_.output) shape_.push_back(lengths.at(c).value);
  }
  if (choice_.candidate.strategy != "direct" || DirectLoops::rejects(einsum_)) return;
  direct_.emplace(einsum_);
  for (const auto& name : einsum_.batch[0]) {
    const auto& info = einsum_.arrays.at(name);
    const auto drop = dropped_.find(name);
    const std::size_t rank = info.shape.size() + (drop == dropped_.end() ? 0 : drop->second.size());
    std::vector<bool> mask(rank, false);
    if (drop != dropped_.end())
      for (auto a : drop->second) mask[a] = true;
    std::vector<std::int64_t> shape;
    for (std::size_t a = 0, kept = 0; a < rank; ++a)
      shape.push_back(mask[a] ? 1 : info.shape[kept++].value);
    dropped_axes_.push_back(std::move(mask));
    operand_shapes_.push_back(std::move(shape));
  }
}

void Prepared::run_direct(const std::vector<TensorRef>& operands, const TensorRef& out) const {
  EINSUMDB_ASSERT(direct_, "run_direct on a prepared einsum that is not direct");
  const std::size_t n = operands_count(einsum_);
  if (operands.size() != n)
    throw SpecError("the einsum has " + std::to_string(n) + " operand(s); " +
                    std::to_string(operands.size()) + " were given");
  const void* data[DirectLoops::kMaxOperands];
  std::int64_t strides[DirectLoops::kMaxOperands][DirectLoops::kMaxIndices];
  const std::int64_t* stride_of[DirectLoops::kMaxOperands];
  for (std::size_t k = 0; k < n; ++k) {
    const TensorRef& t = operands[k];
    if (t.dtype != dtype_)
      throw SpecError("operand " + std::to_string(k) + " has dtype " +
                      std::string(to_string(t.dtype)) + "; the einsum was prepared for " +
                      std::string(to_string(dtype_)));
    if (t.shape != operand_shapes_[k])
      throw SpecError("operand " + std::to_string(k) + " has shape " + shape_text(t.shape) +
                      "; the einsum was prepared for " + shape_text(operand_shapes_[k]));
    if (!t.data && !t.shape.empty() &&
        std::find(t.shape.begin(), t.shape.end(), 0) == t.shape.end())
      throw SpecError("operand " + std::to_string(k) + " has no data (null pointer)");
    data[k] = t.data;
    // The strides of the kept axes, in order (row-major where the caller gave none).
    std::size_t at = 0;
    for (std::size_t a = 0; a < t.shape.size(); ++a) at += dropped_axes_[k][a] ? 0 : 1;
    std::int64_t row_major = 1;
    for (std::size_t a = t.shape.size(); a-- > 0;) {
      const std::int64_t s = t.strides.empty() ? row_major : t.strides[a];
      row_major *= t.shape[a];
      if (!dropped_axes_[k][a]) strides[k][--at] = s;
    }
    stride_of[k] = strides[k];
  }
  if (out.shape != shape_)
    throw SpecError("output 0 has shape " + shape_text(out.shape) + "; the result has shape " +
                    shape_text(shape_));
  if (out.dtype != dtype_)
    throw SpecError("output 0 has dtype " + std::string(to_string(out.dtype)) + "; the result is " +
                    std::string(to_string(dtype_)));
  direct_->run(data, stride_of, out.data, out.strides.empty() ? nullptr : out.strides.data());
}

Results Prepared::run(const std::map<std::string, TensorRef>& inputs,
                      const Candidate* instead) const {
  for (const auto& [name, ref] : inputs)
    if (!einsum_.arrays.count(name)) throw SpecError("the einsum has no array '" + name + "'");
  Arrays arrays;
  for (const auto& [name, info] : einsum_.arrays) {
    const auto it = inputs.find(name);
    if (it == inputs.end()) throw SpecError("no data for array '" + name + "'");
    const std::string what = "array '" + name + "'";
    check_ref(it->second, what);
    const TensorRef* given = &it->second;
    TensorRef squeezed;
    if (const auto drop = dropped_.find(name); drop != dropped_.end()) {
      squeezed = drop_axes(*given, drop->second, what);
      given = &squeezed;
    }
    const TensorRef& ref = *given;
    if (ref.dtype != info.dtype)
      throw SpecError(what + " has dtype " + std::string(to_string(ref.dtype)) +
                      "; the einsum was prepared for " + std::string(to_string(info.dtype)));
    if (ref.shape.size() != info.shape.size())
      throw SpecError(what + " has " + std::to_string(ref.shape.size()) + " axes; the einsum has " +
                      std::to_string(info.shape.size()));
    arrays.emplace(name, to_tensor(ref));
  }
  const Bound bound(einsum_, arrays);  // checks every length against the einsum and each other
  if (instead) return execute(bound, instead->strategy, instead->params);
  Candidate candidate = choice_.candidate;
  return execute_or_default(bound, candidate, choice_.stored);
}

void Prepared::run(const std::map<std::string, TensorRef>& inputs,
                   const std::vector<TensorRef>& outputs, const Candidate* instead) const {
  if (outputs.size() != einsum_.batch.size())
    throw SpecError("the einsum has " + std::to_string(einsum_.batch.size()) + " row(s); " +
                    std::to_string(outputs.size()) + " output(s) were given");
  const Results results = run(inputs, instead);
  for (std::size_t r = 0; r < results.size(); ++r) copy_out(results[r], outputs[r], r);
}

struct Engine::Impl {
  EngineOptions options;
  std::string path;

  std::mutex store_mutex;  // the store connection and canonicalization (nauty) are one thread's
  bool store_opened = false;
  std::optional<Store> store;

  mutable std::shared_mutex cache_mutex;
  std::unordered_map<std::string, std::shared_ptr<const Prepared>> cache;

  std::shared_ptr<const Prepared> lookup(const std::string& key) const {
    std::shared_lock lock(cache_mutex);
    const auto it = cache.find(key);
    return it == cache.end() ? nullptr : it->second;
  }

  std::shared_ptr<const Prepared> prepare(const std::string& key, BatchedEinsum e,
                                          DroppedAxes dropped) {
    Choice choice;
    {
      std::lock_guard lock(store_mutex);
      if (!store_opened) {
        store = open_store_for_reading(path);
        store_opened = true;
      }
      ChooseOptions o;
      o.nearest = options.nearest;
      o.threads = options.threads;
      choice = choose_transform(store ? &*store : nullptr, e, this_machine().fingerprint(), o);
      if (!store) choice.reason = "no database at " + path;
    }
    auto prepared =
        std::make_shared<const Prepared>(std::move(e), std::move(choice), std::move(dropped));
    std::unique_lock lock(cache_mutex);
    if (cache.size() >= options.max_prepared) cache.clear();
    return cache.emplace(key, std::move(prepared)).first->second;
  }
};

Engine::Engine(EngineOptions options) : impl_(std::make_unique<Impl>()) {
  impl_->path = einsumdb::store_path(options.db);
  impl_->options = std::move(options);
}

Engine::~Engine() = default;

std::shared_ptr<const Prepared> Engine::prepare(const BatchedEinsum& e) {
  std::string key = spec_key(e);
  if (auto p = impl_->lookup(key)) return p;
  BatchedEinsum broadcast = e;
  DroppedAxes dropped = drop_broadcast_axes(broadcast);
  validate(broadcast);
  return impl_->prepare(key, std::move(broadcast), std::move(dropped));
}

std::shared_ptr<const Prepared> Engine::prepare(std::string_view subscripts,
                                                const std::vector<TensorRef>& operands) {
  for (std::size_t k = 0; k < operands.size(); ++k)
    check_ref(operands[k], "operand " + std::to_string(k), false);
  const auto alias = alias_of(operands);
  std::string key(subscripts);
  for (std::size_t k = 0; k < operands.size(); ++k) {
    key += '|';
    key += to_string(operands[k].dtype);
    key += ':' + std::to_string(alias[k]);
    for (auto l : operands[k].shape) key += ',' + std::to_string(l);
  }
  if (auto p = impl_->lookup(key)) return p;

  std::vector<std::size_t> ranks;
  for (const auto& t : operands) ranks.push_back(t.shape.size());
  const EinsumPattern pattern =
      expand_ellipsis(parse_einsum_pattern(subscripts), ranks, subscripts);
  std::vector<std::pair<std::string, ArrayInfo>> described;
  for (std::size_t k = 0; k < operands.size(); ++k) {
    ArrayInfo info;
    info.dtype = operands[k].dtype;
    for (auto l : operands[k].shape) info.shape.push_back(Length::of(l));
    described.emplace_back(operand_name(k), std::move(info));
  }
  check_broadcast(subscripts, pattern, operands);
  BatchedEinsum e = one_row_einsum(pattern.inputs, pattern.output, described);
  DroppedAxes dropped = drop_broadcast_axes(e);
  // An operand passed again (the same memory) is the earlier one's array, unless broadcasting
  // dropped other axes of it in the two uses (then they are two arrays of one buffer).
  auto& row = e.batch[0];
  for (std::size_t k = 0; k < operands.size(); ++k) {
    if (alias[k] == k) continue;
    const std::string mine = operand_name(k), theirs = operand_name(alias[k]);
    const auto a = dropped.find(mine), b = dropped.find(theirs);
    const bool same = (a == dropped.end() && b == dropped.end()) ||
                      (a != dropped.end() && b != dropped.end() && a->second == b->second);
    if (!same) continue;
    row[k] = theirs;
    e.arrays.erase(mine);
    dropped.erase(mine);
  }
  validate(e);
  return impl_->prepare(key, std::move(e), std::move(dropped));
}

namespace {

std::map<std::string, TensorRef> named_operands(const Prepared& p,
                                                const std::vector<TensorRef>& operands) {
  for (std::size_t k = 0; k < operands.size(); ++k)
    check_ref(operands[k], "operand " + std::to_string(k));
  std::map<std::string, TensorRef> inputs;
  const auto& row = p.einsum().batch[0];
  for (std::size_t k = 0; k < operands.size(); ++k) inputs.emplace(row[k], operands[k]);
  return inputs;
}

}  // namespace

Tensor Prepared::run_call(const std::vector<TensorRef>& operands) const {
  if (direct()) {
    Tensor out(dtype_, shape_, Tensor::Uninitialized{});
    run_direct(operands, {out.dtype(), out.raw(), out.shape(), {}});
    return out;
  }
  Results r = run(named_operands(*this, operands));
  return std::move(r[0]);
}

void Prepared::run_call(const std::vector<TensorRef>& operands, const TensorRef& out) const {
  if (direct()) {
    check_ref(out, "output 0");
    return run_direct(operands, out);
  }
  run(named_operands(*this, operands), {out});
}

Tensor Engine::einsum(std::string_view subscripts, const std::vector<TensorRef>& operands) {
  return prepare(subscripts, operands)->run_call(operands);
}

void Engine::einsum(std::string_view subscripts, const std::vector<TensorRef>& operands,
                    const TensorRef& out) {
  prepare(subscripts, operands)->run_call(operands, out);
}

Results Engine::einsum(const BatchedEinsum& e, const std::map<std::string, TensorRef>& inputs) {
  return prepare(e)->run(inputs);
}

void Engine::einsum(const BatchedEinsum& e, const std::map<std::string, TensorRef>& inputs,
                    const std::vector<TensorRef>& outputs) {
  prepare(e)->run(inputs, outputs);
}

void Engine::forget() {
  std::unique_lock lock(impl_->cache_mutex);
  impl_->cache.clear();
  std::lock_guard store_lock(impl_->store_mutex);
  impl_->store.reset();
  impl_->store_opened = false;
}

std::size_t Engine::prepared_count() const {
  std::shared_lock lock(impl_->cache_mutex);
  return impl_->cache.size();
}

const std::string& Engine::store_path() const {
  return impl_->path;
}

const Machine& Engine::machine() const {
  return this_machine();
}

}  // namespace einsumdb
