#include "einsumdb/canon/canonicalize.hpp"

#include <algorithm>
#include <numeric>

#include <xxhash.h>

#include "einsumdb/core/error.hpp"

namespace einsumdb {
namespace {

// The batched einsum with arrays as integer ids, so that grouping rows and reading the
// canonical form off a labeling touch no strings until the result is written.
struct Dense {
  std::vector<const std::string*> name;  // array id -> name (ids in map order)
  std::vector<const ArrayInfo*> info;    // array id -> shape and dtype
  std::vector<std::vector<int>> batch;   // row -> operand -> array id
  std::array<const Length*, 128> index_length{};

  std::map<std::string_view, int> id;  // name -> array id

  explicit Dense(const BatchedEinsum& e) {
    for (const auto& [n, i] : e.arrays) {
      id.emplace(n, static_cast<int>(name.size()));
      name.push_back(&n);
      info.push_back(&i);
    }
    for (const auto& row : e.batch) {
      std::vector<int> ids;
      ids.reserve(row.size());
      for (const auto& n : row) ids.push_back(id.at(n));
      batch.push_back(std::move(ids));
    }
    for (std::size_t j = 0; j < e.inputs.size(); ++j)
      for (std::size_t d = 0; d < e.inputs[j].size(); ++d)
        index_length[static_cast<unsigned char>(e.inputs[j][d])] = &info[batch[0][j]]->shape[d];
  }
};

// Rows grouped into twin classes: rows that read the same shared arrays at the same operand
// positions and, elsewhere, arrays private to the row (used in no other row) in the same
// pattern and dtypes. Swapping two twins together with their private arrays is an automorphism,
// so a class is labeled once, as one row with its multiplicity, and expanded afterwards. The
// classes depend only on the einsum's structure, not on its names, so keys stay canonical;
// without this, nauty searches one level per interchangeable row.
struct RowClasses {
  std::vector<std::vector<std::size_t>> members;  // class k -> its input rows, ascending
  std::vector<int> multiplicity;                  // class k -> members[k].size()
  BatchedEinsum reduced;                          // the first member of each class
  std::vector<char> private_argument;             // per array of `reduced`: read by one row only
  // Every class is one row: `reduced` would be the input itself, and is left empty.
  bool singletons = false;

