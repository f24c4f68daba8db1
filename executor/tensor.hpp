// Dense tensors in memory: row-major, f32, f64, c64 or c128 elements (std::complex<float>,
// std::complex<double>). A tensor owns its elements (64-byte
// aligned, freed with the last tensor that shares them) or borrows them (a view of another
// tensor, or of a caller's memory through borrow()). Tensors are values of one thread at a time;
// reading one tensor from several threads at once is safe.
//
// Elements of 128 KiB and more live in a mapping of their own (4 KiB-aligned; from 4 MiB on,
// 2 MiB-aligned on transparent huge pages), populated when mapped; a freed mapping is kept, up to
// 1 GiB in all, for the next tensor of about its size, so kernels that allocate their results on
// every run write pages they have written before (tensor.cpp has the measurements).
#pragma once

#include <complex>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "einsumdb/canon/model.hpp"
#include "einsumdb/core/error.hpp"

namespace einsumdb {

// The element types the executor computes in, and their dtypes.
template <typename T>
inline constexpr bool is_complex_v = false;
template <typename T>
inline constexpr bool is_complex_v<std::complex<T>> = true;
template <typename T>
constexpr Dtype dtype_of() {
  if constexpr (std::is_same_v<T, float>)
    return Dtype::f32;
  else if constexpr (std::is_same_v<T, double>)
    return Dtype::f64;
  else if constexpr (std::is_same_v<T, std::complex<float>>)
    return Dtype::c64;
  else {
    static_assert(std::is_same_v<T, std::complex<double>>, "not an element type of the executor");
    return Dtype::c128;
  }
}

// Calls f with a value of the element type of `d` (f32, f64, c64, c128): f(0.0f), f(0.0), ...
template <typename F>
decltype(auto) with_element_type(Dtype d, F&& f) {
  switch (d) {
    case Dtype::f32:
      return f(0.0f);
    case Dtype::c64:
      return f(std::complex<float>{});
    case Dtype::c128:
      return f(std::complex<double>{});
    default:
      return f(0.0);
  }
}

bool is_complex(Dtype d);

class Tensor {
 public:
  Tensor() = default;
  // Zero-filled. Throws SpecError for a dtype the executor does not compute in (f32, f64, c64,
  // c128).
  Tensor(Dtype dtype, std::vector<std::int64_t> shape);
  // Elements left unset, for a tensor that is written in full right away.
  struct Uninitialized {};
  Tensor(Dtype dtype, std::vector<std::int64_t> shape, Uninitialized);

  // A tensor that aliases `t`'s elements without owning them (the composite strategies hand
  // their operands to inner strategies this way). `t` must outlive the view.
  static Tensor view(const Tensor& t);
  // A tensor over `data`, row-major with `shape`, that the caller owns and keeps alive (and does
  // not write while it is read). `data` must be aligned to its element size. No copy is made.
  static Tensor borrow(Dtype dtype, std::vector<std::int64_t> shape, void* data);
  // Elements [offset, offset + Π shape) of `t` as a tensor of `shape`, sharing ownership of the
  // memory (it stays alive while either exists). The composite strategies return the rows of a
  // fused result this way, without copying.
  static Tensor slice(const Tensor& t, std::int64_t offset, std::vector<std::int64_t> shape);
  // `t`'s elements read as `dtype` with `shape`, sharing ownership, where both span the same
  // bytes: a complex tensor as a real one with a last axis of 2 (its real and imaginary parts),
  // and back.
  static Tensor reinterpret(const Tensor& t, Dtype dtype, std::vector<std::int64_t> shape);
  Tensor(Tensor&&) noexcept = default;
  Tensor& operator=(Tensor&&) noexcept = default;
  Tensor(const Tensor&) = delete;
  Tensor& operator=(const Tensor&) = delete;

