#include "einsumdb/canon/parse.hpp"

#include <algorithm>
#include <charconv>
#include <fstream>
#include <sstream>

#include "einsumdb/core/error.hpp"

namespace einsumdb {
namespace {

using json = nlohmann::json;

std::string col(std::size_t i) {
  return "column " + std::to_string(i + 1);
}

std::string describe(char c) {
  if (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) >= 0x7f) {
    char buf[8];
    std::snprintf(buf, sizeof buf, "0x%02x", static_cast<unsigned char>(c));
    return buf;
  }
  return std::string("'") + c + "'";
}

std::vector<std::string> split(std::string_view s, char sep) {
  std::vector<std::string> parts;
  std::size_t start = 0;
  while (true) {
    const std::size_t pos = s.find(sep, start);
    parts.emplace_back(s.substr(start, pos == std::string_view::npos ? pos : pos - start));
    if (pos == std::string_view::npos) break;
    start = pos + 1;
  }
  return parts;
}

std::string trim(std::string_view s) {
  const auto b = s.find_first_not_of(" \t");
  if (b == std::string_view::npos) return {};
  const auto e = s.find_last_not_of(" \t");
  return std::string(s.substr(b, e - b + 1));
}

Length parse_length_text(std::string_view text, const std::string& where) {
  if (text.empty()) throw SpecError(where + ": empty axis length");
  if (text[0] >= '0' && text[0] <= '9') {
    std::int64_t v = 0;
    const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
    if (ec != std::errc() || ptr != text.data() + text.size() || v < 0)
      throw SpecError(where + ": invalid axis length '" + std::string(text) +
                      "'; expected a length (0 or more) or a symbol such as 'Ne'");
    return Length::of(v);
  }
  return Length::named(std::string(text));  // validate() checks the symbol's spelling
}

std::string json_path(const std::string& a, const std::string& b) {
  return a + "." + b;
}

const json& require(const json& j, const char* key) {
  const auto it = j.find(key);
  if (it == j.end()) throw SpecError(std::string("spec JSON: missing key '") + key + "'");
  return *it;
}

std::string type_name(const json& v) {
  return v.type_name();
}

Dtype dtype_from_json(const json& v, const std::string& where) {
  if (!v.is_string())
    throw SpecError(where + ": expected a dtype string such as \"f64\", got " + type_name(v));
  const auto d = parse_dtype(v.get<std::string>());
  if (!d)
    throw SpecError(where + ": unknown dtype '" + v.get<std::string>() +
                    "'; expected one of i8 i32 i64 f16 f32 f64 c64 c128");
  return *d;
}

void set_ops(BatchedEinsum& e, const std::string& join, const std::string& agg,
             const std::string& where) {
  if (!join.empty()) {
    const auto op = parse_join(join);
    if (!op)
      throw SpecError(where + "join: unknown operator '" + join +
                      "'; expected one of mul add sub sqdiff absdiff max min");
    e.join = *op;
  }
  if (!agg.empty()) {
    const auto op = parse_agg(agg);
    if (!op)
      throw SpecError(where + "agg: unknown operator '" + agg + "'; expected one of sum max min");
    e.agg = *op;
  }
}

}  // namespace

bool EinsumPattern::has_ellipsis() const {
  return output_ellipsis >= 0 ||
         std::any_of(ellipsis.begin(), ellipsis.end(), [](int at) { return at >= 0; });
}

