// Test support: a fresh directory per test, removed afterwards.
#pragma once

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>

#include <gtest/gtest.h>

namespace einsumdb::testing {

class TempDir {
 public:
  // <gtest temp dir>/einsumdb_<tag>_<pid>_<current test name>, a parameterized test's name
  // ("Name/param") with its slash as an underscore, so that the directory removed afterwards is
  // the one made under the temporary directory rather than a child of it.
  explicit TempDir(const std::string& tag) {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    std::string name = info ? info->name() : "x";
    std::replace(name.begin(), name.end(), '/', '_');
    path_ = std::filesystem::path(::testing::TempDir()) /
            ("einsumdb_" + tag + "_" + std::to_string(getpid()) + "_" + name);
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  ~TempDir() { std::filesystem::remove_all(path_); }

  // The path of `name` inside the directory.
  std::string path(const std::string& name) const { return (path_ / name).string(); }
  // Writes `text` to `name` and returns its path.
  std::string write(const std::string& name, const std::string& text) const {
    std::ofstream(path(name), std::ios::binary) << text;
    return path(name);
  }

 private:
  std::filesystem::path path_;
};

}  // namespace einsumdb::testing
