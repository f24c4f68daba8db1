// einsumdb._einsumdb: the C++ core of the Python module, over the library's Engine, Store, tuner
// and planner. numpy arrays cross without copies where their layout allows (float32/float64,
// strides a multiple of the item size); results come back as numpy arrays that own the engine's
// result memory. The GIL is released while canonicalizing, executing, tuning and planning.
// Answers that are objects of the model (an answer from the store, a canonical form, the engine's
// choice, a tune report and its results, a workload of the store's list) cross as typed objects
// over the library's own structs; documents (spec forms, parameters, store rows, plan files)
// cross as Python dicts and lists (pybind11_json's conversion), and specs, graphs and
// measurements given as dicts are read as JSON values, never through JSON text.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <pybind11_json/pybind11_json.hpp>

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <sstream>
#include <variant>

#include "einsumdb/canon/canonicalize.hpp"
#include "einsumdb/canon/parse.hpp"
#include "einsumdb/core/error.hpp"
#include "einsumdb/db/error.hpp"
#include "einsumdb/db/feinsum.hpp"
#include "einsumdb/db/location.hpp"
#include "einsumdb/db/record_lines.hpp"
#include "einsumdb/db/retrieve.hpp"
#include "einsumdb/engine/engine.hpp"
#include "einsumdb/engine/this_machine.hpp"
#include "einsumdb/planner/eindecomp.hpp"
#include "einsumdb/planner/eingraph.hpp"
#include "einsumdb/planner/placement.hpp"
#include "einsumdb/planner/plan_file.hpp"
#include "einsumdb/tuner/tuner.hpp"

namespace py = pybind11;
using namespace einsumdb;
using json = nlohmann::json;
using ojson = nlohmann::ordered_json;