  // What is labeled: the first member of each class.
  const BatchedEinsum& labeled(const BatchedEinsum& input) const {
    return singletons ? input : reduced;
  }
};

RowClasses twin_row_classes(const BatchedEinsum& e, const Dense& dense, bool enabled) {
  RowClasses c;
  const std::size_t rows = dense.batch.size();
  if (!enabled) {
    for (std::size_t i = 0; i < rows; ++i) c.members.push_back({i});
  } else {
    constexpr std::size_t kShared = static_cast<std::size_t>(-1), kUnseen = kShared - 1;
    std::vector<std::size_t> row_of(dense.name.size(), kUnseen);  // array -> its only row
    for (std::size_t i = 0; i < rows; ++i)
      for (int a : dense.batch[i]) row_of[a] = row_of[a] == kUnseen || row_of[a] == i ? i : kShared;
    std::map<std::vector<long>, std::size_t> class_of;
    for (std::size_t i = 0; i < rows; ++i) {
      const auto& row = dense.batch[i];
      std::vector<long> signature;
      signature.reserve(row.size());
      for (std::size_t j = 0; j < row.size(); ++j) {
        if (row_of[row[j]] == kShared) {
          signature.push_back(row[j]);
        } else {  // private: where it first occurs in the row, and its dtype
          const auto first = std::find(row.begin(), row.end(), row[j]) - row.begin();
          signature.push_back(-1 - (first * 16 + static_cast<long>(dense.info[row[j]]->dtype)));
        }
      }
      const auto [it, inserted] = class_of.emplace(std::move(signature), c.members.size());
      if (inserted) c.members.emplace_back();
      c.members[it->second].push_back(i);
    }
  }
  for (const auto& m : c.members) c.multiplicity.push_back(static_cast<int>(m.size()));
  c.singletons = c.members.size() == rows;
  if (!c.singletons) {
    BatchedEinsum& r = c.reduced;
    r.inputs = e.inputs;
    r.output = e.output;
    r.join = e.join;
    r.agg = e.agg;
    for (const auto& m : c.members) {
      r.batch.push_back(e.batch[m.front()]);
      for (int a : dense.batch[m.front()]) r.arrays.emplace(*dense.name[a], *dense.info[a]);
    }
  }
  if (!enabled) {
    c.multiplicity.clear();
    return c;
  }
  // Which arrays of the reduced einsum belong to their row (and are replicated with it).
  std::vector<std::size_t> uses(dense.name.size(), 0);
  std::vector<std::size_t> last_row(dense.name.size(), static_cast<std::size_t>(-1));
  for (std::size_t i = 0; i < rows; ++i)
    for (int a : dense.batch[i])
      if (last_row[a] != i) {
        last_row[a] = i;
        ++uses[a];
      }
  const BatchedEinsum& r = c.labeled(e);
  c.private_argument.resize(r.arrays.size());
  std::size_t k = 0;
  for (const auto& [name, info] : r.arrays) c.private_argument[k++] = uses[dense.id.at(name)] == 1;
  return c;
}

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

// The canonical order read off a labeling: rows and operands in the order of their nodes,
// indices, arrays and symbols by first appearance.
struct Order {
  std::vector<std::size_t> row;      // canonical row -> input row
  std::vector<std::size_t> operand;  // canonical operand -> input operand
  std::array<char, 128> index{};     // input index -> canonical name
  std::string index_input;           // canonical index k -> input index
  std::vector<int> array;            // input array id -> canonical number (-1: none yet)
  std::vector<int> array_input;      // canonical array k -> input array id
  std::vector<const std::string*> symbol_input;  // canonical symbol k -> input symbol
};

Order read_order(const BatchedEinsum& e, const Dense& dense, const RowClasses& classes,
                 const InducedGraph& g, const std::vector<int>& labeling) {
  std::vector<int> position(labeling.size());
  for (std::size_t p = 0; p < labeling.size(); ++p) position[labeling[p]] = static_cast<int>(p);
  Order o;
  for (std::size_t k : order_of_class(g, NodeClass::output, position))
    o.row.insert(o.row.end(), classes.members[k].begin(), classes.members[k].end());
  o.operand = order_of_class(g, NodeClass::argument_position, position);
  auto name_index = [&](char c) {
    char& slot = o.index[static_cast<unsigned char>(c)];
    if (!slot) {
      slot = canonical_index_name(o.index_input.size());
      o.index_input += c;
    }
  };
  for (char c : e.output) name_index(c);
  for (std::size_t j : o.operand)
    for (char c : e.inputs[j]) name_index(c);
  o.array.assign(dense.name.size(), -1);
  for (std::size_t i : o.row)
    for (std::size_t j : o.operand) {
      const int a = dense.batch[i][j];
      if (o.array[a] < 0) {
        o.array[a] = static_cast<int>(o.array_input.size());
        o.array_input.push_back(a);
      }
    }
  for (char c : o.index_input) {
    const Length& len = *dense.index_length[static_cast<unsigned char>(c)];
    if (len.symbolic() && std::none_of(o.symbol_input.begin(), o.symbol_input.end(),
                                       [&](const std::string* s) { return *s == len.symbol; }))
      o.symbol_input.push_back(&len.symbol);
  }
  return o;
}

std::string canonical_symbol(const Order& o, const std::string& input) {
  for (std::size_t k = 0; k < o.symbol_input.size(); ++k)
    if (*o.symbol_input[k] == input) return symbol_name(k);
  EINSUMDB_ASSERT(false, "symbol '" + input + "' was not named");
}

// The key text, written straight from the order (see canonical_text for the format).
std::string text_of(const BatchedEinsum& e, const Dense& dense, const Order& o, bool shapes) {
  std::string out;
  for (std::size_t c = 0; c < o.operand.size(); ++c) {
    if (c) out += ',';
    for (char x : e.inputs[o.operand[c]]) out += o.index[static_cast<unsigned char>(x)];
  }
  out += "->";
  for (char x : e.output) out += o.index[static_cast<unsigned char>(x)];
  out += ';';
  out += to_string(e.join);
  out += ',';
  out += to_string(e.agg);
  out += ';';
  for (std::size_t r = 0; r < o.row.size(); ++r) {
    if (r) out += '|';
    for (std::size_t c = 0; c < o.operand.size(); ++c) {
      if (c) out += ',';
      out += 'A';
      out += std::to_string(o.array[dense.batch[o.row[r]][o.operand[c]]]);
    }
  }
  out += ';';
  for (std::size_t k = 0; k < o.array_input.size(); ++k) {
    const ArrayInfo& info = *dense.info[o.array_input[k]];
    if (k) out += ',';
    out += 'A';
    out += std::to_string(k);
    out += ':';
    out += to_string(info.dtype);
    if (!shapes) continue;
    out += '[';
    for (std::size_t d = 0; d < info.shape.size(); ++d) {
      if (d) out += ',';
      out += info.shape[d].symbolic() ? canonical_symbol(o, info.shape[d].symbol)
                                      : std::to_string(info.shape[d].value);
    }
    out += ']';
  }
  return out;
}

// The canonical batched einsum and the σ maps.
void write_form(const BatchedEinsum& e, const Dense& dense, const Order& o, Canonical& c) {
  BatchedEinsum& f = c.form;
  Substitution& s = c.sigma;
  f.join = e.join;
  f.agg = e.agg;
  auto rename = [&](const std::string& list) {
    std::string out = list;
    for (char& x : out) x = o.index[static_cast<unsigned char>(x)];
    return out;
  };
  f.output = rename(e.output);
  for (std::size_t j : o.operand) f.inputs.push_back(rename(e.inputs[j]));
  std::vector<std::string> names;
  names.reserve(o.array_input.size());
  for (std::size_t k = 0; k < o.array_input.size(); ++k) names.push_back(array_name(k));
  f.batch.reserve(o.row.size());
  for (std::size_t i : o.row) {
    std::vector<std::string> row;
    row.reserve(o.operand.size());
    for (std::size_t j : o.operand) row.push_back(names[o.array[dense.batch[i][j]]]);
    f.batch.push_back(std::move(row));
  }
  for (std::size_t k = 0; k < o.array_input.size(); ++k) {
    ArrayInfo info = *dense.info[o.array_input[k]];
    for (auto& len : info.shape)
      if (len.symbolic()) len.symbol = canonical_symbol(o, len.symbol);
    f.arrays.emplace(names[k], std::move(info));
    s.array.emplace(names[k], *dense.name[o.array_input[k]]);
  }
  for (std::size_t k = 0; k < o.index_input.size(); ++k)
    s.index.emplace(canonical_index_name(k), o.index_input[k]);
  s.operand = o.operand;
  s.row = o.row;
  for (std::size_t k = 0; k < o.symbol_input.size(); ++k)
    s.symbol.emplace(symbol_name(k), *o.symbol_input[k]);
}

}  // namespace

char canonical_index_name(std::size_t k) {
  EINSUMDB_ASSERT(k < 52, "at most 52 indices");
  return k < 26 ? static_cast<char>('a' + k) : static_cast<char>('A' + (k - 26));
}

std::string canonical_text(const BatchedEinsum& f) {
  const Dense dense(f);
  Order o;
  o.row.resize(f.batch.size());
  std::iota(o.row.begin(), o.row.end(), std::size_t{0});
  o.operand.resize(f.inputs.size());
  std::iota(o.operand.begin(), o.operand.end(), std::size_t{0});
  for (int c = 0; c < 128; ++c) o.index[c] = static_cast<char>(c);
  // A canonical form's arrays are A0, A1, ... and its symbols N0, N1, ...
  o.array.assign(dense.name.size(), -1);
  o.array_input.assign(dense.name.size(), -1);
  for (std::size_t a = 0; a < dense.name.size(); ++a) {
    const int k = std::stoi(dense.name[a]->substr(1));
    o.array[a] = k;
    o.array_input.at(static_cast<std::size_t>(k)) = static_cast<int>(a);
  }
  std::map<int, const std::string*> symbols;
  for (const Length* len : dense.index_length)
    if (len && len->symbolic()) symbols.emplace(std::stoi(len->symbol.substr(1)), &len->symbol);
  for (const auto& [k, s] : symbols) o.symbol_input.push_back(s);
  return text_of(f, dense, o, true);
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

namespace {

GraphOptions graph_options(const RowClasses& classes, const CanonOptions& options,
                           bool with_lengths) {
  GraphOptions o;
  o.with_lengths = with_lengths;
  o.layout = layout_of(options.labeling);
  o.row_multiplicity = classes.multiplicity;
  o.private_argument = classes.private_argument;
  return o;
}

// The structure labeling of `e` into c's structure fields. `canonical_symbol` names the symbol of
// an index of `e` as c's canonical form does.
template <class CanonicalSymbol>
void label_structure(const BatchedEinsum& e, const Dense& dense, const RowClasses& classes,
                     const CanonOptions& options, const CanonicalSymbol& canonical_symbol,
                     Canonical& c) {
  const InducedGraph g =
      build_induced_graph(classes.labeled(e), graph_options(classes, options, false));
  const Order o = read_order(e, dense, classes, g, canonical_labeling(g, options.labeling));
  c.structure_key = text_of(e, dense, o, false);
  c.structure_hash = hash_text(c.structure_key);
  // Lengths of the structure form's indices, symbols in the canonical form's names.
  c.structure_lengths.clear();
  for (char x : o.index_input) {
    Length len = *dense.index_length[static_cast<unsigned char>(x)];
    if (len.symbolic()) len.symbol = canonical_symbol(len.symbol);
    c.structure_lengths.push_back(std::move(len));
  }
  c.structure_sigma = {};
  for (std::size_t k = 0; k < o.index_input.size(); ++k)
    c.structure_sigma.index.emplace(canonical_index_name(k), o.index_input[k]);
  for (std::size_t k = 0; k < o.array_input.size(); ++k)
    c.structure_sigma.array.emplace(array_name(k), *dense.name[o.array_input[k]]);
  c.structure_sigma.operand = o.operand;
  c.structure_sigma.row = o.row;
}

}  // namespace

Canonical canonicalize(const BatchedEinsum& e, const CanonOptions& options) {
  validate(e);
  const Dense dense(e);
  const RowClasses classes = twin_row_classes(e, dense, options.twin_rows);

  Canonical c;
  {
    const InducedGraph g =
        build_induced_graph(classes.labeled(e), graph_options(classes, options, true));
    const Order o = read_order(e, dense, classes, g, canonical_labeling(g, options.labeling));
    c.key = text_of(e, dense, o, true);
    write_form(e, dense, o, c);
    c.stats = {g.num_nodes, g.num_edges(), classes.members.size()};
  }
  c.hash = hash_text(c.key);
  if (options.structure)
    label_structure(
        e, dense, classes, options,
        [&](const std::string& input) -> std::string {
          for (const auto& [canonical, mine] : c.sigma.symbol)
            if (mine == input) return canonical;
          return input;
        },
        c);
  return c;
}

void add_structure(Canonical& c, const CanonOptions& options) {
  if (!c.structure_hash.empty()) return;
  // The canonical form is isomorphic to the input, so its structure labeling is the input's
  // structure form; its names are the canonical ones, which σ takes on to the input's.
  const BatchedEinsum& f = c.form;
  const Dense dense(f);
  const RowClasses classes = twin_row_classes(f, dense, options.twin_rows);
  label_structure(
      f, dense, classes, options,
      [](const std::string& canonical) -> std::string { return canonical; }, c);
  Substitution& s = c.structure_sigma;
  for (auto& [structure, name] : s.index) name = c.sigma.index.at(name);
  for (auto& [structure, name] : s.array) name = c.sigma.array.at(name);
  for (auto& k : s.operand) k = c.sigma.operand.at(k);
  for (auto& k : s.row) k = c.sigma.row.at(k);
}

Substitution invert(const Substitution& sigma) {
  Substitution inv;
  for (const auto& [c, in] : sigma.index) inv.index.emplace(in, c);
  for (const auto& [c, in] : sigma.array) inv.array.emplace(in, c);
  for (const auto& [c, in] : sigma.symbol) inv.symbol.emplace(in, c);
  inv.operand.resize(sigma.operand.size());
  for (std::size_t k = 0; k < sigma.operand.size(); ++k) inv.operand.at(sigma.operand[k]) = k;
  inv.row.resize(sigma.row.size());
  for (std::size_t k = 0; k < sigma.row.size(); ++k) inv.row.at(sigma.row[k]) = k;
  return inv;
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
  j["sigma"] = sigma_json(c.sigma);
  return j;
}

nlohmann::ordered_json sigma_json(const Substitution& sigma) {
  using ojson = nlohmann::ordered_json;
  ojson index = ojson::object(), array = ojson::object(), operand = ojson::object(),
        row = ojson::object(), symbol = ojson::object();
  // In canonical order: a, b, ...; A0, A1, ...; 0, 1, ...; N0, N1, ...
  for (std::size_t k = 0; k < sigma.index.size(); ++k) {
    const char name = canonical_index_name(k);
    index[std::string(1, name)] = std::string(1, sigma.index.at(name));
  }
  for (std::size_t k = 0; k < sigma.array.size(); ++k)
    array[array_name(k)] = sigma.array.at(array_name(k));
  for (std::size_t k = 0; k < sigma.operand.size(); ++k)
    operand[std::to_string(k)] = sigma.operand[k];
  for (std::size_t k = 0; k < sigma.row.size(); ++k) row[std::to_string(k)] = sigma.row[k];
  for (std::size_t k = 0; k < sigma.symbol.size(); ++k)
    symbol[symbol_name(k)] = sigma.symbol.at(symbol_name(k));
  return {{"index", std::move(index)},
          {"array", std::move(array)},
          {"operand", std::move(operand)},
          {"row", std::move(row)},
          {"symbol", std::move(symbol)}};
}

}  // namespace einsumdb
