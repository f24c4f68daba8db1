#include "einsumdb/executor/tensor_gemm/scatter.hpp"

#include <algorithm>

#include "einsumdb/executor/kernels.hpp"

namespace einsumdb::tensor_gemm {

Table offsets(const std::string& labels, const std::map<char, std::int64_t>& len,
              const std::string& layout, const std::vector<std::int64_t>& strides) {
  const auto stride = kernels::label_strides(labels, layout, strides);
  std::int64_t total = 1;
  for (char c : labels) total *= len.at(c);
  Table out(total);
  if (total == 0) return out;
  out[0] = 0;
  // Each label multiplies the entries so far by its length, expanded in place from the back.
  std::int64_t filled = 1;
  for (std::size_t a = 0; a < labels.size(); ++a) {
    const std::int64_t n = len.at(labels[a]);
    for (std::int64_t o = filled - 1; o >= 0; --o) {
      const std::int64_t base = out[o];
      for (std::int64_t i = n - 1; i >= 0; --i) out[o * n + i] = base + i * stride[a];
    }
    filled *= n;
  }
  return out;
}

std::vector<std::int64_t> spacing(const Table& off, std::int64_t width) {
  const std::int64_t n = off.size();
  std::vector<std::int64_t> out;
  for (std::int64_t b = 0; b < n; b += width) {
    const std::int64_t e = std::min(n, b + width);
    std::int64_t step = e - b > 1 ? off[b + 1] - off[b] : 1;
    for (std::int64_t i = b + 1; i < e && step != kUneven; ++i)
      if (off[i] - off[i - 1] != step) step = kUneven;
    out.push_back(step);
  }
  return out;
}

std::vector<char> unit_runs(const Table& off, std::int64_t width, std::int64_t run,
                            const std::vector<std::int64_t>& step) {
  const std::int64_t n = off.size();
  std::vector<char> out;
  for (std::int64_t b = 0; b < n; b += width) {
    const std::int64_t e = std::min(n, b + width);
    bool runs = step[static_cast<std::size_t>(b / width)] == kUneven && (e - b) % run == 0;
    for (std::int64_t i = b + 1; i < e && runs; ++i)
      if ((i - b) % run != 0) runs = off[i] == off[i - 1] + 1;
    out.push_back(runs);
  }
  return out;
}

std::vector<char> line_groups(const Table& cm, std::int64_t mr, std::int64_t line) {
  const std::int64_t panels = cm.size() / mr;  // the whole ones
  std::vector<char> out(static_cast<std::size_t>((cm.size() + mr - 1) / mr), 0);
  bool any = false;
  for (std::int64_t q = 0; q + line <= panels;) {
    bool group = true;
    for (std::int64_t j = 1; j < line && group; ++j)
      for (std::int64_t i = 0; i < mr && group; ++i)
        group = cm[(q + j) * mr + i] == cm[q * mr + i] + j;
    out[static_cast<std::size_t>(q)] = group;
    any |= group;
    q += group ? line : 1;
  }
  if (!any) out.clear();
  return out;
}

}  // namespace einsumdb::tensor_gemm