namespace {

// One Engine per store path and thread setting, shared by every call (an Engine is
// thread-safe); engines live as long as the module.
std::mutex engines_mutex;
std::map<std::pair<std::string, int>, std::unique_ptr<Engine>> engines;

Engine& engine_for(const std::string& db, int threads) {
  // The default store without a thread override, as most calls ask: the engine of the last such
  // call of this thread, while $EINSUMDB_DB says the same (engines live as long as the module).
  thread_local std::string last_env;
  thread_local Engine* last_engine = nullptr;
  const char* env = std::getenv("EINSUMDB_DB");
  const bool by_default = db.empty() && threads == 0;
  if (by_default && last_engine && last_env == (env ? env : "")) return *last_engine;
  std::lock_guard lock(engines_mutex);
  auto& e = engines[{store_path(db), threads}];
  if (!e) {
    EngineOptions o;
    o.db = db;
    o.threads = threads;
    e = std::make_unique<Engine>(o);
  }
  if (by_default) {
    last_env = env ? env : "";
    last_engine = e.get();
  }
  return *e;
}

// After facts were written to a store: its engines ask it again.
void forget(const std::string& path) {
  std::lock_guard lock(engines_mutex);
  for (auto& [key, engine] : engines)
    if (key.first == path) engine->forget();
}

template <typename Name>
Dtype dtype_of(const py::array& a, const Name& what) {
  const char kind = a.dtype().kind();
  const auto size = a.dtype().itemsize();
  if (kind == 'f' && size == 8) return Dtype::f64;
  if (kind == 'f' && size == 4) return Dtype::f32;
  if (kind == 'c' && size == 16) return Dtype::c128;
  if (kind == 'c' && size == 8) return Dtype::c64;
  throw py::type_error(what() + " has dtype " + std::string(py::str(a.dtype())) +
                       "; einsumdb computes natively in float32, float64, complex64 and "
                       "complex128 (convert it with .astype)");
}

// A view of a numpy array; nullopt when its strides are not whole elements (the caller then
// passes a contiguous copy).
template <typename Name>
TensorRef ref_of(const py::array& a, const Name& what) {
  TensorRef r;
  r.dtype = dtype_of(a, what);
  r.data = const_cast<void*>(a.data());
  const auto item = static_cast<py::ssize_t>(a.itemsize());
  for (py::ssize_t k = 0; k < a.ndim(); ++k) {
    r.shape.push_back(a.shape(k));
    if (a.strides(k) % item != 0)
      throw py::value_error(what() + " has strides that are not whole elements");
    r.strides.push_back(a.strides(k) / item);
  }
  return r;
}

// A numpy array that owns `t` (no copy).
py::array to_numpy(Tensor t) {
  auto* owned = new Tensor(std::move(t));
  py::capsule free(owned, [](void* p) { delete static_cast<Tensor*>(p); });
  std::vector<py::ssize_t> shape(owned->shape().begin(), owned->shape().end());
  return with_element_type(owned->dtype(), [&](auto zero) -> py::array {
    using T = decltype(zero);
    return py::array_t<T>(shape, owned->data<T>(), free);
  });
}

// Any array-like as an ndarray the engine reads in place: float32/float64 in native byte order
// with strides of whole elements; a float array of another byte order or with odd strides is
// copied into a C-contiguous one; any other dtype is a TypeError naming the operand.
template <typename Name>
py::array readable(const py::handle& obj, const Name& what) {
  py::array a = py::array::ensure(obj);
  if (!a) throw py::type_error(what() + " is not an array");
  const Dtype dtype = dtype_of(a, what);  // throws, naming it, for a dtype not computed in
  const auto size = a.itemsize();
  bool fine = a.dtype().byteorder() != '>';
  for (py::ssize_t k = 0; fine && k < a.ndim(); ++k) fine = a.strides(k) % size == 0;
  if (fine) return a;
  return with_element_type(dtype, [&](auto zero) -> py::array {
    using T = decltype(zero);
    return py::array_t<T, py::array::c_style | py::array::forcecast>::ensure(a);
  });
}

std::vector<TensorRef> refs_of(const std::vector<py::array>& operands) {
  std::vector<TensorRef> refs;
  for (std::size_t k = 0; k < operands.size(); ++k)
    refs.push_back(ref_of(operands[k], [k] { return "operand " + std::to_string(k); }));
  return refs;
}

// A Python value (dict, list, str, number, bool, None) as a JSON value, for the parsers that take
// one. The conversion recurses, so nesting deeper than the parsers allow is refused first, by a
// walk that stops at that depth.
bool nested_deeper(const py::handle& value, std::size_t depth) {
  if (depth > kMaxJsonDepth) return true;
  if (py::isinstance<py::dict>(value)) {
    for (const auto& item : py::reinterpret_borrow<py::dict>(value))
      if (nested_deeper(item.second, depth + 1)) return true;
  } else if (py::isinstance<py::list>(value) || py::isinstance<py::tuple>(value)) {
    for (const auto& item : value)
      if (nested_deeper(item, depth + 1)) return true;
  }
  return false;
}

json json_value(const py::handle& value, const std::string& what) {
  if (nested_deeper(value, 1))
    throw SpecError(what + ": nested deeper than " + std::to_string(kMaxJsonDepth));
  try {
    return pyjson::to_json(value);
  } catch (const std::runtime_error& e) {  // a value JSON has no form for (a set, an object)
    throw SpecError(what + ": " + e.what());
  }
}

// A spec as the module's functions take it: JSON text, or the spec as a dict.
BatchedEinsum spec_of(const py::handle& spec) {
  if (py::isinstance<py::str>(spec)) return parse_spec_text(spec.cast<std::string>());
  return parse_spec_json(json_value(spec, "the spec"));
}

// einsum(..., transform=NAME, params={...}): that strategy instead of the store's choice. A
// parameter value that is a string is read as the CLI's --param KEY=VALUE (order="ikj",
// tile="e:256"); any other value as its JSON.
py::object run_chosen(Engine& engine, const std::string& subscripts,
                      const std::vector<TensorRef>& refs, Candidate chosen,
                      const py::object& params, const py::object& out, int threads) {
  if (!params.is_none()) {
    for (const auto& [key, value] : params.cast<py::dict>()) {
      const std::string k = py::str(key);
      if (py::isinstance<py::str>(value))
        apply_param(chosen.params, k + "=" + value.cast<std::string>());
      else
        chosen.params[k] = json_value(value, "params['" + k + "']");
    }
  }
  if (threads > 0) chosen.params["threads"] = threads;
  const auto p = engine.prepare(subscripts, refs);
  std::map<std::string, TensorRef> inputs;
  for (std::size_t k = 0; k < refs.size(); ++k) inputs.emplace(p->einsum().batch[0][k], refs[k]);
  if (!out.is_none()) {
    auto o = out.cast<py::array>();
    if (!o.writeable()) throw py::value_error("out is read-only");
    const std::vector<TensorRef> outs{ref_of(o, [] { return std::string("out"); })};
    py::gil_scoped_release release;
    p->run(inputs, outs, &chosen);
    return out;
  }
  Results r;
  {
    py::gil_scoped_release release;
    r = p->run(inputs, &chosen);
  }
  return to_numpy(std::move(r[0]));
}

// The core on operands of one dtype the executor computes in: the result as a new array (0-d for
// a full contraction), or written into `out` (of the result's shape and dtype).
py::object native_einsum(const std::string& subscripts, const std::vector<py::array>& operands,
                         const py::object& out, const std::string& db, int threads,
                         const std::optional<Candidate>& chosen, const py::object& params) {
  const auto refs = refs_of(operands);
  Engine& engine = engine_for(db, threads);
  if (!params.is_none() && !chosen) throw SpecError("params= goes with transform=NAME");
  if (chosen) return run_chosen(engine, subscripts, refs, *chosen, params, out, threads);
  const auto p = engine.prepare(subscripts, refs);
  if (p->direct()) {  // a small workload: its loops on the arrays as they lie, no GIL release
    py::array result;
    if (out.is_none())
      result = with_element_type(p->dtype(), [&](auto zero) -> py::array {
        return py::array_t<decltype(zero)>(
            std::vector<py::ssize_t>(p->shape().begin(), p->shape().end()));
      });
    else
      result = out.cast<py::array>();
    if (!result.writeable()) throw py::value_error("out is read-only");
    p->run_direct(refs, ref_of(result, [] { return std::string("out"); }));
    return result;
  }
  if (!out.is_none()) {
    auto o = out.cast<py::array>();
    if (!o.writeable()) throw py::value_error("out is read-only");
    const TensorRef oref = ref_of(o, [] { return std::string("out"); });
    {
      py::gil_scoped_release release;
      p->run_call(refs, oref);
    }
    return out;
  }
  Tensor t;
  {
    py::gil_scoped_release release;
    t = p->run_call(refs);
  }
  return to_numpy(std::move(t));
}

// numpy.ndarray, exactly (a subclass goes the full way: numpy returns a plain ndarray for it).
bool plain_ndarray(const py::handle& h) {
  static const py::handle type = py::object(py::module_::import("numpy").attr("ndarray")).release();
  return Py_TYPE(h.ptr()) == reinterpret_cast<PyTypeObject*>(type.ptr());
}

// Whether the executor computes in an array's dtype as it lies (native byte order).
bool native_dtype(const py::array& a) {
  const char kind = a.dtype().kind();
  const auto size = a.itemsize();
  return ((kind == 'f' && (size == 4 || size == 8)) ||
          (kind == 'c' && (size == 8 || size == 16))) &&
         a.dtype().byteorder() != '>';
}

// einsumdb.einsum(subscripts, *operands, **kwargs): numpy.einsum's whole call. The common call
// (subscripts and arrays of one float32, float64, complex64 or complex128 dtype; out=, if given,
// of that dtype; optimize= a bool or a name) runs here, in C++, so that a repeated small call pays
// no Python layer; every other call goes to einsumdb._numpy_einsum.einsum, which gives numpy's
// behaviour for the rest of the contract (sublists, dtype=, casting=, order=, explicit paths,
// mixed and other dtypes).
// The subscripts of numpy's interleaved form (op0, sublist0, op1, sublist1, ..., [sublistout]),
// and its operands; nullopt where a sublist is anything but integers in [0, 52) and Ellipsis
// (the full path then raises numpy's error). numpy's letters: 0-25 are 'A'-'Z', 26-51 'a'-'z'.
std::optional<std::string> sublist_subscripts(const py::args& args, std::vector<py::handle>& ops) {
  static const py::handle ellipsis = py::ellipsis().release();
  auto term = [&](const py::handle& list, std::string& out) {
    if (!py::isinstance<py::list>(list) && !py::isinstance<py::tuple>(list)) return false;
    for (const auto& item : py::reinterpret_borrow<py::sequence>(list)) {
      if (item.ptr() == ellipsis.ptr()) {
        out += "...";
        continue;
      }
      if (!PyLong_Check(item.ptr())) return false;
      const long v = PyLong_AsLong(item.ptr());
      if (v < 0 || v >= 52) return false;
      out += static_cast<char>(v < 26 ? 'A' + v : 'a' + (v - 26));
    }
    return true;
  };
  std::string text;
  const std::size_t n = args.size();
  for (std::size_t k = 0; k + 1 < n; k += 2) {
    if (k) text += ',';
    ops.push_back(args[k]);
    if (!term(args[k + 1], text)) return std::nullopt;
  }
  if (n % 2 == 1) {
    text += "->";
    if (!term(args[n - 1], text)) return std::nullopt;
  }
  return text;
}

// einsumdb.einsum(subscripts, *operands, **kwargs): numpy.einsum's whole call. The common call
// (subscripts or sublists, and arrays of float32, float64, complex64 and complex128, promoted to
// one of them as numpy promotes; out=, if given, of that dtype; optimize= a bool or a name) runs
// here, in C++, so that a repeated small call pays no Python layer; every other call goes to
// einsumdb._numpy_einsum.einsum, which gives numpy's behaviour for the rest of the contract
// (dtype=, casting=, order=, explicit paths, other dtypes, one operand's views, errors).
py::object einsum_call(const py::args& args, const py::kwargs& kwargs) {
  static const py::handle full =
      py::object(py::module_::import("einsumdb._numpy_einsum").attr("einsum")).release();
  auto slow = [&] { return full(*args, **kwargs); };
  if (args.size() < 2) return slow();
  std::string subscripts;
  std::vector<py::handle> given;
  if (py::isinstance<py::str>(args[0])) {
    subscripts = args[0].cast<std::string>();
    for (std::size_t k = 1; k < args.size(); ++k) given.push_back(args[k]);
  } else if (auto text = sublist_subscripts(args, given)) {
    subscripts = std::move(*text);
  } else {
    return slow();
  }
  // One operand (a transposition, a diagonal, a reduction) is numpy's business as often as
  // einsumdb's: the full path decides.
  if (given.size() < 2) return slow();
  py::object out = py::none();
  std::string db;
  int threads = 0;
  std::optional<Candidate> chosen;
  py::object params = py::none();
  for (const auto& [key, value] : kwargs) {
    const std::string k = key.cast<std::string>();
    if (k == "out") {
      out = py::reinterpret_borrow<py::object>(value);
    } else if (k == "optimize") {
      // einsumdb orders the contraction itself; an explicit path (or a name numpy must check)
      // goes the full way.
      if (!(value.is_none() || py::isinstance<py::bool_>(value) ||
            (py::isinstance<py::str>(value) &&
             (value.cast<std::string>() == "greedy" || value.cast<std::string>() == "optimal"))))
        return slow();
    } else if (k == "transform") {
      chosen = Candidate{value.cast<std::string>(), json::object()};
    } else if (k == "params") {
      params = py::reinterpret_borrow<py::object>(value);
    } else if (k == "db") {
      db = value.is_none() ? "" : py::str(value).cast<std::string>();
    } else if (k == "threads") {
      threads = value.cast<int>();
    } else {
      return slow();  // dtype=, casting=, order=, or a keyword numpy refuses
    }
  }
  std::vector<py::array> operands;
  operands.reserve(given.size());
  std::optional<Dtype> common;
  bool mixed = false;
  for (const auto& h : given) {
    if (!plain_ndarray(h)) return slow();
    operands.push_back(py::reinterpret_borrow<py::array>(h));
    if (!native_dtype(operands.back())) return slow();
    const Dtype d = dtype_of(operands.back(), [] { return std::string(); });
    mixed = mixed || (common && d != *common);
    common = common ? promote_dtypes(*common, d) : d;
  }
  if (mixed) {  // numpy casts each operand to the common dtype first
    const py::dtype target =
        with_element_type(*common, [](auto zero) { return py::dtype::of<decltype(zero)>(); });
    for (auto& a : operands)
      if (!a.dtype().is(target)) a = a.attr("astype")(target);
  }
  if (!out.is_none() &&
      (!plain_ndarray(out) || !out.cast<py::array>().dtype().is(operands.front().dtype())))
    return slow();
  for (auto& a : operands) a = readable(a, [] { return std::string("an operand"); });
  py::object r = native_einsum(subscripts, operands, out, db, threads, chosen, params);
  if (!out.is_none()) return r;
  // A full contraction is a numpy scalar, as numpy returns it.
  if (py::detail::array_proxy(r.ptr())->nd == 0) return r[py::tuple()];
  return r;
}

// einsumdb._einsumdb.einsum_native(subscripts, operands, out, db, threads, transform, params):
// the core for einsumdb._numpy_einsum (operands already of one native dtype).
py::object einsum_native(const std::string& subscripts, const py::list& operand_list,
                         const py::object& out, const py::object& db, int threads,
                         const py::object& transform, const py::object& params) {
  std::vector<py::array> operands;
  for (std::size_t k = 0; k < operand_list.size(); ++k)
    operands.push_back(readable(operand_list[k], [k] { return "operand " + std::to_string(k); }));
  std::optional<Candidate> chosen;
  if (!transform.is_none()) chosen = Candidate{transform.cast<std::string>(), json::object()};
  return native_einsum(subscripts, operands, out,
                       db.is_none() ? "" : py::str(db).cast<std::string>(), threads, chosen,
                       params);
}

// Rows of operands: equal Python objects are one array.
BatchedEinsum batched_spec(const std::string& subscripts,
                           const std::vector<std::vector<py::array>>& rows,
                           std::map<std::string, TensorRef>& inputs) {
  const EinsumPattern pattern = parse_einsum_pattern(subscripts);
  BatchedEinsum e;
  e.inputs = pattern.inputs;
  e.output = pattern.output;
  std::map<const PyObject*, std::string> names;
  for (std::size_t r = 0; r < rows.size(); ++r) {
    if (rows[r].size() != pattern.inputs.size())
      throw SpecError("row " + std::to_string(r) + " has " + std::to_string(rows[r].size()) +
                      " operand(s); einsum '" + subscripts + "' has " +
                      std::to_string(pattern.inputs.size()));
    e.batch.emplace_back();
    for (std::size_t k = 0; k < rows[r].size(); ++k) {
      const py::array& a = rows[r][k];
      auto [it, fresh] = names.emplace(a.ptr(), "T" + std::to_string(names.size()));
      e.batch.back().push_back(it->second);
      if (!fresh) continue;
      const TensorRef ref = ref_of(
          a, [r, k] { return "row " + std::to_string(r) + " operand " + std::to_string(k); });
      ArrayInfo info;
      info.dtype = ref.dtype;
      for (auto l : ref.shape) info.shape.push_back(Length::of(l));
      e.arrays.emplace(it->second, info);
      inputs.emplace(it->second, ref);
    }
  }
  return e;
}

py::list batched_einsum(const std::string& subscripts,
                        const std::vector<std::vector<py::array>>& rows, const std::string& db,
                        int threads) {
  std::map<std::string, TensorRef> inputs;
  const BatchedEinsum e = batched_spec(subscripts, rows, inputs);
  Engine& engine = engine_for(db, threads);
  Results results;
  {
    py::gil_scoped_release release;
    results = engine.einsum(e, inputs);
  }
  py::list out;
  for (auto& t : results) out.append(to_numpy(std::move(t)));
  return out;
}

// A prepared execution for fixed shapes and dtypes (contract_expression).
class PyPrepared {
 public:
  PyPrepared(std::shared_ptr<const Prepared> p, std::size_t operands)
      : p_(std::move(p)), operands_(operands) {}

