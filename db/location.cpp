#include "einsumdb/db/location.hpp"

#include <cstdlib>
#include <filesystem>

#include "einsumdb/canon/error.hpp"

namespace einsumdb {

std::string store_path(const std::string& given) {
  if (!given.empty()) return given;
  if (const char* env = std::getenv("EINSUMDB_DB"); env && *env) return env;
  std::string base;
  if (const char* xdg = std::getenv("XDG_DATA_HOME"); xdg && *xdg) {
    base = xdg;
  } else if (const char* home = std::getenv("HOME"); home && *home) {
    base = std::string(home) + "/.local/share";
  } else {
    throw Error("cannot find a place for the database: give --db or set EINSUMDB_DB");
  }
  return base + "/einsumdb/einsumdb.sqlite";
}

Store open_store_for_writing(const std::string& path) {
  const auto dir = std::filesystem::path(path).parent_path();
  if (!dir.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    if (ec) throw DatabaseError("cannot create directory '" + dir.string() + "': " + ec.message());
  }
  return Store::open(path);
}

std::optional<Store> open_store_for_reading(const std::string& path) {
  if (!std::filesystem::exists(path)) return std::nullopt;
  Store::Options options;
  options.read_only = true;
  return Store::open(path, options);
}

}  // namespace einsumdb
