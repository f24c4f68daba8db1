#include "cli/jsonl.hpp"

#include <fstream>
#include <iostream>

#include "canon/error.hpp"

namespace einsumdb::cli {

void for_each_line(const std::string& path,
                   const std::function<void(std::size_t, const std::string&)>& line_fn) {
  std::ifstream file;
  std::istream* in = &std::cin;
  if (path != "-") {
    file.open(path, std::ios::binary);
    if (!file) throw Error("cannot open '" + path + "' for reading");
    in = &file;
  }
  std::string line;
  for (std::size_t number = 1; std::getline(*in, line); ++number) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.find_first_not_of(" \t") == std::string::npos) continue;
    line_fn(number, line);
  }
}

}  // namespace einsumdb::cli
