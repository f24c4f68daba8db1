#include "einsumdb/executor/product.hpp"

#include <algorithm>
#include <cstdlib>
#include <limits>
#include <optional>

#include "einsumdb/executor/kernels.hpp"

namespace einsumdb::kernels {
namespace {

// The element stride of a group of labels (in the group's order) in a tensor indexed by
// `layout` with these strides, when the group is laid out as one flattened axis: each label's
// stride is the next one's times its length (labels of length 1 fit anywhere). 0 for an empty
// group; nullopt when the group is not flat there.
std::optional<std::int64_t> flat_stride(const std::string& group, const std::string& layout,
                                        const std::vector<std::int64_t>& strides,
                                        const std::map<char, std::int64_t>& len) {
  std::int64_t expect = -1;  // the stride the next label must have; -1: any
  for (std::size_t q = group.size(); q-- > 0;) {
    if (len.at(group[q]) == 1) continue;
    const std::int64_t s = strides[layout.find(group[q])];
    if (expect >= 0 && s != expect) return std::nullopt;
    expect = s * len.at(group[q]);
  }
  for (std::size_t q = group.size(); q-- > 0;)
    if (len.at(group[q]) != 1) return strides[layout.find(group[q])];
  return 0;
}

// A tensor read or written as a GEMM matrix per batch point: the batch stride and the matrix's
// row and column strides, when each group is flat in the tensor's layout and the matrix is one
// the BLAS can address (a unit stride along its rows or its columns).
struct MatrixView {
  std::int64_t batch, rs, cs;
};
std::optional<MatrixView> matrix_view(const std::string& layout,
                                      const std::vector<std::int64_t>& strides, const GemmGroups& g,
                                      const std::string& rows, const std::string& cols,
                                      const std::map<char, std::int64_t>& len) {
  const auto b = flat_stride(g.batch, layout, strides, len),
             r = flat_stride(rows, layout, strides, len),
             c = flat_stride(cols, layout, strides, len);
  if (!b || !r || !c) return std::nullopt;
  std::int64_t rs = *r, cs = *c;
  const std::int64_t nr = product(rows, len), nc = product(cols, len);
  kernels::canonical_strides(nr, nc, rs, cs);
  const bool addressable = (cs == 1 && rs >= std::max<std::int64_t>(nc, 1)) ||
                           (rs == 1 && cs >= std::max<std::int64_t>(nr, 1));
  if (!addressable) return std::nullopt;
  return MatrixView{*b, rs, cs};
}

}  // namespace

template <typename T>
Product<T>::Product(const GemmGroups& g, const std::map<char, std::int64_t>& len, const Strided& a,
                    const Strided& b, const Strided& c, bool a_function, bool b_function,
                    std::int64_t chunk_elements)
    : batch_(g.batch),
      len_(len),
      nb_(product(g.batch, len)),
      m_(product(g.m, len)),
      n_(product(g.n, len)),
      k_(product(g.k, len)),
      sums_(!g.k.empty()) {
  if (!sums_ && !a_function && !b_function) {
    // An outer product per batch point, read in place whatever the batch strides.
    const auto am = flat_stride(g.m, a.labels, a.strides, len),
               cm = flat_stride(g.m, c.labels, c.strides, len),
               bn = flat_stride(g.n, b.labels, b.strides, len),
               cn = flat_stride(g.n, c.labels, c.strides, len);
    if (am && cm && bn && cn) {
      Outer o{{}, {}, {}, {}, *am, *cm, *bn, *cn};
      for (char l : g.batch) {
        o.len.push_back(len.at(l));
        o.a.push_back(a.strides[a.labels.find(l)]);
        o.b.push_back(b.strides[b.labels.find(l)]);
        o.c.push_back(c.strides[c.labels.find(l)]);
      }
      outer_ = std::move(o);
      return;
    }
  }
  auto place = [&](const Strided& t, const std::string& rows, const std::string& cols,
                   bool function) {
    Side s;
    s.source = t, s.rows = rows, s.cols = cols;
    if (!function)
      if (const auto v = matrix_view(t.labels, t.strides, g, rows, cols, len)) {
        s.batch = v->batch, s.rs = v->rs, s.cs = v->cs;
        return s;
      }
    const std::int64_t r = product(rows, len), q = product(cols, len);
    s.packed = true;
    s.at = scratch_;
    scratch_ += nb_ * r * q;
    // An operand packed only to apply its function keeps its layout (its runs stay long, and
    // the GEMM reads it as it would have read the array); any other becomes [batch, rows, cols].
    if (const auto v =
            matrix_view(t.labels, row_major_strides(t.labels, len), g, rows, cols, len)) {
      s.shape = shape_of(t.labels, len);
      s.strides = t.strides;
      s.batch = v->batch, s.rs = v->rs, s.cs = v->cs;
      return s;
    }
    const std::string to = g.batch + rows + cols;
    s.shape = shape_of(to, len);
    s.strides = permuted_strides(t.labels, to, t.strides);
    s.batch = r * q, s.rs = q, s.cs = 1;
    return s;
  };
  a_ = place(a, g.m, g.k, a_function);
  b_ = place(b, g.k, g.n, b_function);
  if (const auto v = matrix_view(c.labels, c.strides, g, g.m, g.n, len)) {
    c_.batch = v->batch, c_.rs = v->rs, c_.cs = v->cs;
  } else {  // computed into [batch, M, N] order chunk by chunk, each scattered
    c_.packed = true;
    c_.batch = m_ * n_, c_.rs = n_, c_.cs = 1;
    c_.at = scratch_;
    // The cut: the outermost row label whose later labels' rows fit a chunk, then as many of
    // its values as fit (at least one). A chunk must write whole cache lines of the result, so
    // the cut and the labels before it have strides of a line or more there. (Cut along the
    // result's unit stride, each chunk writes a part of every line it touches, and each line is
    // read and written once per chunk: `efbad,cf->abcde` at TCCG case 6's size, 48 times.) Where
    // the first row label does not, the cut is a column label's, and a
    // chunk is every row of a range of columns: TCCG cases 46-48 (`gfab,degc->abcdef`, rows
    // f, a, b with f the unit stride) held their whole 288 MiB result in scratch before. Where
    // neither group's first label does, the result is one chunk.
    const std::string rows = g.batch + g.m;
    auto stride_in_c = [&](char l) { return c.strides[c.labels.find(l)]; };
    auto line_strided = [&](const std::string& group) {  // how many labels from the first
      std::size_t q = 0;
      while (q < group.size() && (len.at(group[q]) == 1 ||
                                  std::abs(stride_in_c(group[q])) >= 64 / std::int64_t{sizeof(T)}))
        ++q;
      return q;
    };
    Chunks& k = chunks_;
    const std::size_t row_lines = line_strided(rows), col_lines = line_strided(g.n);
    std::string cut;
    std::int64_t across = 0;  // a chunk's extent the other way
    std::size_t at = 0;
    auto place_cut = [&](bool by_columns) {
      k.by_columns = by_columns;
      cut = by_columns ? g.n : rows;
      const std::size_t lines = by_columns ? col_lines : row_lines;
      across = by_columns ? nb_ * m_ : n_;
      auto after = [&](std::size_t q) { return product(cut.substr(q + 1), len); };
      const std::int64_t per_chunk =
          std::max(chunk_elements, std::min(k_, kChunkDepth) * std::max<std::int64_t>(1, across));
      at = 0;
      while (at + 1 < std::min(cut.size(), lines) && after(at) * across > per_chunk) ++at;
      const std::int64_t elements =
          lines == 0 ? std::numeric_limits<std::int64_t>::max() : per_chunk;
      k.per_value = cut.empty() ? 1 : after(at);
      k.cut_length = cut.empty() ? 1 : len.at(cut[at]);
      k.cut_stride = cut.empty() ? 0 : stride_in_c(cut[at]);
      k.step = std::clamp<std::int64_t>(elements / std::max<std::int64_t>(1, k.per_value * across),
                                        1, std::max<std::int64_t>(1, k.cut_length));
    };
    place_cut(row_lines == 0 && col_lines > 0);
    // Each chunk of a column cut reads all of A: the cut is taken only where a chunk has columns
    // enough that this costs little beside writing them (8 per summed element, and 64 for the
    // GEMM's speed); else the result is one chunk. (TCCG case 2, `dca,bd->abc`: its 24 columns
    // cut into 22 and 2 would read A's 230 MB twice to write a result of the same size.)
    if (k.by_columns && k.step * k.per_value < std::max<std::int64_t>(64, 8 * k_)) place_cut(false);
    auto into_box = [&](const std::string& labels) {
      for (char l : labels) {
        k.box.push_back(len.at(l));
        k.box_strides.push_back(stride_in_c(l));
      }
    };
    if (k.by_columns) into_box(rows);  // a chunk is [rows, columns] as the GEMM writes it
    k.cut_axis = k.box.size();
    k.box.push_back(k.step);
    k.box_strides.push_back(k.cut_stride);
    into_box(cut.empty() ? std::string() : cut.substr(at + 1));
    if (!k.by_columns) into_box(g.n);
    for (std::size_t q = 0; q < at && !cut.empty(); ++q) {
      k.before.push_back(len.at(cut[q]));
      k.before_strides.push_back(stride_in_c(cut[q]));
    }
    // A narrow chunk of one batch point whose product goes to OpenBLAS (complex, or summing more
    // than libxsmm's kernels take: small_gemm_view) is computed column-major (kColumnMajorChunk,
    // kColumnMajorDepth): its box then lists the columns' labels first.
    const std::int64_t chunk_rows = k.by_columns ? m_ : k.step * k.per_value,
                       chunk_cols = k.by_columns ? k.step * k.per_value : n_;
    k.column_major = nb_ == 1 && (is_complex_v<T> ? k_ >= kColumnMajorDepth : k_ > kSmallGemmMax) &&
                     chunk_rows >= kColumnMajorChunk * chunk_cols;
    if (k.column_major) {
      const std::size_t by = k.by_columns ? rows.size() : k.box.size() - g.n.size();
      std::rotate(k.box.begin(), k.box.begin() + by, k.box.end());
      std::rotate(k.box_strides.begin(), k.box_strides.begin() + by, k.box_strides.end());
      k.cut_axis = (k.cut_axis + k.box.size() - by) % k.box.size();
    }
    scratch_ += k.step * k.per_value * across;
  }
}

template <typename T>
void Product<T>::fix(Side& s, const T* data, const Expression* f, bool is_a) {
  // How gemm() will read it: with a column-major result it computes Cᵀ = Bᵀ·Aᵀ, and the small
  // kernels copy a B that is not row-major (after that exchange) before each product.
  std::int64_t rs = c_.rs, cs = c_.cs;
  canonical_strides(m_, n_, rs, cs);
  const bool c_row_major = cs == 1 && rs >= std::max<std::int64_t>(n_, 1);
  std::int64_t srs = s.rs, scs = s.cs;
  canonical_strides(product(s.rows, len_), product(s.cols, len_), srs, scs);
  // A fixed B of a row-major product is wanted row-major, a fixed A of a column-major one
  // column-major; the other cases read either orientation.
  const bool want_cols_major = is_a && !c_row_major;
  const bool wanted = is_a ? (c_row_major || srs == 1) : (!c_row_major || scs == 1);
  s.is_fixed = true;
  if (outer_ || (!s.packed && !f && wanted)) {  // (an outer product reads it in place)
    s.fixed_at = data;
    return;
  }
  const std::string to = batch_ + (want_cols_major ? s.cols + s.rows : s.rows + s.cols);
  const std::int64_t r = product(s.rows, len_), q = product(s.cols, len_);
  s.fixed.resize(static_cast<std::size_t>(nb_ * r * q));
  copy_strided(data, shape_of(to, len_), permuted_strides(s.source.labels, to, s.source.strides),
               s.fixed.data(), f);
  s.packed = false;
  s.batch = r * q;
  s.rs = want_cols_major ? 1 : q;
  s.cs = want_cols_major ? r : 1;
}

template <typename T>
void Product<T>::run(const T* a, const Expression* fa, const T* b, const Expression* fb, T* c,
                     T* scratch, int threads) const {
  // (A fixed copy is addressed afresh: the product may have been moved since.)
  if (a_.is_fixed) a = a_.fixed.empty() ? a_.fixed_at : a_.fixed.data();
  if (b_.is_fixed) b = b_.fixed.empty() ? b_.fixed_at : b_.fixed.data();
  if (outer_) return run_outer(a, b, c, threads);
  if (a_.packed)
    copy_strided(a, a_.shape, a_.strides, scratch + a_.at, fa, threads), a = scratch + a_.at;
  check_deadline();
  if (b_.packed)
    copy_strided(b, b_.shape, b_.strides, scratch + b_.at, fb, threads), b = scratch + b_.at;
  check_deadline();
  if (!c_.packed) return compute(a, b, 0, nb_ * m_, 0, n_, c, c_.batch, c_.rs, c_.cs, threads);
  // Chunk by chunk: computed into scratch, then scattered into its box of the result.
  const Chunks& k = chunks_;
  T* z = scratch + c_.at;
  std::int64_t before = 1;
  for (auto l : k.before) before *= l;
  std::vector<std::int64_t> box = k.box;
  for (std::int64_t o = 0; o < before; ++o) {
    std::int64_t offset = 0, rest = o;  // the labels before the cut, the last fastest
    for (std::size_t q = k.before.size(); q-- > 0;) {
      offset += rest % k.before[q] * k.before_strides[q];
      rest /= k.before[q];
    }
    for (std::int64_t v = 0; v < k.cut_length; v += k.step) {
      check_deadline();
      box[k.cut_axis] = std::min(k.step, k.cut_length - v);
      const std::int64_t first = (o * k.cut_length + v) * k.per_value,
                         count = box[k.cut_axis] * k.per_value;
      if (k.by_columns && k.column_major)
        compute(a, b, 0, m_, first, count, z, m_ * count, 1, m_, threads);
      else if (k.by_columns)
        compute(a, b, 0, nb_ * m_, first, count, z, m_ * count, count, 1, threads);
      else if (k.column_major)
        compute(a, b, first, count, 0, n_, z, count * n_, 1, count, threads);
      else
        compute(a, b, first, count, 0, n_, z, m_ * n_, n_, 1, threads);
      copy_into_strided(z, box, c + offset + v * k.cut_stride, k.box_strides, nb_ * m_ * n_,
                        threads);
    }
  }
}

template <typename T>
void Product<T>::compute(const T* a, const T* b, std::int64_t row, std::int64_t rows,
                         std::int64_t col, std::int64_t cols, T* z, std::int64_t z_batch,
                         std::int64_t z_rs, std::int64_t z_cs, int threads) const {
  // Whole batch points [p0, p0 + np), or rows [i0, i0 + rows) of the batch point p0.
  const bool whole =
      row % std::max<std::int64_t>(m_, 1) == 0 && rows % std::max<std::int64_t>(m_, 1) == 0;
  const std::int64_t p0 = m_ ? row / m_ : 0, i0 = whole ? 0 : row - p0 * m_;
  const std::int64_t np = whole ? (m_ ? rows / m_ : 0) : 1, m = whole ? m_ : rows;
  a += p0 * a_.batch + i0 * a_.rs;
  b += p0 * b_.batch + col * b_.cs;
  const bool over_batch = threads > 1 && np >= threads;
  if (!sums_) {
    // An outer product per batch point: z[i][j] = a[i] · b[j].
    parallel_for(np, over_batch ? threads : 1, [&](std::int64_t lo, std::int64_t hi) {
      for (std::int64_t p = lo; p < hi; ++p)
        for (std::int64_t i = 0; i < m; ++i) {
          const T x = a[p * a_.batch + i * a_.rs];
          const T* y = b + p * b_.batch;
          T* out = z + p * z_batch + i * z_rs;
          if (b_.cs == 1 && z_cs == 1)
            for (std::int64_t j = 0; j < cols; ++j) out[j] = x * y[j];
          else
            for (std::int64_t j = 0; j < cols; ++j) out[j * z_cs] = x * y[j * b_.cs];
        }
    });
    return;
  }
  // Fewer batch points than threads, a small result and a sum longer than its sides (TCCG case 13,
  // 156 × 296 summed over 92352): the threads split the sum (split_sum), each share at least
  // kMinShare summed elements.
  constexpr std::int64_t kMinShare = 256;
  if (threads > 1 && !over_batch && k_ >= threads * kMinShare && k_ >= 4 * std::max(m, cols) &&
      m * cols <= kSplitSumElements) {
    BlasThreads blas(1);
    for (std::int64_t p = 0; p < np; ++p)
      split_sum(threads, m, cols, z + p * z_batch, z_rs, z_cs,
                [&](std::int64_t s, T* to, std::int64_t rs, std::int64_t cs) {
                  const std::int64_t k0 = k_ * s / threads, k1 = k_ * (s + 1) / threads;
                  gemm<T>(m, cols, k1 - k0, {a + p * a_.batch + k0 * a_.cs, a_.rs, a_.cs},
                          {b + p * b_.batch + k0 * b_.rs, b_.rs, b_.cs}, to, rs, cs, false,
                          three_m_);
                });
    return;
  }
  BlasThreads blas(over_batch ? 1 : threads);
  parallel_for(np, over_batch ? threads : 1, [&](std::int64_t lo, std::int64_t hi) {
    gemm_batch<T>(hi - lo, m, cols, k_, {a + lo * a_.batch, a_.rs, a_.cs}, a_.batch,
                  {b + lo * b_.batch, b_.rs, b_.cs}, b_.batch, z + lo * z_batch, z_rs, z_cs,
                  z_batch, false, three_m_);
  });
}

template <typename T>
void Product<T>::run_outer(const T* a, const T* b, T* c, int threads) const {
  const Outer& o = *outer_;
  const std::size_t dims = o.len.size();
  const std::int64_t first = dims ? o.len[0] : 1;
  // Threads split the first batch index; the others run as an odometer inside.
  parallel_for(first, nb_ >= threads ? threads : 1, [&](std::int64_t lo, std::int64_t hi) {
    std::int64_t inner = 1;
    for (std::size_t d = 1; d < dims; ++d) inner *= o.len[d];
    std::vector<std::int64_t> at(dims, 0);
    for (std::int64_t f = lo; f < hi; ++f) {
      check_deadline();
      std::int64_t pa = dims ? f * o.a[0] : 0, pb = dims ? f * o.b[0] : 0,
                   pc = dims ? f * o.c[0] : 0;
      std::fill(at.begin(), at.end(), 0);
      for (std::int64_t q = 0; q < inner; ++q) {
        for (std::int64_t i = 0; i < m_; ++i) {
          const T x = a[pa + i * o.am];
          T* out = c + pc + i * o.cm;
          const T* y = b + pb;
          if (o.bn == 1 && o.cn == 1)
            for (std::int64_t j = 0; j < n_; ++j) out[j] = x * y[j];
          else
            for (std::int64_t j = 0; j < n_; ++j) out[j * o.cn] = x * y[j * o.bn];
        }
        for (std::size_t d = dims; d-- > 1;) {  // the next batch point
          pa += o.a[d], pb += o.b[d], pc += o.c[d];
          if (++at[d] < o.len[d]) break;
          pa -= o.a[d] * o.len[d], pb -= o.b[d] * o.len[d], pc -= o.c[d] * o.len[d];
          at[d] = 0;
        }
      }
    }
  });
}

template class Product<float>;
template class Product<double>;
template class Product<std::complex<float>>;
template class Product<std::complex<double>>;

}  // namespace einsumdb::kernels
