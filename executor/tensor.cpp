#include "einsumdb/executor/tensor.hpp"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <map>
#include <mutex>

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
    throw SpecError("dtype " + std::string(to_string(dtype)) +
                    " is not supported (f32, f64, c64 or c128)");
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

Tensor Tensor::reinterpret(const Tensor& t, Dtype dtype, std::vector<std::int64_t> shape) {
  Tensor v;
  v.dtype_ = dtype;
  v.shape_ = std::move(shape);
  v.size_ = 1;
  for (auto len : v.shape_) v.size_ *= len;
  EINSUMDB_ASSERT(v.bytes() == t.bytes(), "a reinterpreted tensor spans the bytes of its own");
  v.data_ = t.data_;
  return v;
}

bool executable_dtype(Dtype d) {
  return d == Dtype::f32 || d == Dtype::f64 || d == Dtype::c64 || d == Dtype::c128;
}

bool is_complex(Dtype d) {
  return d == Dtype::c64 || d == Dtype::c128;
}

namespace {

constexpr std::size_t kHugePage = std::size_t{2} << 20;
constexpr std::size_t kPage = 4096;

// Tensors of 128 KiB and more live in mappings of their own, populated when mapped and kept for
// reuse when freed (glibc maps blocks of that size afresh for each request, or gives freed heap
// pages back when it trims, and every new page costs a fault and its zeroing by the kernel: for
// the result of a small contraction, such as the tuner's probe times over and over, more than
// computing it); those of 4 MiB and more are 2 MiB-aligned with transparent huge pages (as numpy
// does: a kernel that streams a large tensor misses the TLB once per 2 MiB instead of once per
// 4 KiB).
//
// Memory the process has not written before is expensive on a virtual machine: its first write
// faults in the guest and in the host. Kernels allocate their results afresh on every run, and
// glibc gave each large aligned block a new address (the freed block, one alignment short, never
// fits the next request) or a new mapping, so every run wrote new pages.
//
// The cache holds at most kCacheBytes, and a request it cannot serve unmaps cached blocks, largest
// first, until the cache holds no more than the tensors alive: a process keeps at most about
// twice what it uses. (Unmapping until a request's size was freed made the blocks of a run with
// two sizes evict each other, and each run mapped anew.)
class LargeBlocks {
 public:
  static constexpr std::size_t kMinBytes = std::size_t{128} << 10;
  static constexpr std::size_t kCacheBytes = std::size_t{1} << 30;

  static LargeBlocks& instance() {
    static auto* blocks = new LargeBlocks;  // never destroyed: tensors may outlive main()
    return *blocks;
  }

  struct Block {
    void* data = nullptr;
    std::size_t bytes = 0;  // of the mapping
    bool zero = false;      // fresh from the kernel: every byte is zero
  };

  // A block of at least `bytes`: a cached one no more than a quarter larger, or a new mapping.
  Block take(std::size_t bytes) {
    const std::size_t unit = huge(bytes) ? kHugePage : kPage;
    bytes = (bytes + unit - 1) / unit * unit;
    std::vector<Block> evicted;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      const auto it = cache_.lower_bound(bytes);
      if (it != cache_.end() && it->first <= bytes + bytes / 4) {
        Block b{it->second, it->first, false};
        cached_ -= it->first;
        live_ += it->first;
        cache_.erase(it);
        return b;
      }
      live_ += bytes;
      while (cached_ > live_ && !cache_.empty()) {
        auto largest = std::prev(cache_.end());
        evicted.push_back({largest->second, largest->first, false});
        cached_ -= largest->first;
        cache_.erase(largest);
      }
    }
    for (const Block& b : evicted) munmap(b.data, b.bytes);
    try {
      mapped_.fetch_add(1, std::memory_order_relaxed);
      return map(bytes);
    } catch (...) {
      std::lock_guard<std::mutex> lock(mutex_);
      live_ -= bytes;
      throw;
    }
  }