  py::object call(const py::args& args, const py::object& out) const {
    std::vector<py::array> operands;
    operands.reserve(args.size());
    for (std::size_t k = 0; k < args.size(); ++k)
      operands.push_back(readable(args[k], [k] { return "operand " + std::to_string(k); }));
    if (operands.size() != operands_)
      throw SpecError("this expression takes " + std::to_string(operands_) + " operand(s); " +
                      std::to_string(operands.size()) + " were given");
    const auto refs = refs_of(operands);
    if (p_->direct()) {  // a small workload: its loops on the arrays as they lie
      py::array result = !out.is_none()
                             ? out.cast<py::array>()
                             : with_element_type(p_->dtype(), [&](auto zero) -> py::array {
                                 return py::array_t<decltype(zero)>(std::vector<py::ssize_t>(
                                     p_->shape().begin(), p_->shape().end()));
                               });
      if (!result.writeable()) throw py::value_error("out is read-only");
      p_->run_direct(refs, ref_of(result, [] { return std::string("out"); }));
      return result;
    }
    std::map<std::string, TensorRef> inputs;
    const auto& row = p_->einsum().batch[0];
    for (std::size_t k = 0; k < refs.size(); ++k) inputs.emplace(row[k], refs[k]);
    if (!out.is_none()) {
      auto o = out.cast<py::array>();
      if (!o.writeable()) throw py::value_error("out is read-only");
      const std::vector<TensorRef> outs{ref_of(o, [] { return std::string("out"); })};
      py::gil_scoped_release release;
      p_->run(inputs, outs);
      return out;
    }
    Results r;
    {
      py::gil_scoped_release release;
      r = p_->run(inputs);
    }
    return to_numpy(std::move(r[0]));
  }
  Choice choice() const { return p_->choice(); }
  json spec() const { return json(to_json(p_->einsum())); }

