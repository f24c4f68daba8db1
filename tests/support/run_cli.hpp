// Test support: run the real einsumdb executable and capture its exit code, stdout and stderr.
#pragma once

#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace einsumdb::testing {

struct CliResult {
  int code = -1;
  std::string out;
  std::string err;
};

inline std::string shell_quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

// Runs `env ENV... einsumdb ARGS...` with `stdin_text` on standard input.
inline CliResult run_cli(const std::vector<std::string>& args, const std::string& stdin_text = "",
                         const std::vector<std::string>& env = {}) {
  const std::string dir = ::testing::TempDir();
  const std::string tag = std::to_string(::getpid());
  const std::string err_path = dir + "/einsumdb_cli_err_" + tag,
                    in_path = dir + "/einsumdb_cli_in_" + tag;
  std::ofstream(in_path) << stdin_text;
  std::string cmd = "env";
  for (const auto& e : env) cmd += " " + shell_quote(e);
  cmd += " " + shell_quote(EINSUMDB_BIN);
  for (const auto& a : args) cmd += " " + shell_quote(a);
  cmd += " <" + shell_quote(in_path) + " 2>" + shell_quote(err_path);
  CliResult r;
  FILE* pipe = popen(cmd.c_str(), "r");
  std::array<char, 4096> buf;
  for (std::size_t n; (n = fread(buf.data(), 1, buf.size(), pipe)) > 0;)
    r.out.append(buf.data(), n);
  const int status = pclose(pipe);
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  {
    std::ifstream err(err_path);
    r.err.assign(std::istreambuf_iterator<char>(err), {});
  }
  std::remove(err_path.c_str());
  std::remove(in_path.c_str());
  return r;
}

inline std::vector<nlohmann::json> json_lines(const std::string& text) {
  std::vector<nlohmann::json> out;
  std::size_t start = 0;
  for (std::size_t end; (end = text.find('\n', start)) != std::string::npos; start = end + 1)
    if (end > start) out.push_back(nlohmann::json::parse(text.substr(start, end - start)));
  return out;
}

}  // namespace einsumdb::testing