EinsumPattern parse_einsum_pattern(std::string_view text) {
  EinsumPattern p;
  const std::string quoted = "einsum '" + std::string(text) + "'";
  std::string current;
  int current_ellipsis = -1;
  bool in_output = false;
  bool explicit_output = false;
  auto end_input = [&] {
    p.inputs.push_back(std::move(current));
    p.ellipsis.push_back(current_ellipsis);
    current.clear();
    current_ellipsis = -1;
  };
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == ' ' || c == '\t') continue;
    if (is_index_char(c)) {
      current += c;
    } else if (c == ',') {
      if (in_output)
        throw SpecError(quoted + ": unexpected ',' at " + col(i) +
                        " after '->'; the output is one index list");
      end_input();
    } else if (c == '-') {
      if (i + 1 >= text.size() || text[i + 1] != '>')
        throw SpecError(quoted + ": '-' at " + col(i) + " must be followed by '>'");
      if (in_output) throw SpecError(quoted + ": second '->' at " + col(i));
      end_input();
      in_output = explicit_output = true;
      ++i;
    } else if (c == '.') {
      if (text.substr(i, 3) != "...")
        throw SpecError(quoted + ": '.' at " + col(i) +
                        " is not part of an ellipsis '...'; expected three periods");
      if (current_ellipsis >= 0)
        throw SpecError(quoted + ": a second ellipsis '...' at " + col(i) +
                        " in one operand; each may have one");
      current_ellipsis = static_cast<int>(current.size());
      i += 2;
    } else {
      throw SpecError(quoted + ": unexpected character " + describe(c) + " at " + col(i) +
                      "; expected an index letter (a-z, A-Z), '...', ',' or '->'");
    }
  }
  p.explicit_output = explicit_output;
  if (explicit_output) {
    p.output = std::move(current);
    p.output_ellipsis = current_ellipsis;
  } else {
    if (text.find_first_not_of(" \t") == std::string_view::npos)
      throw SpecError("einsum string is empty; expected e.g. 'ij,j->i'");
    end_input();
    // numpy's implicit output: indices that appear exactly once, in ASCII order (after the
    // ellipsis's axes, which expand_ellipsis puts first).
    int count[128] = {};
    for (const auto& in : p.inputs)
      for (char c : in) ++count[static_cast<unsigned char>(c)];
    for (int c = 0; c < 128; ++c)
      if (count[c] == 1) p.output += static_cast<char>(c);
    if (p.has_ellipsis()) p.output_ellipsis = 0;
  }
  return p;
}

EinsumPattern expand_ellipsis(const EinsumPattern& p, const std::vector<std::size_t>& ranks,
                              std::string_view text) {
  const std::string quoted = "einsum '" + std::string(text) + "'";
  if (ranks.size() != p.inputs.size())
    throw SpecError(quoted + " has " + std::to_string(p.inputs.size()) + " operand(s); " +
                    std::to_string(ranks.size()) + " were given");
  std::vector<std::size_t> extra(p.inputs.size(), 0);
  std::size_t most = 0;
  for (std::size_t k = 0; k < p.inputs.size(); ++k) {
    const std::size_t letters = p.inputs[k].size();
    const bool ellipsis = k < p.ellipsis.size() && p.ellipsis[k] >= 0;
    if (ranks[k] < letters)
      throw SpecError(quoted + ": the subscripts '" + p.inputs[k] + "' of operand " +
                      std::to_string(k) + " name " + std::to_string(letters) + " axes but it has " +
                      std::to_string(ranks[k]) +
                      " (einstein sum subscripts string contains too many subscripts for "
                      "operand " +
                      std::to_string(k) + ")");
    if (ranks[k] > letters && !ellipsis)
      throw SpecError(quoted + ": operand " + std::to_string(k) + " has " +
                      std::to_string(ranks[k]) + " axes but its subscripts '" + p.inputs[k] +
                      "' name " + std::to_string(letters) +
                      " (operand has more dimensions than subscripts given in einstein sum, but "
                      "no '...' ellipsis provided to broadcast the extra dimensions)");
    extra[k] = ranks[k] - letters;
    most = std::max(most, extra[k]);
  }
  if (!p.has_ellipsis()) return p;
  // Letters no operand and not the output uses, for the ellipses' axes.
  bool used[128] = {};
  for (const auto& in : p.inputs)
    for (char c : in) used[static_cast<unsigned char>(c)] = true;
  for (char c : p.output) used[static_cast<unsigned char>(c)] = true;
  std::string fresh;
  for (const char* range : {"ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz"})
    for (const char* c = range; *c && fresh.size() < most; ++c)
      if (!used[static_cast<unsigned char>(*c)]) fresh += *c;
  if (fresh.size() < most)
    throw SpecError(quoted + ": the ellipsis stands for " + std::to_string(most) +
                    " axes, more than the letters left unused (52 in all)");
  EinsumPattern out;
  out.explicit_output = true;
  for (std::size_t k = 0; k < p.inputs.size(); ++k) {
    std::string in = p.inputs[k];
    if (p.ellipsis[k] >= 0)
      in.insert(static_cast<std::size_t>(p.ellipsis[k]), fresh.substr(most - extra[k]));
    out.inputs.push_back(std::move(in));
    out.ellipsis.push_back(-1);
  }
  out.output = p.output;
  if (p.output_ellipsis >= 0) {
    out.output.insert(static_cast<std::size_t>(p.output_ellipsis), fresh);
  } else if (most > 0) {
    throw SpecError(quoted + ": the output has no '...' but the operands' ellipses stand for " +
                    std::to_string(most) +
                    " axes (output has more dimensions than subscripts given in einstein sum, "
                    "but no '...' ellipsis provided to broadcast the extra dimensions)");
  }
  return out;
}