 private:
  std::shared_ptr<const Prepared> p_;
  std::size_t operands_;
};

PyPrepared prepare(const std::string& subscripts,
                   const std::vector<std::vector<std::int64_t>>& shapes,
                   const std::vector<std::string>& dtypes, const std::string& db, int threads) {
  std::vector<TensorRef> refs;
  for (std::size_t k = 0; k < shapes.size(); ++k) {
    const auto d = parse_dtype(dtypes.at(k));
    if (!d) throw SpecError("unknown dtype '" + dtypes[k] + "'");
    refs.push_back({*d, nullptr, shapes[k], {}});
  }
  Engine& engine = engine_for(db, threads);
  std::shared_ptr<const Prepared> p;
  {
    py::gil_scoped_release release;
    p = engine.prepare(subscripts, refs);
  }
  return PyPrepared(std::move(p), shapes.size());
}

Canonical canonicalize_spec(const py::object& spec) {
  const BatchedEinsum e = spec_of(spec);
  py::gil_scoped_release release;
  return canonicalize(e);
}

// ---- the store

class PyStore {
 public:
  explicit PyStore(const std::string& path)
      : path_(store_path(path)), shown_(store_display_name(path_)) {}
  const std::string& path() const { return shown_; }

  std::vector<Answer> top_k(const py::object& spec, std::size_t k, bool exact,
                            const std::string& machine) {
    const BatchedEinsum e = spec_of(spec);
    py::gil_scoped_release release;
    auto store = open_store_for_reading(path_);
    if (!store) return {};
    const Canonical c = canonicalize(e, kQueryCanon);
    // A named machine (fingerprint, its prefix, or model=NAME) must exist in the store.
    const std::vector<std::string> machines = machine.empty()
                                                  ? std::vector{this_machine().fingerprint()}
                                                  : store->machines_matching(machine);
    return top_k_for(*store, c, machines, k, !exact);
  }

