#include "einsumdb/db/location.hpp"

#include <unistd.h>

#include <cstdlib>
#include <filesystem>

#include "einsumdb/core/error.hpp"
#include "einsumdb/db/error.hpp"
#include "einsumdb/db/sql.hpp"

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

std::string store_display_name(const std::string& path) {
  return sql::is_server_uri(path) ? sql::redacted(path) : path;
}

Store open_store_for_writing(const std::string& path) {
  if (sql::is_server_uri(path)) return Store::open(path);
  const auto dir = std::filesystem::path(path).parent_path();
  if (!dir.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    if (ec) throw DatabaseError("cannot create directory '" + dir.string() + "': " + ec.message());
  }
  return Store::open(path);
}

std::optional<Store> open_store_for_reading(const std::string& path) {
  if (sql::is_server_uri(path)) {
    // A server database without an einsumdb store yet knows nothing, like a missing file.
    Store::Options options;
    options.read_only = true;
    try {
      return Store::open(path, options);
    } catch (const sql::NoStoreError&) {
      return std::nullopt;
    }
  }
  if (!std::filesystem::exists(path)) return std::nullopt;
  // A store of an older schema is migrated first when we may write it (a read-only open refuses
  // it); a file that is not an einsumdb store is left to Store::open to refuse untouched.
  if (access(path.c_str(), W_OK) == 0) {
    std::int64_t version = Store::kSchemaVersion, app_id = 0;
    try {
      sql::Connection peek(path, /*read_only=*/true, /*create=*/false);
      version = peek.query_int("PRAGMA user_version");
      app_id = peek.query_int("PRAGMA application_id");
    } catch (const DatabaseError&) {
    }
    if (app_id == Store::kApplicationId && version < Store::kSchemaVersion) Store::open(path);
  }
  Store::Options options;
  options.read_only = true;
  return Store::open(path, options);
}

}  // namespace einsumdb
