#include "einsumdb/engine/engine.hpp"

#include <cstring>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <unordered_map>

#include "einsumdb/canon/error.hpp"
#include "einsumdb/canon/parse.hpp"
#include "einsumdb/db/location.hpp"
#include "einsumdb/engine/machine.hpp"
#include "einsumdb/executor/permute.hpp"

namespace einsumdb {
namespace {

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
                    "; the executor computes in f32 and f64");
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

Prepared::Prepared(BatchedEinsum e, Choice choice)
    : einsum_(std::move(e)), choice_(std::move(choice)) {}

Results Prepared::run(const std::map<std::string, TensorRef>& inputs,
                      const Candidate* instead) const {
  for (const auto& [name, ref] : inputs)
    if (!einsum_.arrays.count(name)) throw SpecError("the einsum has no array '" + name + "'");
  Arrays arrays;
  for (const auto& [name, info] : einsum_.arrays) {
    const auto it = inputs.find(name);
    if (it == inputs.end()) throw SpecError("no data for array '" + name + "'");
    const TensorRef& ref = it->second;
    const std::string what = "array '" + name + "'";
    check_ref(ref, what);
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

  std::shared_ptr<const Prepared> prepare(const std::string& key, BatchedEinsum e) {
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
    auto prepared = std::make_shared<const Prepared>(std::move(e), std::move(choice));
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
  validate(e);
  return impl_->prepare(key, e);
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

  const EinsumPattern pattern = parse_einsum_pattern(subscripts);
  if (pattern.inputs.size() != operands.size())
    throw SpecError("einsum '" + std::string(subscripts) + "' has " +
                    std::to_string(pattern.inputs.size()) + " operand(s); " +
                    std::to_string(operands.size()) + " were given");
  std::vector<std::pair<std::string, ArrayInfo>> described;
  for (std::size_t k = 0; k < operands.size(); ++k) {
    if (operands[k].shape.size() != pattern.inputs[k].size())
      throw SpecError("operand " + std::to_string(k) + " has " +
                      std::to_string(operands[k].shape.size()) + " axes but its subscripts '" +
                      pattern.inputs[k] + "' have " + std::to_string(pattern.inputs[k].size()));
    ArrayInfo info;
    info.dtype = operands[k].dtype;
    for (auto l : operands[k].shape) info.shape.push_back(Length::of(l));
    described.emplace_back(operand_name(alias[k]), std::move(info));
  }
  BatchedEinsum e = one_row_einsum(pattern.inputs, pattern.output, described);
  validate(e);
  return impl_->prepare(key, std::move(e));
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

Tensor Engine::einsum(std::string_view subscripts, const std::vector<TensorRef>& operands) {
  const auto p = prepare(subscripts, operands);
  Results r = p->run(named_operands(*p, operands));
  return std::move(r[0]);
}

void Engine::einsum(std::string_view subscripts, const std::vector<TensorRef>& operands,
                    const TensorRef& out) {
  const auto p = prepare(subscripts, operands);
  p->run(named_operands(*p, operands), {out});
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