  // The best answer of each spec (null where none), canonicalized together and read in one
  // transaction of one open store.
  std::vector<std::optional<Answer>> best_many(const std::vector<py::object>& given, bool exact,
                                               const std::string& machine) {
    std::vector<BatchedEinsum> specs;
    specs.reserve(given.size());
    for (std::size_t i = 0; i < given.size(); ++i) {
      try {
        specs.push_back(spec_of(given[i]));
      } catch (const SpecError& e) {
        throw SpecError("spec " + std::to_string(i) + ": " + e.what());
      }
    }
    py::gil_scoped_release release;
    auto store = open_store_for_reading(path_);
    if (!store) return std::vector<std::optional<Answer>>(specs.size());
    std::vector<Canonical> queries;
    queries.reserve(specs.size());
    for (const auto& e : specs) queries.push_back(canonicalize(e, kQueryCanon));
    const std::vector<std::string> machines = machine.empty()
                                                  ? std::vector{this_machine().fingerprint()}
                                                  : store->machines_matching(machine);
    return einsumdb::best_many(*store, queries, machines, !exact);
  }

  json show(const py::object& spec_or_hash) {
    std::string hash =
        py::isinstance<py::str>(spec_or_hash) ? spec_or_hash.cast<std::string>() : "";
    const bool hex = is_hash_prefix(hash);
    if (!hex) hash = canonicalize(spec_of(spec_or_hash)).hash;
    py::gil_scoped_release release;
    auto store = open_store_for_reading(path_);
    if (store && hex) hash = store->resolve_workload(hash);  // a hash, or the prefix tables print
    ojson out = ojson::array();
    if (store)
      for (auto& row : store->show(hash)) out.push_back(std::move(row));
    return json(out);
  }

  std::vector<WorkloadSummary> list(const std::string& machine, const std::string& strategy,
                                    const std::string& since, std::size_t limit) {
    py::gil_scoped_release release;
    auto store = open_store_for_reading(path_);
    if (!store) return {};
    return store->list(ListFilter{machine, strategy, since, limit});
  }

  json stats() {
    py::gil_scoped_release release;
    auto store = open_store_for_reading(path_);
    if (!store) return {{"db", path_}, {"exists", false}};
    ojson s = store->stats();
    s["exists"] = true;
    return json(s);
  }

  // Lines as `einsumdb record` takes them (JSON text, or dicts); all checked before anything is
  // written.
  json record(const std::vector<py::object>& lines, const std::string& label) {
    std::vector<std::variant<std::string, json>> given;  // read while the GIL is held
    given.reserve(lines.size());
    for (std::size_t n = 0; n < lines.size(); ++n) {
      if (py::isinstance<py::str>(lines[n]))
        given.emplace_back(lines[n].cast<std::string>());
      else
        given.emplace_back(json_value(lines[n], "measurement " + std::to_string(n)));
    }
    py::gil_scoped_release release;
    RecordLines read(label, this_machine());
    for (std::size_t n = 0; n < given.size(); ++n) {
      try {
        std::visit([&](const auto& line) { read.add(line); }, given[n]);
      } catch (const SpecError& e) {
        throw SpecError("measurement " + std::to_string(n) + ": " + e.what());
      }
    }
    Store store = open_store_for_writing(path_);
    ojson out = {{"inserted", 0}, {"duplicates", 0}, {"runs", ojson::array()}};
    for (const auto& r : read.record(store, "einsumdb.Store.record")) {
      out["inserted"] = out["inserted"].get<std::size_t>() + r.inserted;
      out["duplicates"] = out["duplicates"].get<std::size_t>() + r.duplicates;
      out["runs"].push_back(r.id ? ojson(r.id) : ojson());  // null: nothing new, no run
    }
    forget(path_);
    return json(out);
  }

  std::string export_lines() {
    py::gil_scoped_release release;
    auto store = open_store_for_reading(path_);
    std::ostringstream out;
    if (store) store->export_jsonl(out);
    return out.str();
  }

  json import_feinsum_file(const std::string& file) {
    py::gil_scoped_release release;
    Store store = open_store_for_writing(path_);
    const auto r = import_feinsum(store, file);
    forget(path_);
    return {{"rows", r.rows},         {"workloads", r.workloads},   {"machines", r.machines},
            {"inserted", r.inserted}, {"duplicates", r.duplicates}, {"runs", r.runs}};
  }

  json import_lines(const std::string& text, const std::string& source) {
    py::gil_scoped_release release;
    Store store = open_store_for_writing(path_);
    std::istringstream in(text);
    const auto r = store.import_jsonl(in, source);
    forget(path_);
    return {{"inserted", r.inserted}, {"duplicates", r.duplicates}, {"runs", r.runs}};
  }