namespace {

// The einsum of `pattern` over `e`'s arrays: "..." expanded for the ranks of the first row's
// arrays (every row's must be the same), then numpy's broadcasting of size-1 axes.
void take_pattern(BatchedEinsum& e, const EinsumPattern& pattern, std::string_view text) {
  if (!pattern.has_ellipsis()) {
    e.inputs = pattern.inputs;
    e.output = pattern.output;
  } else {
    if (e.batch.empty() || e.batch[0].size() != pattern.inputs.size()) {
      e.inputs = pattern.inputs;  // validate() says what is wrong with the rows
      e.output = pattern.output;
      return;
    }
    std::vector<std::size_t> ranks;
    for (std::size_t k = 0; k < pattern.inputs.size(); ++k) {
      const auto it = e.arrays.find(e.batch[0][k]);
      if (it == e.arrays.end())
        throw SpecError("array '" + e.batch[0][k] + "' (batch row 0, operand " + std::to_string(k) +
                        ") has no shape; give it one");
      ranks.push_back(it->second.shape.size());
      for (std::size_t r = 1; r < e.batch.size(); ++r) {
        if (k >= e.batch[r].size()) continue;  // a row of another length: validate() says so
        const auto other = e.arrays.find(e.batch[r][k]);
        if (other != e.arrays.end() && other->second.shape.size() != ranks.back())
          throw SpecError("operand " + std::to_string(k) + " has rank " +
                          std::to_string(ranks.back()) + " in batch row 0 ('" + e.batch[0][k] +
                          "') but " + std::to_string(other->second.shape.size()) + " in row " +
                          std::to_string(r) + " ('" + e.batch[r][k] +
                          "'); one '...' stands for the same axes in every row");
      }
    }
    const EinsumPattern full = expand_ellipsis(pattern, ranks, text);
    e.inputs = full.inputs;
    e.output = full.output;
  }
  drop_broadcast_axes(e);
}

}  // namespace

void check_json_depth(const json& j, std::string_view what, std::size_t max_depth) {
  std::vector<std::pair<const json*, std::size_t>> stack{{&j, 1}};
  while (!stack.empty()) {
    const auto [v, depth] = stack.back();
    stack.pop_back();
    if (depth > max_depth)
      throw SpecError(std::string(what) + ": nested deeper than " + std::to_string(max_depth) +
                      " levels");
    if (v->is_structured())
      for (const auto& child : *v) stack.emplace_back(&child, depth + 1);
  }
}

