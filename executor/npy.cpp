#include "einsumdb/executor/npy.hpp"

#include <cstdio>
#include <cstring>
#include <fstream>
#include <limits>
#include <memory>
#include <sstream>

#include "einsumdb/core/error.hpp"

namespace einsumdb {
namespace {

const char* npy_code(Dtype d) {
  switch (d) {
    case Dtype::f32:
      return "<f4";
    case Dtype::c64:
      return "<c8";
    case Dtype::c128:
      return "<c16";
    default:
      return "<f8";
  }
}

constexpr char kMagic[] = "\x93NUMPY";
constexpr std::size_t kMagicLen = 6;

// The value of `key` in the header dict, as the text up to its terminating ',' or '}' (shape
// tuples are returned with their parentheses).
std::string header_value(const std::string& header, const std::string& key,
                         const std::string& path) {
  for (const char quote : {'\'', '"'}) {
    const std::string k = std::string(1, quote) + key + std::string(1, quote);
    auto at = header.find(k);
    if (at == std::string::npos) continue;
    at = header.find(':', at + k.size());
    if (at == std::string::npos) break;
    ++at;
    while (at < header.size() && header[at] == ' ') ++at;
    if (at < header.size() && header[at] == '(') {
      const auto end = header.find(')', at);
      if (end == std::string::npos) break;
      return header.substr(at, end - at + 1);
    }
    const auto end = header.find_first_of(",}", at);
    if (end == std::string::npos) break;
    auto v = header.substr(at, end - at);
    while (!v.empty() && v.back() == ' ') v.pop_back();
    return v;
  }
  throw SpecError(path + ": not a .npy file: the header has no '" + key + "'");
}

std::uint64_t product_of(const std::vector<std::int64_t>& shape) {
  std::uint64_t n = 1;
  for (auto l : shape) n *= static_cast<std::uint64_t>(l);
  return n;
}

}  // namespace

Tensor read_npy(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error("cannot open '" + path + "': " + std::strerror(errno));
  in.seekg(0, std::ios::end);
  const auto file_size = static_cast<std::uint64_t>(in.tellg());
  in.seekg(0);
  return read_npy(in, file_size, path);
}

Tensor read_npy_bytes(std::string_view bytes, const std::string& name) {
  std::istringstream in{std::string(bytes)};
  return read_npy(in, bytes.size(), name);
}

NpyHeader read_npy_header(std::istream& in, std::uint64_t file_size, const std::string& path) {
  unsigned char prefix[kMagicLen + 2];
  if (!in.read(reinterpret_cast<char*>(prefix), sizeof prefix) ||
      std::memcmp(prefix, kMagic, kMagicLen) != 0)
    throw SpecError(path + ": not a .npy file (no \\x93NUMPY magic)");
  const int major = prefix[kMagicLen];
  std::uint64_t header_len = 0;
  if (major == 1) {
    unsigned char b[2];
    in.read(reinterpret_cast<char*>(b), 2);
    header_len = b[0] | (b[1] << 8u);
  } else if (major == 2 || major == 3) {
    unsigned char b[4];
    in.read(reinterpret_cast<char*>(b), 4);
    header_len = b[0] | (b[1] << 8u) | (b[2] << 16u) | (std::uint64_t{b[3]} << 24u);
  } else {
    throw SpecError(path + ": .npy format version " + std::to_string(major) +
                    " is not supported (1, 2 and 3 are)");
  }
  if (!in || header_len > file_size) throw SpecError(path + ": truncated .npy header");
  std::string header(header_len, '\0');
  if (!in.read(header.data(), static_cast<std::streamsize>(header_len)))
    throw SpecError(path + ": truncated .npy header");
  const auto data_offset = static_cast<std::uint64_t>(in.tellg());

  const std::string descr = header_value(header, "descr", path);
  Dtype dtype;
  const auto is = [&](const char* code) {
    return descr == std::string("'") + code + "'" || descr == std::string("\"") + code + "\"";
  };
  if (is("<f8"))
    dtype = Dtype::f64;
  else if (is("<f4"))
    dtype = Dtype::f32;
  else if (is("<c8"))
    dtype = Dtype::c64;
  else if (is("<c16"))
    dtype = Dtype::c128;
  else
    throw SpecError(path + ": dtype " + descr +
                    " is not supported; the executor reads little-endian float32, float64, "
                    "complex64 and complex128 ('<f4', '<f8', '<c8', '<c16')");
  const std::string order = header_value(header, "fortran_order", path);
  if (order != "False" && order != "True") throw SpecError(path + ": bad fortran_order " + order);
  const bool fortran = order == "True";

  const std::string tuple = header_value(header, "shape", path);
  if (tuple.size() < 2 || tuple.front() != '(' || tuple.back() != ')')
    throw SpecError(path + ": bad shape " + tuple);
  std::vector<std::int64_t> shape;
  std::uint64_t elements = 1;
  {
    std::string item;
    std::istringstream parts(tuple.substr(1, tuple.size() - 2));
    while (std::getline(parts, item, ',')) {
      const auto first = item.find_first_not_of(' ');
      if (first == std::string::npos) continue;  // "(3,)"
      const auto last = item.find_last_not_of(" L");
      const std::string digits = item.substr(first, last - first + 1);
      if (digits.empty() || digits.size() > 18 ||
          digits.find_first_not_of("0123456789") != std::string::npos)
        throw SpecError(path + ": bad shape " + tuple);
      const auto len = static_cast<std::int64_t>(std::stoll(digits));
      if (len > 0 &&
          elements > std::numeric_limits<std::uint64_t>::max() / static_cast<std::uint64_t>(len))
        throw SpecError(path + ": shape " + tuple + " is too large");
      elements *= static_cast<std::uint64_t>(len);
      shape.push_back(len);
    }
  }
  const std::uint64_t bytes = elements * dtype_bytes(dtype);
  if (bytes / dtype_bytes(dtype) != elements || file_size - data_offset < bytes)
    throw SpecError(path + ": truncated: shape " + tuple + " needs " + std::to_string(bytes) +
                    " bytes of data, the file has " + std::to_string(file_size - data_offset));
  if (file_size - data_offset > bytes)
    throw SpecError(path + ": " + std::to_string(file_size - data_offset - bytes) +
                    " bytes of data more than shape " + tuple + " needs");
  return {dtype, std::move(shape), fortran, data_offset};
}

Tensor read_npy(std::istream& in, std::uint64_t file_size, const std::string& path) {
  const auto [dtype, shape, fortran, data_offset] = read_npy_header(in, file_size, path);
  const std::uint64_t bytes = product_of(shape) * dtype_bytes(dtype);
  Tensor t(dtype, shape, Tensor::Uninitialized{});
  if (!fortran || shape.size() < 2) {
    if (!in.read(static_cast<char*>(t.raw()), static_cast<std::streamsize>(bytes)))
      throw SpecError(path + ": truncated data");
    return t;
  }
  // Fortran order: read, then transpose into row-major.
  Tensor f(dtype, std::vector<std::int64_t>(shape.rbegin(), shape.rend()));
  if (!in.read(static_cast<char*>(f.raw()), static_cast<std::streamsize>(bytes)))
    throw SpecError(path + ": truncated data");
  const auto fs = f.strides();
  const std::size_t r = shape.size();
  std::vector<std::int64_t> idx(r, 0);
  for (std::int64_t k = 0; k < t.size(); ++k) {
    std::int64_t off = 0;
    for (std::size_t a = 0; a < r; ++a) off += idx[a] * fs[r - 1 - a];
    t.set(k, f.at(off));
    for (std::size_t a = r; a-- > 0;) {
      if (++idx[a] < shape[a]) break;
      idx[a] = 0;
    }
  }
  return t;
}

Tensor read_npy_region(const std::string& path, const std::vector<std::int64_t>& start,
                       const std::vector<std::int64_t>& length) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error("cannot open '" + path + "': " + std::strerror(errno));
  in.seekg(0, std::ios::end);
  const auto file_size = static_cast<std::uint64_t>(in.tellg());
  in.seekg(0);
  const auto h = read_npy_header(in, file_size, path);
  const std::size_t r = h.shape.size();
  if (start.size() != r || length.size() != r)
    throw SpecError(path + ": has " + std::to_string(r) + " axes, a region of " +
                    std::to_string(start.size()) + " was asked for");
  for (std::size_t a = 0; a < r; ++a)
    if (start[a] < 0 || length[a] < 0 || start[a] + length[a] > h.shape[a])
      throw SpecError(path + ": axis " + std::to_string(a) + " has length " +
                      std::to_string(h.shape[a]) + ", elements [" + std::to_string(start[a]) +
                      ", " + std::to_string(start[a] + length[a]) + ") were asked for");
  Tensor t(h.dtype, length, Tensor::Uninitialized{});
  if (h.fortran && r >= 2) {  // rare: read all, keep the region
    in.seekg(0);
    const Tensor all = read_npy(in, file_size, path);
    const auto as = all.strides();
    std::vector<std::int64_t> idx(r, 0);
    for (std::int64_t k = 0; k < t.size(); ++k) {
      std::int64_t off = 0;
      for (std::size_t a = 0; a < r; ++a) off += (start[a] + idx[a]) * as[a];
      t.set(k, all.at(off));
      for (std::size_t a = r; a-- > 0;) {
        if (++idx[a] < length[a]) break;
        idx[a] = 0;
      }
    }
    return t;
  }
  if (t.size() == 0) return t;
  // One read per run of the last axis (the whole region at once when it is contiguous).
  const std::uint64_t esize = dtype_bytes(h.dtype);
  std::vector<std::int64_t> file_strides(r, 1);
  for (std::size_t a = r; a-- > 1;) file_strides[a - 1] = file_strides[a] * h.shape[a];
  // Axes [outer, r) are read as one run: the last axis, and every axis before it while the
  // axes after it are taken whole.
  std::size_t outer = r == 0 ? 0 : r - 1;
  std::int64_t run = r == 0 ? 1 : length[r - 1];
  while (outer > 0 && length[outer] == h.shape[outer]) {
    --outer;
    run *= length[outer];
  }
  std::vector<std::int64_t> idx(outer, 0);
  char* dst = static_cast<char*>(t.raw());
  const std::int64_t runs = t.size() / run;
  for (std::int64_t k = 0; k < runs; ++k) {
    std::int64_t off = 0;
    for (std::size_t a = 0; a < r; ++a)
      off += (start[a] + (a < outer ? idx[a] : 0)) * file_strides[a];
    in.seekg(static_cast<std::streamoff>(h.data_offset + static_cast<std::uint64_t>(off) * esize));
    if (!in.read(dst, static_cast<std::streamsize>(static_cast<std::uint64_t>(run) * esize)))
      throw SpecError(path + ": truncated data");
    dst += static_cast<std::uint64_t>(run) * esize;
    for (std::size_t a = outer; a-- > 0;) {
      if (++idx[a] < length[a]) break;
      idx[a] = 0;
    }
  }
  return t;
}