  void give(void* data, std::size_t bytes) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      live_ -= bytes;
      if (cached_ + bytes <= kCacheBytes) {
        cache_.emplace(bytes, data);
        cached_ += bytes;
        return;
      }
    }
    munmap(data, bytes);
  }

  std::uint64_t mapped() const { return mapped_.load(std::memory_order_relaxed); }

  std::size_t cached() {
    std::lock_guard<std::mutex> lock(mutex_);
    return cached_;
  }

  // Unmaps every cached block.
  void drain() {
    std::multimap<std::size_t, void*> cache;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      cache.swap(cache_);
      cached_ = 0;
    }
    for (const auto& [bytes, data] : cache) munmap(data, bytes);
  }

 private:
  static bool huge(std::size_t bytes) { return bytes >= 2 * kHugePage; }

  static Block map(std::size_t bytes) {
    const std::size_t align = huge(bytes) ? kHugePage : kPage;
    const std::size_t span = bytes + align - kPage;  // mmap returns page-aligned addresses
    void* p = mmap(nullptr, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) throw Error("out of memory mapping " + std::to_string(bytes) + " bytes");
    const auto at = reinterpret_cast<std::uintptr_t>(p);
    const std::uintptr_t aligned = (at + align - 1) / align * align;
    if (aligned > at) munmap(p, aligned - at);
    if (const std::size_t tail = at + span - (aligned + bytes); tail > 0)
      munmap(reinterpret_cast<void*>(aligned + bytes), tail);
    auto* data = reinterpret_cast<char*>(aligned);
    if (huge(bytes)) madvise(data, bytes, MADV_HUGEPAGE);  // advice only
    // Populated now, in one call, rather than page by page inside the first kernel to write it.
    if (madvise(data, bytes, MADV_POPULATE_WRITE) != 0)
      for (std::size_t k = 0; k < bytes; k += kPage) data[k] = 0;
    return {data, bytes, true};
  }

  std::mutex mutex_;
  std::multimap<std::size_t, void*> cache_;  // by size
  std::size_t cached_ = 0, live_ = 0;        // bytes in the cache, and in tensors alive
  std::atomic<std::uint64_t> mapped_{0};     // blocks mapped afresh
};

}  // namespace

bool recycles_large_tensors() {
#if defined(__SANITIZE_ADDRESS__)
  return false;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
  return false;
#else
  return true;
#endif
#else
  return true;
#endif
}

void release_recycled_memory() {
  LargeBlocks::instance().drain();
}

std::uint64_t fresh_mappings() {
  return LargeBlocks::instance().mapped();
}

std::size_t recycled_bytes() {
  return LargeBlocks::instance().cached();
}

Tensor::Tensor(Dtype dtype, std::vector<std::int64_t> shape)
    : Tensor(dtype, std::move(shape), true) {}

Tensor::Tensor(Dtype dtype, std::vector<std::int64_t> shape, Uninitialized)
    : Tensor(dtype, std::move(shape), false) {}

Tensor::Tensor(Dtype dtype, std::vector<std::int64_t> shape, bool zero)
    : dtype_(dtype), shape_(std::move(shape)), size_(1) {
  if (!executable_dtype(dtype))
    throw SpecError("the executor computes in f32, f64, c64 and c128; got " +
                    std::string(to_string(dtype)));
  for (std::size_t a = 0; a < shape_.size(); ++a) {
    if (shape_[a] < 0) throw SpecError("axis " + std::to_string(a) + " has a negative length");
    if (shape_[a] > 0 && size_ > std::numeric_limits<std::int64_t>::max() / shape_[a])
      throw SpecError("a tensor of this shape has more elements than can be addressed");
    size_ *= shape_[a];
  }
  if (recycles_large_tensors() && bytes() >= LargeBlocks::kMinBytes) {
    const LargeBlocks::Block b = LargeBlocks::instance().take(bytes());
    data_ = std::shared_ptr<void>(b.data,
                                  [n = b.bytes](void* q) { LargeBlocks::instance().give(q, n); });
    if (zero && !b.zero) std::memset(b.data, 0, bytes());
    return;
  }
  const std::size_t n = std::max<std::size_t>(64, (bytes() + 63) / 64 * 64);
  void* p = std::aligned_alloc(64, n);
  if (!p) throw Error("out of memory allocating " + std::to_string(n) + " bytes");
  data_ = std::shared_ptr<void>(p, [](void* q) { std::free(q); });
  if (zero) std::memset(p, 0, n);
}