  Dtype dtype() const { return dtype_; }
  const std::vector<std::int64_t>& shape() const { return shape_; }
  std::size_t rank() const { return shape_.size(); }
  std::int64_t size() const { return size_; }
  std::size_t bytes() const { return static_cast<std::size_t>(size_) * dtype_bytes(dtype_); }
  // Row-major element strides.
  std::vector<std::int64_t> strides() const;

  template <typename T>
  T* data() {
    check<T>();
    return static_cast<T*>(data_.get());
  }
  template <typename T>
  const T* data() const {
    check<T>();
    return static_cast<const T*>(data_.get());
  }
  void* raw() { return data_.get(); }
  const void* raw() const { return data_.get(); }
  // Element k (row-major) as double, whatever the dtype (a complex element's real part).
  // Inline: the reference and the error measures read every element through it, so that a
  // call and a type check per element do not dominate them.
  double at(std::int64_t k) const {
    switch (dtype_) {
      case Dtype::f32:
        return static_cast<double>(static_cast<const float*>(data_.get())[k]);
      case Dtype::c64:
        return static_cast<double>(static_cast<const std::complex<float>*>(data_.get())[k].real());
      case Dtype::c128:
        return static_cast<const std::complex<double>*>(data_.get())[k].real();
      case Dtype::f64:
        return static_cast<const double*>(data_.get())[k];
      default:
        check<double>();  // fails: no element type the executor computes in
        return 0;
    }
  }
  void set(std::int64_t k, double v);
  // The same as a complex number (a real element's imaginary part is 0; setting a real element
  // keeps the real part).
  std::complex<double> at_complex(std::int64_t k) const {
    switch (dtype_) {
      case Dtype::c64:
        return std::complex<double>(static_cast<const std::complex<float>*>(data_.get())[k]);
      case Dtype::c128:
        return static_cast<const std::complex<double>*>(data_.get())[k];
      default:
        return at(k);
    }
  }
  void set_complex(std::int64_t k, std::complex<double> v);

 private:
  template <typename T>
  void check() const {
    EINSUMDB_ASSERT(dtype_ == dtype_of<T>(), "tensor accessed with the wrong element type");
  }
  // The elements: owned (freed with the last tensor that shares them) or borrowed (a view).
  // Tensors are move-only; sharing happens only through slice().
  Dtype dtype_ = Dtype::f64;
  std::vector<std::int64_t> shape_;
  std::int64_t size_ = 0;
  std::shared_ptr<void> data_;

  // Both public constructors: with `zero`, every element is zero afterwards.
  Tensor(Dtype dtype, std::vector<std::int64_t> shape, bool zero);
};

// Whether large tensors come from the recycled mappings above: not under AddressSanitizer, where
// every tensor is a heap block, so that it watches them.
bool recycles_large_tensors();

// Returns the mappings kept for reuse to the system (those of tensors alive stay). For a process
// whose next work has other sizes, such as the tuner after its oracle and after each candidate.
void release_recycled_memory();
// Large blocks mapped afresh since the process started (not served from the cache): a run that
// mapped one wrote pages it had not used before.
std::uint64_t fresh_mappings();

// The bytes of the mappings kept for reuse (0 where tensors are not recycled).
std::size_t recycled_bytes();

// Whether the executor computes in this dtype.
bool executable_dtype(Dtype d);

// The largest relative difference max|a−b| / max(max|b|, tiny) over all elements (the
// tolerance scale of verification); +inf when shapes or dtypes differ or a value is NaN in one
// but not the other.
// `scale`, when larger than max|b|, replaces it.
double max_relative_error(const Tensor& a, const Tensor& reference, double scale = 0);

// The tolerance a result in this dtype is held to against the reference, for a reduction of
// `terms` terms per output element.
double tolerance(Dtype d, double terms);

// Deterministic pseudo-random values in [-1, 1) from a seed (real and imaginary parts alike).
void fill_random(Tensor& t, std::uint64_t seed);

}  // namespace einsumdb