 private:
  std::string path_, shown_;
};

// ---- tuning: progress through a Python callable; Ctrl-C stops after the current candidate.

TuneReport tune_workload(const py::object& spec, const std::string& db,
                         std::optional<double> budget, const std::vector<int>& threads,
                         const std::vector<std::string>& strategies, int warmup, int min_reps,
                         double min_time, double time_limit, std::uint64_t seed,
                         const std::string& label, const py::object& progress) {
  const BatchedEinsum e = spec_of(spec);
  TuneOptions o;
  o.space.threads = threads;
  o.space.strategies = strategies;
  o.protocol = {warmup, min_reps, min_time};
  o.budget = budget;
  o.time_limit = time_limit;
  o.seed = seed;
  o.run.label = label;
  o.run.command = "einsumdb.tune";
  std::atomic<bool> stop{false};
  o.stop = &stop;
  Progress report_progress = [&](std::size_t done, std::size_t total, const TuneResult& r,
                                 const TuneResult* best) {
    py::gil_scoped_acquire acquire;
    if (PyErr_CheckSignals() != 0) {  // Ctrl-C: the handler raised KeyboardInterrupt
      PyErr_Clear();
      stop.store(true);
    }
    if (!progress.is_none())
      progress(done, total, r.candidate.strategy, std::string(to_string(r.status)),
               best ? py::object(py::float_(best->gflops.value_or(0))) : py::none());
  };
  TuneReport report;
  {
    py::gil_scoped_release release;
    Store store = open_store_for_writing(store_path(db));
    report = einsumdb::tune(store, this_machine(), e, o, report_progress);
  }
  forget(store_path(db));
  return report;
}

json plan(const py::object& graph, std::int64_t procs, const std::string& method) {
  const auto m = parse_plan_method(method);
  if (!m) throw SpecError("method must be eindecomp, sqrt or data, got '" + method + "'");
  EinGraph g = py::isinstance<py::str>(graph) ? parse_eingraph_text(graph.cast<std::string>())
                                              : parse_eingraph(json_value(graph, "the graph"));
  py::gil_scoped_release release;
  PlanOptions o;
  o.procs = procs;
  o.method = *m;
  const Plan p = make_plan(expand(g), o);
  return json(plan_file_json(p, place(p)));
}

// The typed results. Each field is a read-only attribute named as the key of the JSON the CLI
// prints for the same object; `_fields` lists them in that order, and einsumdb/__init__.py gives
// every class the mapping protocol over them (result["gflops"], keys(), as_dict(), ==).
template <class T>
class Typed {
 public:
  Typed(py::module_& m, const char* name, const char* doc) : cls_(m, name, doc) {}
  template <class Get>
  Typed& field(const char* name, Get get, const char* doc) {
    cls_.def_property_readonly(name, get, doc);
    fields_.append(name);
    return *this;
  }
  template <class Get>
  Typed& extra(const char* name, Get get, const char* doc) {  // an attribute not in the mapping
    cls_.def_property_readonly(name, get, doc);
    return *this;
  }
  // The class is declared in one chained statement; at its end, this records the fields.
  ~Typed() { cls_.attr("_fields") = py::tuple(fields_); }