BatchedEinsum parse_spec_json(const json& j) {
  check_json_depth(j, "spec JSON");
  if (!j.is_object()) throw SpecError("spec JSON: expected an object, got " + type_name(j));
  static const char* const kKeys[] = {"einsum", "batch", "shapes", "dtypes", "dtype", "ops"};
  for (const auto& [key, value] : j.items()) {
    (void)value;
    if (std::find(std::begin(kKeys), std::end(kKeys), key) == std::end(kKeys))
      throw SpecError("spec JSON: unknown key '" + key +
                      "'; expected einsum, batch, shapes, dtypes, dtype, ops");
  }
  BatchedEinsum e;
  const json& einsum = require(j, "einsum");
  if (!einsum.is_string())
    throw SpecError("spec JSON: 'einsum' must be a string such as \"ij,j->i\", got " +
                    type_name(einsum));
  const auto pattern = parse_einsum_pattern(einsum.get<std::string>());
  e.inputs = pattern.inputs;
  e.output = pattern.output;

  const json& batch = require(j, "batch");
  if (!batch.is_array())
    throw SpecError("spec JSON: 'batch' must be a list of rows of array names, got " +
                    type_name(batch));
  for (std::size_t i = 0; i < batch.size(); ++i) {
    const json& row = batch[i];
    const std::string where = "spec JSON: batch[" + std::to_string(i) + "]";
    if (!row.is_array())
      throw SpecError(where + ": expected a list of array names, got " + type_name(row));
    std::vector<std::string> names;
    for (std::size_t k = 0; k < row.size(); ++k) {
      if (!row[k].is_string())
        throw SpecError(where + "[" + std::to_string(k) + "]: expected an array name, got " +
                        type_name(row[k]));
      names.push_back(row[k].get<std::string>());
    }
    e.batch.push_back(std::move(names));
  }

  const json& shapes = require(j, "shapes");
  if (!shapes.is_object())
    throw SpecError("spec JSON: 'shapes' must map array names to lists of lengths, got " +
                    type_name(shapes));
  Dtype default_dtype = Dtype::f64;
  if (const auto it = j.find("dtype"); it != j.end())
    default_dtype = dtype_from_json(*it, "spec JSON: dtype");
  const json* dtypes = nullptr;
  if (const auto it = j.find("dtypes"); it != j.end()) {
    if (!it->is_object())
      throw SpecError("spec JSON: 'dtypes' must map array names to dtypes, got " + type_name(*it));
    dtypes = &*it;
  }
  for (const auto& [name, shape] : shapes.items()) {
    const std::string where = json_path("spec JSON: shapes", name);
    if (!shape.is_array())
      throw SpecError(where + ": expected a list of axis lengths, got " + type_name(shape));
    ArrayInfo info;
    info.dtype = default_dtype;
    for (std::size_t d = 0; d < shape.size(); ++d) {
      const json& v = shape[d];
      const std::string axis = where + "[" + std::to_string(d) + "]";
      if (v.is_number_integer()) {
        if (v.is_number_unsigned() &&
            v.get<std::uint64_t>() > static_cast<std::uint64_t>(INT64_MAX))
          throw SpecError(axis + ": axis length is too large");
        const auto len = v.get<std::int64_t>();
        if (len < 0)
          throw SpecError(axis + ": axis length must be 0 or more, got " + std::to_string(len));
        info.shape.push_back(Length::of(len));
      } else if (v.is_string()) {
        info.shape.push_back(parse_length_text(v.get<std::string>(), axis));
      } else {
        throw SpecError(axis + ": expected a positive integer or a symbol string, got " +
                        type_name(v));
      }
    }
    e.arrays.emplace(name, std::move(info));
  }
  if (dtypes) {
    for (const auto& [name, value] : dtypes->items()) {
      const auto it = e.arrays.find(name);
      if (it == e.arrays.end())
        throw SpecError("spec JSON: dtypes." + name + ": array '" + name +
                        "' has no shape in 'shapes'");
      it->second.dtype = dtype_from_json(value, json_path("spec JSON: dtypes", name));
    }
  }

  if (const auto it = j.find("ops"); it != j.end()) {
    if (!it->is_object()) throw SpecError("spec JSON: 'ops' must be an object {\"join\", \"agg\"}");
    std::string join, agg;
    for (const auto& [key, value] : it->items()) {
      if (key != "join" && key != "agg")
        throw SpecError("spec JSON: ops: unknown key '" + key + "'; expected join, agg");
      if (!value.is_string()) throw SpecError("spec JSON: ops." + key + ": expected a string");
      (key == "join" ? join : agg) = value.get<std::string>();
    }
    set_ops(e, join, agg, "spec JSON: ops.");
  }
  take_pattern(e, pattern, einsum.get<std::string>());
  validate(e);
  return e;
}

BatchedEinsum parse_spec_text(std::string_view json_text) {
  json j;
  try {
    j = json::parse(json_text.begin(), json_text.end());
  } catch (const json::exception& err) {  // syntax errors, and numbers out of range
    throw SpecError(std::string("spec JSON is not valid JSON: ") + err.what());
  }
  return parse_spec_json(j);
}

