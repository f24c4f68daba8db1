#include "einsumdb/canon/model.hpp"

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstdlib>
#include <set>

#include "einsumdb/canon/enum_names.hpp"
#include "einsumdb/core/error.hpp"

namespace einsumdb {

namespace {

struct DtypeInfo {
  Dtype dtype;
  std::string_view name;
  std::string_view long_name;
  int rank;
  std::size_t bytes;
};

constexpr std::array<DtypeInfo, 8> kDtypes{{
    {Dtype::i8, "i8", "int8", 1, 1},
    {Dtype::i32, "i32", "int32", 2, 4},
    {Dtype::i64, "i64", "int64", 3, 8},
    {Dtype::f16, "f16", "float16", 4, 2},
    {Dtype::f32, "f32", "float32", 5, 4},
    {Dtype::f64, "f64", "float64", 6, 8},
    {Dtype::c64, "c64", "complex64", 7, 8},
    {Dtype::c128, "c128", "complex128", 8, 16},
}};

const DtypeInfo& info(Dtype d) {
  return kDtypes[static_cast<std::size_t>(d)];
}

constexpr std::array<std::string_view, 7> kJoinNames{"mul",     "add", "sub", "sqdiff",
                                                     "absdiff", "max", "min"};
constexpr std::array<std::string_view, 3> kAggNames{"sum", "max", "min"};

bool is_symbol(std::string_view s) {
  if (s.empty()) return false;
  auto alpha = [](char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; };
  if (!alpha(s[0])) return false;
  for (char c : s)
    if (!alpha(c) && !(c >= '0' && c <= '9')) return false;
  return true;
}

std::string quote(std::string_view s) {
  return "'" + std::string(s) + "'";
}

}  // namespace

std::string_view to_string(Dtype d) {
  return info(d).name;
}

std::optional<Dtype> parse_dtype(std::string_view s) {
  for (const auto& d : kDtypes)
    if (s == d.name || s == d.long_name) return d.dtype;
  return std::nullopt;
}

int dtype_rank(Dtype d) {
  return info(d).rank;
}
std::size_t dtype_bytes(Dtype d) {
  return info(d).bytes;
}

Dtype promote_dtypes(Dtype a, Dtype b) {
  const auto floating = [](Dtype d) {
    return d == Dtype::f32 || d == Dtype::f64 || d == Dtype::c64 || d == Dtype::c128;
  };
  if (!floating(a) || !floating(b)) return dtype_rank(b) > dtype_rank(a) ? b : a;
  const bool complex = a == Dtype::c64 || a == Dtype::c128 || b == Dtype::c64 || b == Dtype::c128;
  const bool wide = a == Dtype::f64 || a == Dtype::c128 || b == Dtype::f64 || b == Dtype::c128;
  return complex ? (wide ? Dtype::c128 : Dtype::c64) : (wide ? Dtype::f64 : Dtype::f32);
}

const std::vector<Dtype>& all_dtypes() {
  static const std::vector<Dtype> all = [] {
    std::vector<Dtype> v;
    for (const auto& d : kDtypes) v.push_back(d.dtype);
    return v;
  }();
  return all;
}

std::string_view to_string(JoinOp op) {
  return enum_name(kJoinNames, op);
}
std::string_view to_string(AggOp op) {
  return enum_name(kAggNames, op);
}
std::optional<JoinOp> parse_join(std::string_view s) {
  return enum_from_name<JoinOp>(kJoinNames, s);
}
std::optional<AggOp> parse_agg(std::string_view s) {
  return enum_from_name<AggOp>(kAggNames, s);
}

bool is_commutative(JoinOp op) {
  return op != JoinOp::sub;
}

std::string to_string(const Length& l) {
  return l.symbolic() ? l.symbol : std::to_string(l.value);
}

std::string BatchedEinsum::einsum_string() const {
  std::string s;
  for (std::size_t j = 0; j < inputs.size(); ++j) {
    if (j) s += ',';
    s += inputs[j];
  }
  s += "->";
  s += output;
  return s;
}

std::map<char, Length> BatchedEinsum::index_lengths() const {
  std::map<char, Length> lengths;
  if (batch.empty()) return lengths;
  for (std::size_t j = 0; j < inputs.size(); ++j) {
    const auto it = arrays.find(batch[0][j]);
    EINSUMDB_ASSERT(it != arrays.end(), "index_lengths needs a validated einsum");
    for (std::size_t d = 0; d < inputs[j].size(); ++d)
      lengths.emplace(inputs[j][d], it->second.shape.at(d));
  }
  return lengths;
}

void validate(const BatchedEinsum& e) {
  const std::size_t n = e.inputs.size();
  if (n == 0)
    throw SpecError("einsum has no operands; expected at least one index list before '->'");
  for (std::size_t j = 0; j < n; ++j)
    for (char c : e.inputs[j])
      if (!is_index_char(c))
        throw SpecError("operand " + std::to_string(j) + " ('" + e.inputs[j] +
                        "'): invalid index character " + quote(std::string(1, c)) +
                        "; expected a letter a-z or A-Z");

  // Output indices: letters, distinct, each appearing in some input.
  for (std::size_t d = 0; d < e.output.size(); ++d) {
    const char c = e.output[d];
    if (!is_index_char(c))
      throw SpecError("output ('" + e.output + "'): invalid index character " +
                      quote(std::string(1, c)) + "; expected a letter a-z or A-Z");
    if (e.output.find(c) != d)
      throw SpecError("output ('" + e.output + "'): index '" + std::string(1, c) +
                      "' appears more than once; output indices must be distinct");
    bool found = false;
    for (const auto& in : e.inputs) found = found || in.find(c) != std::string::npos;
    if (!found)
      throw SpecError("output index '" + std::string(1, c) +
                      "' does not appear in any input operand");
  }

  if (e.batch.empty()) throw SpecError("batch is empty; expected at least one row of arrays");

  // Every row has n arrays, each with a shape that agrees with its index list. Where each
  // index's length was first seen is kept as numbers; text is built only for an error.
  struct Seen {
    const Length* length = nullptr;
    const std::string* array = nullptr;
    std::size_t axis = 0;
  };
  std::array<Seen, 128> index_length{};
  std::set<std::string_view> used;
  auto at = [](const std::string& array, std::size_t axis) {
    return "array " + quote(array) + " axis " + std::to_string(axis);
  };
  for (std::size_t i = 0; i < e.batch.size(); ++i) {
    const auto& row = e.batch[i];
    if (row.size() != n)
      throw SpecError("batch row " + std::to_string(i) + " has " + std::to_string(row.size()) +
                      " arrays; expected " + std::to_string(n) + " (one per operand of '" +
                      e.einsum_string() + "')");
    for (std::size_t j = 0; j < n; ++j) {
      const std::string& name = row[j];
      if (name.empty())
        throw SpecError("batch row " + std::to_string(i) + ", operand " + std::to_string(j) +
                        ": empty array name");
      const auto it = e.arrays.find(name);
      if (it == e.arrays.end())
        throw SpecError("array " + quote(name) + " (batch row " + std::to_string(i) + ", operand " +
                        std::to_string(j) + ") has no shape; give it one");
      used.insert(name);
      const auto& shape = it->second.shape;
      const std::string& idx = e.inputs[j];
      if (shape.size() != idx.size())
        throw SpecError("array " + quote(name) + " has rank " + std::to_string(shape.size()) +
                        " but operand " + std::to_string(j) + " ('" + idx + "') indexes it with " +
                        std::to_string(idx.size()) + " indices (batch row " + std::to_string(i) +
                        ")");
      for (std::size_t d = 0; d < shape.size(); ++d) {
        const Length& len = shape[d];
        if (len.symbolic() ? !is_symbol(len.symbol) : len.value < 0)
          throw SpecError(at(name, d) + ": invalid length " + quote(to_string(len)) +
                          "; expected a length (0 or more) or a symbol such as 'Ne'");
        Seen& seen = index_length[static_cast<unsigned char>(idx[d])];
        if (!seen.length) {
          seen = {&len, &name, d};
        } else if (*seen.length != len) {
          throw SpecError("index '" + std::string(1, idx[d]) + "' has length " +
                          to_string(*seen.length) + " at " + at(*seen.array, seen.axis) +
                          " but length " + to_string(len) + " at " + at(name, d) + " (batch row " +
                          std::to_string(i) + ", operand " + std::to_string(j) +
                          "); equal indices need equal lengths");
        }
      }
    }
  }
  for (const auto& [name, info] : e.arrays) {
    if (!used.count(name))
      throw SpecError("array " + quote(name) + " has a shape but is not used in any batch row");
    for (const auto& len : info.shape)
      if (len.symbolic() ? !is_symbol(len.symbol) : len.value < 0)
        throw SpecError("array " + quote(name) + ": invalid length " + quote(to_string(len)));
  }
}

nlohmann::ordered_json to_json(const BatchedEinsum& e) {
  nlohmann::ordered_json j;
  j["einsum"] = e.einsum_string();
  j["batch"] = e.batch;
  auto& shapes = j["shapes"] = nlohmann::ordered_json::object();
  auto& dtypes = j["dtypes"] = nlohmann::ordered_json::object();
  for (const auto& [name, info] : e.arrays) {
    auto shape = nlohmann::ordered_json::array();
    for (const auto& l : info.shape) {
      if (l.symbolic())
        shape.push_back(l.symbol);
      else
        shape.push_back(l.value);
    }
    shapes[name] = std::move(shape);
    dtypes[name] = std::string(to_string(info.dtype));
  }
  j["ops"] = {{"join", std::string(to_string(e.join))}, {"agg", std::string(to_string(e.agg))}};
  return j;
}

BatchedEinsum one_row_einsum(const std::vector<std::string>& inputs, const std::string& output,
                             const std::vector<std::pair<std::string, ArrayInfo>>& operands,
                             JoinOp join, AggOp agg) {
  BatchedEinsum e;
  e.inputs = inputs;
  e.output = output;
  e.join = join;
  e.agg = agg;
  e.batch.emplace_back();
  for (const auto& [name, info] : operands) {
    e.batch[0].push_back(name);
    e.arrays.emplace(name, info);
  }
  return e;
}

std::vector<std::string> symbols(const BatchedEinsum& e) {
  std::set<std::string> found;
  for (const auto& [name, info] : e.arrays)
    for (const auto& l : info.shape)
      if (l.symbolic()) found.insert(l.symbol);
  return {found.begin(), found.end()};
}

BatchedEinsum bind_symbols(const BatchedEinsum& e, const Binding& b) {
  const auto have = symbols(e);
  for (const auto& [symbol, length] : b) {
    if (!std::binary_search(have.begin(), have.end(), symbol)) {
      std::string list;
      for (const auto& s : have) list += (list.empty() ? "" : ", ") + s;
      throw SpecError(
          "binding names the symbol '" + symbol + "', which the einsum does not have (" +
          (have.empty() ? std::string("it has no symbolic length") : "its symbols: " + list) + ")");
    }
    if (length < 1)
      throw SpecError("symbol '" + symbol + "' bound to " + std::to_string(length) +
                      "; a length is at least 1");
  }
  BatchedEinsum out = e;
  for (auto& [name, info] : out.arrays)
    for (auto& l : info.shape)
      if (l.symbolic())
        if (const auto it = b.find(l.symbol); it != b.end()) l = Length::of(it->second);
  return out;
}

std::map<std::string, std::vector<std::size_t>> drop_broadcast_axes(BatchedEinsum& e) {
  const std::size_t n = e.inputs.size();
  // Per row: the (operand, axis) pairs that broadcast.
  std::vector<std::vector<std::pair<std::size_t, std::size_t>>> rows;
  for (const auto& row : e.batch) {
    if (row.size() != n) return {};  // validate() reports it
    // Per index: whether some operand of this row gives it a length other than 1.
    bool wide[128] = {};
    for (std::size_t k = 0; k < n; ++k) {
      const auto it = e.arrays.find(row[k]);
      if (it == e.arrays.end() || it->second.shape.size() != e.inputs[k].size()) return {};
      for (std::size_t a = 0; a < e.inputs[k].size(); ++a) {
        const Length& l = it->second.shape[a];
        if (l.symbolic() || l.value != 1) wide[static_cast<unsigned char>(e.inputs[k][a])] = true;
      }
    }
    std::vector<std::pair<std::size_t, std::size_t>> dropped;
    for (std::size_t k = 0; k < n; ++k) {
      const auto& shape = e.arrays.at(row[k]).shape;
      for (std::size_t a = 0; a < e.inputs[k].size(); ++a)
        if (!shape[a].symbolic() && shape[a].value == 1 &&
            wide[static_cast<unsigned char>(e.inputs[k][a])])
          dropped.emplace_back(k, a);
    }
    rows.push_back(std::move(dropped));
  }
  if (rows.empty() || rows[0].empty()) {
    for (std::size_t r = 1; r < rows.size(); ++r)
      if (!rows[r].empty())
        throw SpecError("batch row " + std::to_string(r) + " broadcasts a size-1 axis (array '" +
                        e.batch[r][rows[r][0].first] + "' axis " +
                        std::to_string(rows[r][0].second) +
                        ") that row 0 does not; the rows of a batch must broadcast alike");
    return {};
  }
  for (std::size_t r = 1; r < rows.size(); ++r)
    if (rows[r] != rows[0])
      throw SpecError("batch rows 0 and " + std::to_string(r) +
                      " broadcast different size-1 axes; the rows of a batch must broadcast alike");
  // Each array loses the axes it broadcasts, the same ones wherever it is used.
  std::map<std::string, std::vector<std::size_t>> axes;
  for (const auto& row : e.batch)
    for (std::size_t k = 0; k < n; ++k) {
      std::vector<std::size_t> mine;
      for (const auto& [op, a] : rows[0])
        if (op == k) mine.push_back(a);
      const auto [it, added] = axes.emplace(row[k], mine);
      if (!added && it->second != mine)
        throw SpecError("array '" + row[k] +
                        "' is broadcast along a size-1 axis in one of its uses but not in "
                        "another; give each use an array of its own");
    }
  for (std::size_t k = 0; k < n; ++k) {
    std::string kept;
    for (std::size_t a = 0; a < e.inputs[k].size(); ++a)
      if (std::find(rows[0].begin(), rows[0].end(), std::make_pair(k, a)) == rows[0].end())
        kept += e.inputs[k][a];
    e.inputs[k] = kept;
  }
  for (auto it = axes.begin(); it != axes.end();) {
    if (it->second.empty()) {
      it = axes.erase(it);
      continue;
    }
    auto& shape = e.arrays.at(it->first).shape;
    for (std::size_t a = it->second.size(); a-- > 0;)
      shape.erase(shape.begin() + static_cast<std::ptrdiff_t>(it->second[a]));
    ++it;
  }
  return axes;
}

}  // namespace einsumdb
