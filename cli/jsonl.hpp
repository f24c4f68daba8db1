// Reading JSON-lines files: one JSON value per line, blank lines skipped, "-" for stdin.
#pragma once

#include <fstream>
#include <functional>
#include <istream>
#include <string>

namespace einsumdb::cli {

// A file opened for reading, or standard input for "-". Throws einsumdb::Error when the file
// cannot be opened.
class InputFile {
 public:
  explicit InputFile(const std::string& path);
  std::istream& stream() { return *in_; }

 private:
  std::ifstream file_;
  std::istream* in_;
};

// Calls `line_fn(line_number, text)` for every non-blank line of `path` (1-based numbers).
// Throws einsumdb::Error when the file cannot be opened.
void for_each_line(const std::string& path,
                   const std::function<void(std::size_t, const std::string&)>& line_fn);

}  // namespace einsumdb::cli