void write_npy(const std::string& path, const Tensor& t) {
  std::string shape = "(";
  for (auto len : t.shape()) shape += std::to_string(len) + ", ";
  if (t.rank() == 1)
    shape.erase(shape.size() - 1);  // "(3,)"
  else if (t.rank() > 1)
    shape.erase(shape.size() - 2);
  shape += ")";
  std::string header = std::string("{'descr': '") + npy_code(t.dtype()) +
                       "', 'fortran_order': False, 'shape': " + shape + ", }";
  const bool v2 = header.size() + 12 > 65535;
  const std::size_t prefix = kMagicLen + 2 + (v2 ? 4 : 2);
  header.append(64 - (prefix + header.size() + 1) % 64, ' ');
  header += '\n';
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) throw Error("cannot write '" + path + "': " + std::strerror(errno));
  out.write(kMagic, kMagicLen);
  const char version[2] = {static_cast<char>(v2 ? 2 : 1), 0};
  out.write(version, 2);
  const auto n = header.size();
  const char len4[4] = {static_cast<char>(n & 0xff), static_cast<char>((n >> 8) & 0xff),
                        static_cast<char>((n >> 16) & 0xff), static_cast<char>((n >> 24) & 0xff)};
  out.write(len4, v2 ? 4 : 2);
  out << header;
  out.write(static_cast<const char*>(t.raw()), static_cast<std::streamsize>(t.bytes()));
  out.close();
  if (!out) throw Error("cannot write '" + path + "': " + std::strerror(errno));
}

}  // namespace einsumdb
