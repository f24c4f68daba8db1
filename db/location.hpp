// Where the store lives and how a program opens it, the same for the CLI, the library's Engine
// and the Python module: an explicit path, else $EINSUMDB_DB, else
// $XDG_DATA_HOME/einsumdb/einsumdb.sqlite (~/.local/share/einsumdb/einsumdb.sqlite). Any of them
// may name a PostgreSQL server instead of a file: postgresql://user@host/dbname.
#pragma once

#include <optional>
#include <string>

#include "einsumdb/db/store.hpp"

namespace einsumdb {

// `given` when not empty, else $EINSUMDB_DB, else the XDG default. Throws Error when neither
// $XDG_DATA_HOME nor $HOME is set.
std::string store_path(const std::string& given = "");

// The store as it may be shown: the file, or the server's URI without its password.
std::string store_display_name(const std::string& path);

// Opens for writing, creating the file and its directory on first use. Throws DatabaseError.
Store open_store_for_writing(const std::string& path);

// Opens read-only; nullopt when no file exists there yet, or the server's database holds no
// tables yet ("nothing known"). Throws
// DatabaseError for a file that exists but is not a readable einsumdb store.
std::optional<Store> open_store_for_reading(const std::string& path);

}  // namespace einsumdb