std::vector<std::int64_t> Tensor::strides() const {
  std::vector<std::int64_t> s(shape_.size(), 1);
  for (std::size_t a = shape_.size(); a-- > 1;) s[a - 1] = s[a] * shape_[a];
  return s;
}

void Tensor::set(std::int64_t k, double v) {
  switch (dtype_) {
    case Dtype::f32:
      data<float>()[k] = static_cast<float>(v);
      break;
    case Dtype::c64:
      data<std::complex<float>>()[k].real(static_cast<float>(v));
      break;
    case Dtype::c128:
      data<std::complex<double>>()[k].real(v);
      break;
    default:
      data<double>()[k] = v;
  }
}

void Tensor::set_complex(std::int64_t k, std::complex<double> v) {
  switch (dtype_) {
    case Dtype::c64:
      data<std::complex<float>>()[k] = std::complex<float>(v);
      break;
    case Dtype::c128:
      data<std::complex<double>>()[k] = v;
      break;
    default:
      set(k, v.real());
  }
}

double max_relative_error(const Tensor& a, const Tensor& reference, double scale_at_least) {
  constexpr double kInf = std::numeric_limits<double>::infinity();
  if (a.shape() != reference.shape()) return kInf;
  double scale = 0, diff = 0;
  if (is_complex(a.dtype()) || is_complex(reference.dtype())) {
    for (std::int64_t k = 0; k < a.size(); ++k) {
      const std::complex<double> x = a.at_complex(k), r = reference.at_complex(k);
      const bool xn = std::isnan(x.real()) || std::isnan(x.imag()),
                 rn = std::isnan(r.real()) || std::isnan(r.imag());
      if (xn != rn) return kInf;
      if (rn) continue;
      if (!std::isfinite(std::abs(r)) || !std::isfinite(std::abs(x))) {
        if (x != r) return kInf;
        continue;
      }
      scale = std::max(scale, std::abs(r));
      diff = std::max(diff, std::abs(x - r));
    }
  } else {
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
  }
  scale = std::max(scale, std::isfinite(scale_at_least) ? scale_at_least : 0.0);
  return diff / std::max(scale, std::numeric_limits<double>::min());
}

double tolerance(Dtype d, double terms) {
  // A complex product of two terms adds two real products: the terms count twice.
  if (is_complex(d)) terms *= 2;
  const double eps = d == Dtype::f32 || d == Dtype::c64 ? 6e-8 : 1.1e-16;
  return std::max(1e3, 16 * std::sqrt(std::max(terms, 1.0))) * eps * 8;
}

void fill_random(Tensor& t, std::uint64_t seed) {
  std::uint64_t x = seed * 0x9E3779B97F4A7C15ull + 0x632BE59BD9B4E019ull;
  auto next = [&x] {  // splitmix64
    std::uint64_t z = (x += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    return static_cast<double>(z >> 11) * 0x1.0p-52 - 1.0;
  };
  if (is_complex(t.dtype())) {
    for (std::int64_t k = 0; k < t.size(); ++k) {
      const double re = next();
      t.set_complex(k, {re, next()});
    }
    return;
  }
  for (std::int64_t k = 0; k < t.size(); ++k) t.set(k, next());
}

}  // namespace einsumdb