 private:
  py::class_<T> cls_;
  py::list fields_;
};

template <class V>
py::object or_none(const std::optional<V>& v) {
  return v ? py::cast(*v) : py::none();
}

void bind_typed_results(py::module_& m) {
  Typed<Answer>(m, "Answer",
                "The store's answer for a workload: the transform to run, its parameters in the "
                "spec's own names, what answered it (match) and the measured fact behind it.")
      .field(
          "transform", [](const Answer& a) { return a.fact.transform.name; },
          "the strategy (einsumdb.strategies())")
      .field(
          "params", [](const Answer& a) { return a.params; },
          "the transform's parameters in the spec's index and array names")
      .field(
          "match", [](const Answer& a) { return std::string(to_string(a.match)); },
          "'exact', 'symbolic' (a symbolic workload bound to this size) or 'nearest'")
      .field(
          "approximate", [](const Answer& a) { return a.approximate; },
          "measured on another size of the same structure")
      .field(
          "distance",
          [](const Answer& a) { return a.approximate ? py::cast(a.distance) : py::none(); },
          "log-ratio distance of the measured lengths (approximate answers; else None)")
      .field(
          "binding",
          [](const Answer& a) {
            return a.match == Match::symbolic ? py::cast(a.binding) : py::none();
          },
          "the symbolic workload's symbols bound to this size (symbolic answers; else None)")
      .field(
          "measured_on",
          [](const Answer& a) -> py::object {
            if (a.match == Match::exact) return py::none();
            return py::dict(py::arg("hash") = a.fact.workload_hash,
                            py::arg("key") = a.fact.workload_key);
          },
          "the workload measured, when not this one: its hash and key (else None)")
      .field(
          "median_s", [](const Answer& a) { return a.fact.median_s; }, "median seconds of the fact")
      .field(
          "min_s", [](const Answer& a) { return a.fact.min_s; }, "fastest seconds")
      .field(
          "gflops", [](const Answer& a) { return or_none(a.fact.gflops); },
          "median rate in GFLOP/s (a complex multiply-add counts 8 FLOPs); None if unknown")
      .field(
          "flops", [](const Answer& a) { return or_none(a.fact.flops); },
          "the work of one run in FLOPs; None if unknown")
      .field(
          "measured_at", [](const Answer& a) { return a.fact.bindings; },
          "the symbol bindings timed (empty for a concrete workload)")
      .field(
          "measurements", [](const Answer& a) { return a.fact.measurements; },
          "verified measurements behind the fact")
      .field(
          "repetitions", [](const Answer& a) { return a.fact.repetitions; },
          "timed repetitions behind them")
      .field(
          "machine", [](const Answer& a) { return a.fact.machine; },
          "the fingerprint of the machine measured")
      .field(
          "hash", [](const Answer& a) { return a.query_hash; }, "the query's workload hash")
      .field(
          "key", [](const Answer& a) { return a.query_key; }, "the query's canonical key")
      .field(
          "canonical_params", [](const Answer& a) { return a.fact.transform.params; },
          "the parameters as stored, in canonical names")
      .field(
          "origin",
          [](const Answer& a) {
            return a.fact.origin.is_null() ? py::none() : py::cast(a.fact.origin);
          },
          "where an imported fact came from (None: measured by einsumdb)");

  Typed<Canonical>(m, "CanonicalForm",
                   "The canonical form of a batched einsum: its key and hash (the store's key), "
                   "the structure's key and hash (every length abstracted), the canonical spec "
                   "and sigma, the maps from canonical names to the spec's.")
      .field(
          "key", [](const Canonical& c) { return c.key; }, "the canonical key text")
      .field(
          "hash", [](const Canonical& c) { return c.hash; }, "the key's 128-bit hash (hex)")
      .field(
          "structure_key", [](const Canonical& c) { return c.structure_key; },
          "the key without lengths: every size of this contraction has it")
      .field(
          "structure_hash", [](const Canonical& c) { return c.structure_hash; }, "its hash")
      .field(
          "canonical", [](const Canonical& c) { return json(to_json(c.form)); },
          "the canonical spec (spec JSON as a dict)")
      .field(
          "sigma", [](const Canonical& c) { return json(sigma_json(c.sigma)); },
          "canonical name -> the spec's: index, array, operand, row and symbol maps");

  Typed<Choice>(m, "Choice",
                "The engine's choice for a workload: the strategy and parameters it runs, where "
                "they came from and why.")
      .field(
          "strategy", [](const Choice& c) { return c.candidate.strategy; }, "the strategy")
      .field(
          "params", [](const Choice& c) { return c.candidate.params; },
          "its parameters in the workload's own names")
      .field(
          "source", [](const Choice& c) { return c.source; },
          "'best known', 'best known for a nearby size' or 'default'")
      .field(
          "reason", [](const Choice& c) { return c.reason; },
          "why the default was chosen (empty when the store answered)")
      .field(
          "stored", [](const Choice& c) { return c.stored; }, "the store supplied it")
      .field(
          "distance", [](const Choice& c) { return c.distance; },
          "log-ratio distance of the measured size, for a nearby size");

  Typed<TuneResult>(m, "TuneResult", "One candidate of a tuning run and what it measured.")
      .field(
          "strategy", [](const TuneResult& r) { return r.candidate.strategy; }, "")
      .field(
          "params", [](const TuneResult& r) { return r.candidate.params; }, "in canonical names")
      .field(
          "status", [](const TuneResult& r) { return std::string(to_string(r.status)); },
          "'ok' (verified) or why it was not")
      .field(
          "median_s",
          [](const TuneResult& r) {
            return r.status == Outcome::ok ? py::cast(r.median_s) : py::none();
          },
          "median seconds (verified results; else None)")
      .field(
          "repetitions", [](const TuneResult& r) { return r.seconds.size(); }, "timed repetitions")
      .field(
          "seconds", [](const TuneResult& r) { return r.seconds; }, "every timed repetition")
      .field(
          "search_median_s", [](const TuneResult& r) { return or_none(r.search_median_s); },
          "a finalist's median in the search, before the final round (else None)")
      .field(
          "gflops", [](const TuneResult& r) { return or_none(r.gflops); },
          "median rate (a complex multiply-add counts 8 FLOPs)")
      .field(
          "max_rel_err", [](const TuneResult& r) { return or_none(r.max_rel_err); },
          "largest relative error against the reference")
      .field(
          "error",
          [](const TuneResult& r) { return r.error.empty() ? py::none() : py::cast(r.error); },
          "what went wrong, for a failed candidate (else None)");

  Typed<TuneReport>(m, "TuneReport",
                    "What einsumdb.tune measured and recorded: the workload, the run, the oracle, "
                    "the counts and flags, and every result.")
      .field(
          "workload",
          [](const TuneReport& r) {
            return py::dict(py::arg("hash") = r.workload_hash, py::arg("key") = r.workload_key);
          },
          "the workload tuned: its hash and key")
      .field(
          "run", [](const TuneReport& r) { return r.run; }, "the run's id in the store")
      .field(
          "oracle", [](const TuneReport& r) { return r.oracle; },
          "'reference', or the strategy checked against it on a reduced size")
      .field(
          "binding",
          [](const TuneReport& r) { return r.binding.empty() ? py::none() : py::cast(r.binding); },
          "the lengths the spec's symbols were tuned at (None: concrete)")
      .field(
          "candidates", [](const TuneReport& r) { return r.total; }, "candidates enumerated")
      .field(
          "measured", [](const TuneReport& r) { return r.results.size(); }, "candidates measured")
      .field(
          "probed", [](const TuneReport& r) { return r.probed; },
          "candidates the probe ran (0: no probe)")
      .field(
          "interrupted", [](const TuneReport& r) { return r.interrupted; }, "")
      .field(
          "budget_exhausted", [](const TuneReport& r) { return r.budget_exhausted; }, "")
      .field(
          "time_limit_reached", [](const TuneReport& r) { return r.time_limit_reached; }, "")
      .field(
          "not_measured", [](const TuneReport& r) { return r.not_measured; },
          "candidates the time limit left out")
      .field(
          "results", [](const TuneReport& r) { return r.results; }, "in the order measured")
      .extra(
          "best",
          [](const TuneReport& r) {
            const TuneResult* b = r.best();
            return b ? py::cast(*b) : py::none();
          },
          "the fastest verified result, or None");

  Typed<WorkloadSummary>(m, "Workload", "A workload of the store with what is known about it.")
      .field(
          "hash", [](const WorkloadSummary& w) { return w.hash; }, "")
      .field(
          "key", [](const WorkloadSummary& w) { return w.key; }, "")
      .field(
          "measurements", [](const WorkloadSummary& w) { return w.measurements; }, "")
      .field(
          "ok", [](const WorkloadSummary& w) { return w.ok; }, "verified measurements")
      .field(
          "best_gflops", [](const WorkloadSummary& w) { return or_none(w.best_gflops); }, "")
      .field(
          "best_strategy", [](const WorkloadSummary& w) { return w.best_strategy; }, "")
      .field(
          "last_recorded", [](const WorkloadSummary& w) { return w.last_recorded_at; }, "");
}

}  // namespace

