#include "canon/canonicalize.hpp"

#include <algorithm>
#include <numeric>

#include <xxhash.h>

#include "canon/error.hpp"

namespace einsumdb {
namespace {

struct Rebuilt {
  BatchedEinsum form;
  Substitution sigma;
  std::vector<std::string> array_order;  // canonical array k -> "Ak"; in order
};

std::string array_name(std::size_t k) {
  return "A" + std::to_string(k);
}
std::string symbol_name(std::size_t k) {
  return "N" + std::to_string(k);
}

// The nodes of class `cls` sorted by canonical position: result[c] = k of the node at the c-th
// smallest position.
std::vector<std::size_t> order_of_class(const InducedGraph& g, NodeClass cls,
                                        const std::vector<int>& position) {
  std::vector<std::size_t> order(static_cast<std::size_t>(g.count(cls)));
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    return position[g.node(cls, static_cast<int>(a))] < position[g.node(cls, static_cast<int>(b))];
  });
  return order;
}

Rebuilt rebuild(const BatchedEinsum& e, const InducedGraph& g, const std::vector<int>& labeling) {
  std::vector<int> position(labeling.size());
  for (std::size_t p = 0; p < labeling.size(); ++p) position[labeling[p]] = static_cast<int>(p);

  Rebuilt r;
  Substitution& s = r.sigma;
  s.row = order_of_class(g, NodeClass::output, position);
  s.operand = order_of_class(g, NodeClass::argument_position, position);

  // Indices by first appearance: output, then operands in canonical order.
  std::array<char, 128> index_name{};
  std::size_t next_index = 0;
  auto name_index = [&](char c) {
    char& slot = index_name[static_cast<unsigned char>(c)];
    if (!slot) {
      slot = canonical_index_name(next_index++);
      s.index.emplace(slot, c);
    }
    return slot;
  };
  auto rename = [&](const std::string& list) {
    std::string out(list.size(), ' ');
    for (std::size_t d = 0; d < list.size(); ++d) out[d] = name_index(list[d]);
    return out;
  };
  BatchedEinsum& f = r.form;
  f.join = e.join;
  f.agg = e.agg;
  f.output = rename(e.output);
  for (std::size_t j : s.operand) f.inputs.push_back(rename(e.inputs[j]));

  // Arrays by first appearance over rows and operands in canonical order.
  std::map<std::string_view, std::string> canonical_array;
  for (std::size_t i : s.row) {
    std::vector<std::string> row;
    for (std::size_t j : s.operand) {
      const std::string& name = e.batch[i][j];
      auto [it, inserted] = canonical_array.try_emplace(name);
      if (inserted) {
        it->second = array_name(r.array_order.size());
        r.array_order.push_back(it->second);
        s.array.emplace(it->second, name);
      }
      row.push_back(it->second);
    }
    f.batch.push_back(std::move(row));
  }

  // Symbolic lengths by the first canonical index that has them.
  const auto lengths = e.index_lengths();
  std::map<std::string, std::string> canonical_symbol;
  std::vector<std::pair<char, char>> by_canonical(s.index.begin(), s.index.end());
  std::sort(by_canonical.begin(), by_canonical.end(), [](auto a, auto b) {
    // canonical order is a..z then A..Z
    auto rank = [](char c) { return c >= 'a' ? c - 'a' : 26 + (c - 'A'); };
    return rank(a.first) < rank(b.first);
  });
  for (const auto& [cname, input] : by_canonical) {
    (void)cname;
    const Length& len = lengths.at(input);
    if (len.symbolic() && !canonical_symbol.count(len.symbol)) {
      const std::string name = symbol_name(canonical_symbol.size());
      canonical_symbol.emplace(len.symbol, name);
      s.symbol.emplace(name, len.symbol);
    }
  }
  for (const auto& [input_name, cname] : canonical_array) {
    ArrayInfo info = e.arrays.at(std::string(input_name));
    for (auto& len : info.shape)
      if (len.symbolic()) len.symbol = canonical_symbol.at(len.symbol);
    f.arrays.emplace(cname, std::move(info));
  }
  return r;
}

void append_arrays(std::string& out, const BatchedEinsum& f, bool with_shapes) {
  // Arrays in canonical order A0, A1, ..., not the map's lexicographic order.
  for (std::size_t k = 0; k < f.arrays.size(); ++k) {
    const std::string name = array_name(k);
    const auto it = f.arrays.find(name);
    EINSUMDB_ASSERT(it != f.arrays.end(),
                    "canonical arrays are A0..A" + std::to_string(f.arrays.size() - 1));
    if (k) out += ',';
    out += name;
    out += ':';
    out += to_string(it->second.dtype);
    if (with_shapes) {
      out += '[';
      for (std::size_t d = 0; d < it->second.shape.size(); ++d) {
        if (d) out += ',';
        out += to_string(it->second.shape[d]);
      }
      out += ']';
    }
  }
}

std::string text_of(const BatchedEinsum& f, bool with_shapes) {
  std::string out = f.einsum_string();
  out += ';';
  out += to_string(f.join);
  out += ',';
  out += to_string(f.agg);
  out += ';';
  for (std::size_t i = 0; i < f.batch.size(); ++i) {
    if (i) out += '|';
    for (std::size_t j = 0; j < f.batch[i].size(); ++j) {
      if (j) out += ',';
      out += f.batch[i][j];
    }
  }
  out += ';';
  append_arrays(out, f, with_shapes);
  return out;
}

}  // namespace

