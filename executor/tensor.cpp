#include "einsumdb/executor/tensor.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>

#include <malloc.h>
#include <sys/mman.h>

namespace einsumdb {

Tensor Tensor::view(const Tensor& t) {
  Tensor v;
  v.dtype_ = t.dtype_;
  v.shape_ = t.shape_;
  v.size_ = t.size_;
  v.data_ = std::shared_ptr<void>(const_cast<void*>(t.data_.get()), [](void*) {});
  return v;
}

Tensor Tensor::borrow(Dtype dtype, std::vector<std::int64_t> shape, void* data) {
  if (!executable_dtype(dtype))
    throw SpecError("dtype " + std::string(to_string(dtype)) + " is not supported (f32 or f64)");
  EINSUMDB_ASSERT(reinterpret_cast<std::uintptr_t>(data) % dtype_bytes(dtype) == 0,
                  "borrowed memory must be aligned to its element size");
  Tensor v;
  v.dtype_ = dtype;
  v.shape_ = std::move(shape);
  v.size_ = 1;
  for (auto len : v.shape_) v.size_ *= len;
  v.data_ = std::shared_ptr<void>(std::shared_ptr<void>(), data);  // owns nothing, no allocation
  return v;
}

Tensor Tensor::slice(const Tensor& t, std::int64_t offset, std::vector<std::int64_t> shape) {
  Tensor v;
  v.dtype_ = t.dtype_;
  v.shape_ = std::move(shape);
  v.size_ = 1;
  for (auto len : v.shape_) v.size_ *= len;
  EINSUMDB_ASSERT(offset >= 0 && offset + v.size_ <= t.size_, "slice outside its tensor");
  char* base =
      static_cast<char*>(t.data_.get()) + offset * static_cast<std::int64_t>(dtype_bytes(t.dtype_));
  v.data_ = std::shared_ptr<void>(t.data_, base);  // aliasing: shares t's ownership
  return v;
}

bool executable_dtype(Dtype d) {
  return d == Dtype::f32 || d == Dtype::f64;
}

namespace {

// Large blocks come from the heap and go back to it, instead of an mmap and munmap per tensor
// (glibc maps blocks of 32 MiB and more on every allocation, and trims the heap after large
// frees): a kernel allocates its result afresh on every run, and the page faults of a new mapping
// cost a 2000×300×2000 product 69 instead of 54 ms (`einsumdb run 'ik,kj->ij' --shape
// A=2000x300 B=300x2000 --transform ttgt --repeat 30`).
void recycle_large_blocks() {
  static const bool done = [] {
    mallopt(M_MMAP_THRESHOLD, 1 << 30);
    mallopt(M_TRIM_THRESHOLD, 1 << 30);
    return true;
  }();
  (void)done;
}

}  // namespace

Tensor::Tensor(Dtype dtype, std::vector<std::int64_t> shape)
    : Tensor(dtype, std::move(shape), Uninitialized{}) {
  std::memset(data_.get(), 0, std::max<std::size_t>(64, (bytes() + 63) / 64 * 64));
}

Tensor::Tensor(Dtype dtype, std::vector<std::int64_t> shape, Uninitialized)
    : dtype_(dtype), shape_(std::move(shape)), size_(1) {
  recycle_large_blocks();
  if (!executable_dtype(dtype))
    throw SpecError("the executor computes in f32 and f64; got " + std::string(to_string(dtype)));
  for (std::size_t a = 0; a < shape_.size(); ++a) {
    if (shape_[a] < 0) throw SpecError("axis " + std::to_string(a) + " has a negative length");
    if (shape_[a] > 0 && size_ > std::numeric_limits<std::int64_t>::max() / shape_[a])
      throw SpecError("a tensor of this shape has more elements than can be addressed");
    size_ *= shape_[a];
  }
  // A large tensor is aligned to 2 MiB and asks for transparent huge pages (as numpy does): a
  // kernel that streams it misses the TLB 512 times less often. A 4000×4000 matrix-vector
  // product took 5–10% longer than numpy's identical OpenBLAS call without this (the matvec
  // case of scripts/bench_executor.sh).
  constexpr std::size_t kHuge = std::size_t{2} << 20;
  const bool huge = bytes() >= 2 * kHuge;
  const std::size_t align = huge ? kHuge : 64;
  const std::size_t n = std::max<std::size_t>(64, (bytes() + align - 1) / align * align);
  void* p = std::aligned_alloc(align, n);
  if (!p) throw Error("out of memory allocating " + std::to_string(n) + " bytes");
  if (huge) madvise(p, n, MADV_HUGEPAGE);  // advice only: no huge pages is not an error
  data_ = std::shared_ptr<void>(p, [](void* q) { std::free(q); });
}

std::vector<std::int64_t> Tensor::strides() const {
  std::vector<std::int64_t> s(shape_.size(), 1);
  for (std::size_t a = shape_.size(); a-- > 1;) s[a - 1] = s[a] * shape_[a];
  return s;
}

double Tensor::at(std::int64_t k) const {
  return dtype_ == Dtype::f32 ? static_cast<double>(data<float>()[k]) : data<double>()[k];
}

void Tensor::set(std::int64_t k, double v) {
  if (dtype_ == Dtype::f32)
    data<float>()[k] = static_cast<float>(v);
  else
    data<double>()[k] = v;
}

double max_relative_error(const Tensor& a, const Tensor& reference, double scale_at_least) {
  constexpr double kInf = std::numeric_limits<double>::infinity();
  if (a.shape() != reference.shape()) return kInf;
  double scale = 0, diff = 0;
  for (std::int64_t k = 0; k < a.size(); ++k) {
    const double x = a.at(k), r = reference.at(k);
    if (std::isnan(x) != std::isnan(r)) return kInf;
    if (std::isnan(r)) continue;
    if (std::isinf(r) || std::isinf(x)) {
      if (x != r) return kInf;
      continue;
    }
    scale = std::max(scale, std::abs(r));
    diff = std::max(diff, std::abs(x - r));
  }
  scale = std::max(scale, std::isfinite(scale_at_least) ? scale_at_least : 0.0);
  return diff / std::max(scale, std::numeric_limits<double>::min());
}

double tolerance(Dtype d, double terms) {
  const double eps = d == Dtype::f32 ? 6e-8 : 1.1e-16;
  return std::max(1e3, 16 * std::sqrt(std::max(terms, 1.0))) * eps * 8;
}

void fill_random(Tensor& t, std::uint64_t seed) {
  std::uint64_t x = seed * 0x9E3779B97F4A7C15ull + 0x632BE59BD9B4E019ull;
  for (std::int64_t k = 0; k < t.size(); ++k) {
    // splitmix64
    std::uint64_t z = (x += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    t.set(k, static_cast<double>(z >> 11) * 0x1.0p-52 - 1.0);
  }
}

}  // namespace einsumdb