PYBIND11_MODULE(_einsumdb, m) {
  m.doc() = "The C++ core of einsumdb (use the einsumdb package, not this module).";
  // Error ← SpecError (also a ValueError), DatabaseError: the library's exception family.
  static PyObject* error = PyErr_NewException("einsumdb.Error", PyExc_Exception, nullptr);
  static PyObject* spec_error = PyErr_NewException(
      "einsumdb.SpecError",
      py::make_tuple(py::handle(error), py::handle(PyExc_ValueError)).release().ptr(), nullptr);
  static PyObject* database_error = PyErr_NewException("einsumdb.DatabaseError", error, nullptr);
  m.attr("Error") = py::handle(error);
  m.attr("SpecError") = py::handle(spec_error);
  m.attr("DatabaseError") = py::handle(database_error);
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const SpecError& e) {
      PyErr_SetString(spec_error, e.what());
    } catch (const DatabaseError& e) {
      PyErr_SetString(database_error, e.what());
    } catch (const Error& e) {
      PyErr_SetString(error, e.what());
    }
  });

  bind_typed_results(m);

  m.def("einsum", &einsum_call,
        "einsum(subscripts, *operands, out=None, dtype=None, order='K', casting='safe',\n"
        "       optimize=False, db=None, threads=0, transform=None, params=None)\n"
        "einsum(op0, sublist0, op1, sublist1, ..., [sublistout], **kwargs)"
        "\n\n"
        "Evaluates the Einstein summation `subscripts` on `operands`: numpy.einsum's call and\n"
        "result (numpy 1.24's contract: ellipsis and broadcasting, empty axes, the sublist form,\n"
        "dtype=, casting=, order=, optimize=, out=, a numpy scalar for a full contraction).\n\n"
        "Runs the fastest verified transform this machine's store knows for the workload (the\n"
        "nearest measured size when this one was never measured), else a default. It computes\n"
        "natively in float32, float64, complex64 and complex128 (and mixed operands promote to\n"
        "one of those as numpy's do); other computation dtypes (integers, bool, float16,\n"
        "longdouble) are numpy.einsum's own. C-contiguous operands are read in place; other\n"
        "strides are copied first. The result is a new C-contiguous array (or in order=), or is\n"
        "written into `out`. `db` names the store; `threads` (> 0) overrides the transform's\n"
        "thread count. `transform` runs that strategy instead (einsumdb.strategies()), with\n"
        "`params` in these subscripts' letters as in `einsumdb run --param` (order='ikj').\n"
        "optimize=True, 'greedy' or 'optimal' lets einsumdb order the contraction (the store's\n"
        "choice); an explicit path ['einsum_path', (0, 1), ...] is checked as numpy checks it and\n"
        "followed. Raises the exceptions numpy raises for bad calls (ValueError for subscripts\n"
        "and shapes, TypeError for dtypes and casts); SpecError is a ValueError.");
  m.def("einsum_native", &einsum_native, py::arg("subscripts"), py::arg("operands"), py::arg("out"),
        py::arg("db"), py::arg("threads"), py::arg("transform"), py::arg("params"));
  m.def("batched_einsum", &batched_einsum, py::arg("subscripts"), py::arg("rows"), py::arg("db"),
        py::arg("threads"));
  m.def("prepare", &prepare, py::arg("subscripts"), py::arg("shapes"), py::arg("dtypes"),
        py::arg("db"), py::arg("threads"));
  m.def("canonicalize", &canonicalize_spec, py::arg("spec"));
  m.def("tune", &tune_workload, py::arg("spec"), py::arg("db"), py::arg("budget"),
        py::arg("threads"), py::arg("strategies"), py::arg("warmup"), py::arg("min_reps"),
        py::arg("min_time"), py::arg("time_limit"), py::arg("seed"), py::arg("label"),
        py::arg("progress"));
  m.def("plan", &plan, py::arg("graph"), py::arg("procs"), py::arg("method"));
  m.def(
      "store_path", [](const std::string& p) { return store_path(p); }, py::arg("path"));
  m.def("machine", [] { return json(to_json(this_machine())); });
  m.def("strategies", [] { return strategy_names(); });

  py::class_<PyPrepared>(m, "Prepared")
      .def("__call__", &PyPrepared::call, py::kw_only(), py::arg("out") = py::none())
      .def_property_readonly("choice", &PyPrepared::choice)
      .def_property_readonly("spec", &PyPrepared::spec);

  py::class_<PyStore>(m, "Store")
      .def(py::init<const std::string&>(), py::arg("path"))
      .def_property_readonly("path", &PyStore::path)
      .def("top_k", &PyStore::top_k)
      .def("best_many", &PyStore::best_many)
      .def("show", &PyStore::show)
      .def("list", &PyStore::list)
      .def("stats", &PyStore::stats)
      .def("record", &PyStore::record)
      .def("export_lines", &PyStore::export_lines)
      .def("import_lines", &PyStore::import_lines)
      .def("import_feinsum", &PyStore::import_feinsum_file);
}