BatchedEinsum parse_spec_flags(std::string_view einsum, const SpecFlags& flags) {
  BatchedEinsum e;
  const auto pattern = parse_einsum_pattern(einsum);
  e.inputs = pattern.inputs;
  e.output = pattern.output;

  if (flags.batch.empty()) {
    std::vector<std::string> row;
    for (std::size_t j = 0; j < e.inputs.size(); ++j)
      row.push_back(j < 26 ? std::string(1, static_cast<char>('A' + j)) : "A" + std::to_string(j));
    e.batch.push_back(std::move(row));
  } else {
    const auto rows = split(flags.batch, ';');
    for (std::size_t i = 0; i < rows.size(); ++i) {
      std::vector<std::string> names;
      for (const auto& name : split(rows[i], ',')) {
        names.push_back(trim(name));
        if (names.back().empty())
          throw SpecError("--batch '" + flags.batch + "': row " + std::to_string(i) +
                          " has an empty array name");
      }
      e.batch.push_back(std::move(names));
    }
  }

  for (const auto& s : flags.shapes) {
    const auto eq = s.find('=');
    if (eq == std::string::npos || eq == 0)
      throw SpecError("--shape '" + s + "': expected NAME=LENGTHxLENGTH..., e.g. A=96x4");
    const std::string name = trim(std::string_view(s).substr(0, eq));
    const std::string dims = trim(std::string_view(s).substr(eq + 1));
    ArrayInfo info;
    if (!dims.empty() && dims != "()") {
      const auto parts = split(dims, 'x');
      for (std::size_t d = 0; d < parts.size(); ++d)
        info.shape.push_back(
            parse_length_text(trim(parts[d]), "--shape " + name + " axis " + std::to_string(d)));
    }
    if (!e.arrays.emplace(name, std::move(info)).second)
      throw SpecError("--shape: array '" + name + "' is given more than one shape");
  }

  std::optional<Dtype> all;
  for (const auto& s : flags.dtypes) {
    const auto eq = s.find('=');
    const std::string value = eq == std::string::npos ? s : s.substr(eq + 1);
    const auto d = parse_dtype(value);
    if (!d)
      throw SpecError("--dtype '" + s + "': unknown dtype '" + value +
                      "'; expected one of i8 i32 i64 f16 f32 f64 c64 c128");
    if (eq == std::string::npos) {
      all = *d;
      for (auto& [name, info] : e.arrays) info.dtype = *d;
    }
  }
  for (const auto& s : flags.dtypes) {
    const auto eq = s.find('=');
    if (eq == std::string::npos) continue;
    const std::string name = s.substr(0, eq);
    const auto it = e.arrays.find(name);
    if (it == e.arrays.end())
      throw SpecError("--dtype '" + s + "': array '" + name + "' has no --shape");
    it->second.dtype = *parse_dtype(s.substr(eq + 1));
  }
  set_ops(e, flags.join, flags.agg, "--");
  take_pattern(e, pattern, einsum);
  validate(e);
  return e;
}

std::optional<SpecJson> read_spec_json_argument(std::string_view arg, const SpecFlags& flags) {
  const auto first = arg.find_first_not_of(" \t\r\n");
  const bool is_json = first != std::string_view::npos && arg[first] == '{';
  const bool is_file = !arg.empty() && arg[0] == '@';
  if (!is_json && !is_file) return std::nullopt;
  if (!flags.empty())
    throw SpecError(
        "--batch, --shape, --dtype, --join and --agg complete an einsum string; "
        "put them into the spec JSON instead");
  SpecJson out;
  std::string text(arg);
  if (is_file) {
    const std::string path(arg.substr(1));
    std::ifstream in(path, std::ios::binary);
    if (!in) throw SpecError("cannot read spec file '" + path + "'");
    std::stringstream ss;
    ss << in.rdbuf();
    text = ss.str();
    out.where = path + ": ";
  }
  try {
    out.json = json::parse(text);
  } catch (const json::exception& err) {  // syntax errors, and numbers out of range
    throw SpecError(out.where + "spec JSON is not valid JSON: " + err.what());
  }
  try {
    check_json_depth(out.json, "spec JSON");  // before anything copies or walks it
  } catch (const SpecError& err) {
    throw SpecError(out.where + err.what());
  }
  return out;
}

BatchedEinsum read_spec_argument(std::string_view arg, const SpecFlags& flags) {
  const auto spec = read_spec_json_argument(arg, flags);
  if (!spec) return parse_spec_flags(arg, flags);
  try {
    return parse_spec_json(spec->json);
  } catch (const SpecError& err) {
    throw SpecError(spec->where + err.what());
  }
}

}  // namespace einsumdb
