#include "einsumdb/cli/common.hpp"

#include <fcntl.h>
#include <poll.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iostream>

#include "einsumdb/core/error.hpp"
#include "einsumdb/db/location.hpp"

namespace einsumdb::cli {

void add_db_option(CLI::App* cmd, DbArgs& args) {
  cmd->add_option("--db", args.db,
                  "The store: a SQLite file, or a PostgreSQL server as "
                  "postgresql://user@host/dbname (default: $EINSUMDB_DB, else "
                  "$XDG_DATA_HOME/einsumdb/einsumdb.sqlite)");
}

std::string resolve_db_path(const DbArgs& args) {
  return store_path(args.db);
}

Store open_for_writing(const DbArgs& args) {
  return open_store_for_writing(resolve_db_path(args));
}

std::optional<Store> open_for_reading(const DbArgs& args) {
  return open_store_for_reading(resolve_db_path(args));
}

void add_output_options(CLI::App* cmd, OutputArgs& args) {
  cmd->add_flag("--json", args.json, "Print JSON (the default when stdout is not a terminal)");
  cmd->add_flag("--table", args.table, "Print a table even when stdout is not a terminal");
}

bool want_json(const OutputArgs& args) {
  if (args.json) return true;
  if (args.table) return false;
  return !isatty(STDOUT_FILENO);
}

namespace {
std::size_t display_width(const std::string& s) {
  std::size_t w = 0;
  for (unsigned char c : s) w += (c & 0xC0) != 0x80;  // count UTF-8 code points
  return w;
}
}  // namespace

void print_table(const std::vector<std::string>& headers,
                 const std::vector<std::vector<std::string>>& rows) {
  std::vector<std::size_t> width(headers.size());
  for (std::size_t c = 0; c < headers.size(); ++c) width[c] = display_width(headers[c]);
  for (const auto& row : rows)
    for (std::size_t c = 0; c < row.size() && c < width.size(); ++c)
      width[c] = std::max(width[c], display_width(row[c]));
  auto line = [&](const std::vector<std::string>& cells) {
    for (std::size_t c = 0; c < cells.size(); ++c) {
      std::cout << cells[c];
      if (c + 1 < cells.size())
        std::cout << std::string(width[c] - display_width(cells[c]) + 2, ' ');
    }
    std::cout << '\n';
  };
  line(headers);
  for (const auto& row : rows) line(row);
}

std::string format_seconds(double s) {
  char buf[32];
  if (s >= 1)
    std::snprintf(buf, sizeof buf, "%.3f s", s);
  else if (s >= 1e-3)
    std::snprintf(buf, sizeof buf, "%.3f ms", s * 1e3);
  else
    std::snprintf(buf, sizeof buf, "%.2f us", s * 1e6);
  return buf;
}

std::string format_number(std::optional<double> v, int precision) {
  if (!v) return "-";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.*f", precision, *v);
  return buf;
}

void print_json(const nlohmann::ordered_json& j) {
  std::cout << j.dump(2) << '\n';
}

namespace {

// The letters of [{"index": i}, ...], or nullopt when `j` is not such a list.
std::optional<std::string> letters(const nlohmann::json& j) {
  if (!j.is_array()) return std::nullopt;
  std::string out;
  for (const auto& item : j) {
    if (!item.is_object() || !item.contains("index") || !item["index"].is_string())
      return std::nullopt;
    out += item["index"].get<std::string>();
  }
  return out;
}

}  // namespace

std::string describe_params(const nlohmann::json& params) {
  std::string out;
  for (const auto& [key, value] : params.items()) {
    std::string v;
    if (const auto l = letters(value)) {
      v = l->empty() ? "-" : *l;
    } else if (key == "block" && value.is_array()) {
      for (const auto& b : value)
        if (b.is_array() && b.size() == 2)
          v += (v.empty() ? "" : ",") + letters(nlohmann::json::array({b[0]})).value_or("?") + ":" +
               b[1].dump();
    } else if (key == "tile" && value.is_array() && value.size() == 2) {
      v = letters(nlohmann::json::array({value[0]})).value_or("?") + ":" + value[1].dump();
    } else if (key == "path" && value.is_array()) {
      for (const auto& step : value)
        if (step.is_array() && step.size() == 2)
          v += "(" + letters(step[0]).value_or("?") + "," + letters(step[1]).value_or("?") + ")";
    } else if (value.is_string()) {
      v = value.get<std::string>();
    } else {
      v = value.dump();
    }
    out += (out.empty() ? "" : " ") + key + "=" + v;
  }
  return out;
}

std::string run_program(const std::vector<std::string>& argv) {
  int out[2], err[2];
  if (pipe2(out, O_CLOEXEC) != 0) throw Error("cannot make a pipe to run " + argv.at(0));
  if (pipe2(err, O_CLOEXEC) != 0) {
    close(out[0]);
    close(out[1]);
    throw Error("cannot make a pipe to run " + argv.at(0));
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, out[1], STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(&actions, err[1], STDERR_FILENO);
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = 0;
  const int spawned = posix_spawn(&pid, args[0], &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  close(out[1]);
  close(err[1]);
  std::string text[2];
  if (spawned == 0) {
    // Both pipes drained together: a child that fills one while we wait on the other would block.
    pollfd fds[2] = {{out[0], POLLIN, 0}, {err[0], POLLIN, 0}};
    int open_pipes = 2;
    while (open_pipes > 0) {
      if (poll(fds, 2, -1) < 0) {
        if (errno == EINTR) continue;
        break;
      }
      for (int k = 0; k < 2; ++k) {
        if (fds[k].fd < 0 || !(fds[k].revents & (POLLIN | POLLHUP | POLLERR))) continue;
        char buffer[65536];
        const ssize_t n = read(fds[k].fd, buffer, sizeof buffer);
        if (n > 0) {
          text[k].append(buffer, static_cast<std::size_t>(n));
        } else if (n == 0 || errno != EINTR) {
          fds[k].fd = -1;
          --open_pipes;
        }
      }
    }
  }
  close(out[0]);
  close(err[0]);
  if (spawned != 0) throw Error("cannot run " + argv[0] + ": " + std::strerror(spawned));
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
    throw Error(argv[0] + " " + (argv.size() > 1 ? argv[1] : "") + " failed (" +
                (WIFEXITED(status) ? "exit " + std::to_string(WEXITSTATUS(status))
                                   : "signal " + std::to_string(WTERMSIG(status))) +
                "): " + text[1].substr(0, 2000));
  return text[0];
}

}  // namespace einsumdb::cli