char canonical_index_name(std::size_t k) {
  EINSUMDB_ASSERT(k < 52, "at most 52 indices");
  return k < 26 ? static_cast<char>('a' + k) : static_cast<char>('A' + (k - 26));
}

std::string canonical_text(const BatchedEinsum& f) {
  return text_of(f, true);
}
std::string structure_text(const BatchedEinsum& f) {
  return text_of(f, false);
}

std::string hash_text(std::string_view text) {
  XXH128_canonical_t bytes;
  XXH128_canonicalFromHash(&bytes, XXH3_128bits(text.data(), text.size()));
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out(32, '0');
  for (std::size_t i = 0; i < 16; ++i) {
    out[2 * i] = kHex[bytes.digest[i] >> 4];
    out[2 * i + 1] = kHex[bytes.digest[i] & 15];
  }
  return out;
}

Canonical canonicalize(const BatchedEinsum& e, const CanonOptions& options) {
  validate(e);
  Canonical c;
  {
    const InducedGraph g = build_induced_graph(e, {.with_lengths = true});
    Rebuilt r = rebuild(e, g, canonical_labeling(g, options.nauty));
    c.form = std::move(r.form);
    c.sigma = std::move(r.sigma);
  }
  c.key = canonical_text(c.form);
  c.hash = hash_text(c.key);
  if (options.structure) {
    const InducedGraph g = build_induced_graph(e, {.with_lengths = false});
    const Rebuilt r = rebuild(e, g, canonical_labeling(g, options.nauty));
    c.structure_key = structure_text(r.form);
    c.structure_hash = hash_text(c.structure_key);
    // Lengths of the structure form's indices, symbols in the canonical form's names.
    std::map<std::string, std::string> to_canonical_symbol;
    for (const auto& [cname, input] : c.sigma.symbol) to_canonical_symbol.emplace(input, cname);
    const auto lengths = e.index_lengths();
    for (std::size_t k = 0; k < r.sigma.index.size(); ++k) {
      Length len = lengths.at(r.sigma.index.at(canonical_index_name(k)));
      if (len.symbolic()) len.symbol = to_canonical_symbol.at(len.symbol);
      c.structure_lengths.push_back(std::move(len));
    }
  }
  return c;
}

BatchedEinsum apply(const Substitution& sigma, const BatchedEinsum& f) {
  BatchedEinsum e;
  e.join = f.join;
  e.agg = f.agg;
  auto rename = [&](const std::string& list) {
    std::string out = list;
    for (char& c : out) c = sigma.index.at(c);
    return out;
  };
  e.output = rename(f.output);
  e.inputs.resize(f.inputs.size());
  for (std::size_t c = 0; c < f.inputs.size(); ++c)
    e.inputs[sigma.operand.at(c)] = rename(f.inputs[c]);
  e.batch.assign(f.batch.size(), std::vector<std::string>(f.inputs.size()));
  for (std::size_t r = 0; r < f.batch.size(); ++r)
    for (std::size_t c = 0; c < f.batch[r].size(); ++c)
      e.batch[sigma.row.at(r)][sigma.operand.at(c)] = sigma.array.at(f.batch[r][c]);
  for (const auto& [name, info] : f.arrays) {
    ArrayInfo renamed = info;
    for (auto& len : renamed.shape)
      if (len.symbolic()) len.symbol = sigma.symbol.at(len.symbol);
    e.arrays.emplace(sigma.array.at(name), std::move(renamed));
  }
  return e;
}

nlohmann::ordered_json to_json(const Canonical& c) {
  using ojson = nlohmann::ordered_json;
  ojson j;
  j["key"] = c.key;
  j["hash"] = c.hash;
  if (!c.structure_key.empty()) {
    j["structure_key"] = c.structure_key;
    j["structure_hash"] = c.structure_hash;
  }
  j["canonical"] = to_json(c.form);
  ojson sigma;
  ojson index = ojson::object(), array = ojson::object(), operand = ojson::object(),
        row = ojson::object(), symbol = ojson::object();
  // Indices in canonical order a, b, ..., then arrays A0, A1, ...
  for (std::size_t k = 0; k < c.sigma.index.size(); ++k) {
    const char name = canonical_index_name(k);
    index[std::string(1, name)] = std::string(1, c.sigma.index.at(name));
  }
  for (std::size_t k = 0; k < c.sigma.array.size(); ++k) {
    const std::string name = "A" + std::to_string(k);
    array[name] = c.sigma.array.at(name);
  }
  for (std::size_t k = 0; k < c.sigma.operand.size(); ++k)
    operand[std::to_string(k)] = c.sigma.operand[k];
  for (std::size_t k = 0; k < c.sigma.row.size(); ++k) row[std::to_string(k)] = c.sigma.row[k];
  for (std::size_t k = 0; k < c.sigma.symbol.size(); ++k) {
    const std::string name = "N" + std::to_string(k);
    symbol[name] = c.sigma.symbol.at(name);
  }
  sigma["index"] = std::move(index);
  sigma["array"] = std::move(array);
  sigma["operand"] = std::move(operand);
  sigma["row"] = std::move(row);
  sigma["symbol"] = std::move(symbol);
  j["sigma"] = std::move(sigma);
  return j;
}

}  // namespace einsumdb
