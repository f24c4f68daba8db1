// Reading JSON-lines files: one JSON value per line, blank lines skipped, "-" for stdin.
#pragma once

#include <functional>
#include <string>

namespace einsumdb::cli {

// Calls `line_fn(line_number, text)` for every non-blank line of `path` (1-based numbers).
// Throws einsumdb::Error when the file cannot be opened.
void for_each_line(const std::string& path,
                   const std::function<void(std::size_t, const std::string&)>& line_fn);

}  // namespace einsumdb::cli
