#include "einsumdb/cli/jsonl.hpp"

#include <fstream>
#include <iostream>

#include "einsumdb/core/error.hpp"

namespace einsumdb::cli {

InputFile::InputFile(const std::string& path) : in_(&std::cin) {
  if (path == "-") return;
  file_.open(path, std::ios::binary);
  if (!file_) throw Error("cannot open '" + path + "' for reading");
  in_ = &file_;
}

void for_each_line(const std::string& path,
                   const std::function<void(std::size_t, const std::string&)>& line_fn) {
  InputFile input(path);
  std::string line;
  for (std::size_t number = 1; std::getline(input.stream(), line); ++number) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.find_first_not_of(" \t") == std::string::npos) continue;
    line_fn(number, line);
  }
}

}  // namespace einsumdb::cli
