#include "einsumdb/db/feinsum.hpp"

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <map>
#include <vector>

#include "einsumdb/canon/canonicalize.hpp"
#include "einsumdb/core/error.hpp"
#include "einsumdb/db/error.hpp"
#include "einsumdb/db/sql.hpp"

namespace einsumdb {
namespace {

using json = nlohmann::json;

// What Feinsum checked every fact against numpy with, in f64.
constexpr double kFeinsumTolerance = 1e-10;

// Parameters that are positions in Feinsum's axis order rather than names: lists (one entry
// per axis or per reduction) and permutation or index numbers.
std::vector<std::string> positional_params(const json& params) {
  std::vector<std::string> out;
  if (!params.is_object()) return out;
  for (const auto& [key, value] : params.items())
    if (value.is_array() || key.find("perm") != std::string::npos ||
        key.find("idx") != std::string::npos)
      out.push_back(key);
  return out;
}

}  // namespace

BatchedEinsum feinsum_einsum(const std::string& subscripts, const json& index_to_length,
                             const json& args, const json& arg_to_dtype) {
  std::string text;
  for (char c : subscripts)
    if (c != ' ') text += c;
  const auto arrow = text.find("->");
  if (arrow == std::string::npos) throw SpecError("subscripts '" + subscripts + "' have no '->'");
  BatchedEinsum e;
  e.output = text.substr(arrow + 2);
  for (std::size_t start = 0;;) {
    const auto comma = text.find(',', start);
    const auto end = comma == std::string::npos || comma > arrow ? arrow : comma;
    e.inputs.push_back(text.substr(start, end - start));
    if (end == arrow) break;
    start = end + 1;
  }
  if (!index_to_length.is_object()) throw SpecError("index_to_length is not a JSON object");
  std::map<char, Length> length;
  std::map<std::string, char> symbol_of;
  for (const std::string& operand : e.inputs)
    for (char c : operand) {
      if (length.count(c)) continue;
      const std::string name(1, c);
      if (index_to_length.contains(name)) {
        const json& v = index_to_length.at(name);
        if (!v.is_number_integer() || v.get<std::int64_t>() < 1)
          throw SpecError("index_to_length: '" + name + "' is " + v.dump() +
                          ", not a positive length");
        length[c] = Length::of(v.get<std::int64_t>());
      } else {
        // Absent: a symbol, Feinsum's upper-case name of the index.
        const std::string symbol(1, static_cast<char>(std::toupper(static_cast<unsigned char>(c))));
        if (const auto [it, added] = symbol_of.emplace(symbol, c); !added)
          throw SpecError("indices '" + std::string(1, it->second) + "' and '" + name +
                          "' would both have the symbolic length '" + symbol + "'");
        length[c] = Length::named(symbol);
      }
    }
  if (!args.is_array() || args.empty()) throw SpecError("args is not a list of batch rows");
  for (const json& row : args) {
    if (!row.is_array() || row.size() != e.inputs.size())
      throw SpecError("args: row " + row.dump() + " does not name " +
                      std::to_string(e.inputs.size()) + " arrays");
    std::vector<std::string> names;
    for (std::size_t k = 0; k < row.size(); ++k) {
      const std::string name = row[k].get<std::string>();
      if (!arg_to_dtype.contains(name))
        throw SpecError("arg_to_dtype has no dtype for array '" + name + "'");
      const std::string dtype_name = arg_to_dtype.at(name).get<std::string>();
      const auto dtype = parse_dtype(dtype_name);
      if (!dtype) throw SpecError("array '" + name + "': unknown dtype '" + dtype_name + "'");
      ArrayInfo info{{}, *dtype};
      for (char c : e.inputs[k]) info.shape.push_back(length.at(c));
      const auto [it, added] = e.arrays.emplace(name, info);
      if (!added && it->second != info)
        throw SpecError("array '" + name + "' is read at operands of different shapes");
      names.push_back(name);
    }
    e.batch.push_back(std::move(names));
  }
  validate(e);
  return e;
}

Machine feinsum_machine(const std::string& device, const std::string& driver) {
  Machine m;
  m.cpu_model = device;
  m.cores = 1;  // one device
  m.blas = driver;
  m.description = {{"kind", "device"},
                   {"device", device},
                   {"driver", driver},
                   {"cores", "one device"},
                   {"source", "feinsum"}};
  return m;
}

std::string feinsum_time_utc(const std::string& timestamp) {
  int y = 0, mo = 0, d = 0, h = 0, mi = 0, s = 0;
  char tail = 0;
  if (std::sscanf(timestamp.c_str(), "%4d_%2d_%2d_%2d%2d%2d%c", &y, &mo, &d, &h, &mi, &s, &tail) !=
      6)
    throw SpecError("timestamp '" + timestamp + "' is not YYYY_MM_DD_HHMMSS");
  using namespace std::chrono;
  const year_month_day date{year{y}, month{static_cast<unsigned>(mo)},
                            day{static_cast<unsigned>(d)}};
  if (!date.ok() || h > 23 || mi > 59 || s > 59 || h < 0 || mi < 0 || s < 0)
    throw SpecError("timestamp '" + timestamp + "' is not a valid date and time");
  const sys_seconds local = sys_days{date} + hours{h} + minutes{mi} + seconds{s};
  // America/Chicago since 2007: UTC-6, and UTC-5 (daylight time) from the second Sunday of March
  // at 02:00 to the first Sunday of November at 02:00 local time (the repeated hour counts as
  // daylight time).
  const sys_seconds dst_begins = sys_days{year{y} / March / Sunday[2]} + hours{2};
  const sys_seconds dst_ends = sys_days{year{y} / November / Sunday[1]} + hours{2};
  const bool daylight = y >= 2007 && local >= dst_begins && local < dst_ends;
  const sys_seconds utc = local + hours{daylight ? 5 : 6};
  const auto days = floor<std::chrono::days>(utc);
  const year_month_day u{days};
  const hh_mm_ss<seconds> t{utc - days};
  char out[40];
  std::snprintf(out, sizeof out, "%04d-%02u-%02uT%02d:%02d:%02d.000000Z",
                static_cast<int>(u.year()), static_cast<unsigned>(u.month()),
                static_cast<unsigned>(u.day()), static_cast<int>(t.hours().count()),
                static_cast<int>(t.minutes().count()), static_cast<int>(t.seconds().count()));
  return out;
}

FeinsumImport import_feinsum(Store& store, const std::string& path,
                             const std::function<void(std::size_t, std::size_t)>& progress) {
  if (!std::filesystem::exists(path)) throw DatabaseError("no file '" + path + "'");
  sql::Connection source(path, /*read_only=*/true, /*create=*/false);
  if (!source.query_text("SELECT name FROM sqlite_master WHERE type = 'table' AND name = "
                         "'FEINSUM_TIMING_FACTS'"))
    throw DatabaseError("'" + path + "' is not a Feinsum fact database (no FEINSUM_TIMING_FACTS)");
  const auto total =
      static_cast<std::size_t>(source.query_int("SELECT count(*) FROM FEINSUM_TIMING_FACTS"));
  const std::string file = std::filesystem::path(path).filename().string();

  struct Pending {
    const Canonical* canonical;
    Measurement m;
  };
  std::map<std::string, Canonical> canonicals;  // the row's einsum fields -> canonical form
  std::map<std::string, Machine> machines;      // fingerprint -> machine
  std::map<std::string, std::vector<Pending>> by_machine;
  FeinsumImport result;
  sql::Statement rows(source,
                      "SELECT ID, subscripts, index_to_length, args, arg_to_dtype, device_name, "
                      "transform_id, transform_params, runtime_in_sec, compiler_version, "
                      "giga_op_info, timestamp FROM FEINSUM_TIMING_FACTS ORDER BY ID");
  while (rows.step()) {
    const std::int64_t id = rows.column_int(0);
    try {
      const std::string subscripts = rows.column_text(1);
      const std::string einsum_fields = subscripts + "\n" + rows.column_text(2) + "\n" +
                                        rows.column_text(3) + "\n" + rows.column_text(4);
      auto c = canonicals.find(einsum_fields);
      if (c == canonicals.end())
        c = canonicals
                .emplace(einsum_fields,
                         canonicalize(feinsum_einsum(subscripts, json::parse(rows.column_text(2)),
                                                     json::parse(rows.column_text(3)),
                                                     json::parse(rows.column_text(4)))))
                .first;
      const std::string device = rows.column_text(5), driver = rows.column_text(9);
      const Machine machine = feinsum_machine(device, driver);
      const std::string fp = machine.fingerprint();
      machines.emplace(fp, machine);

      Measurement m;
      m.transform = {rows.column_text(6), json::parse(rows.column_text(7))};
      if (rows.is_null(8)) throw SpecError("runtime_in_sec is null");
      m.seconds = {rows.column_double(8)};
      m.max_rel_err = kFeinsumTolerance;
      const json ops = json::parse(rows.column_text(10));
      double giga = 0;
      for (const auto& [dtype, value] : ops.items()) giga += value.get<double>();
      if (!ops.is_object() || !(giga > 0))
        throw SpecError("giga_op_info " + ops.dump() + " gives no positive op count");
      m.flops = giga * 1e9;
      m.recorded_at = feinsum_time_utc(rows.column_text(11));
      m.origin = {{"source", "feinsum"},
                  {"file", file},
                  {"row", id},
                  {"subscripts", subscripts},
                  {"timestamp", rows.column_text(11) + " America/Chicago"},
                  {"giga_op_info", ops},
                  {"verified", "by Feinsum against numpy, rtol = atol = 1e-10"}};
      const auto positional = positional_params(m.transform.params);
      if (!positional.empty()) {
        m.origin["positional_params"] = positional;
        m.origin["note"] =
            "Feinsum's parameters are kept verbatim: positional ones (lists per axis, "
            "permutation and index numbers) refer to Feinsum's axis order of the subscripts in "
            "origin.subscripts, not to einsumdb's names, and are not renamed";
      }
      check_measurement(m);
      by_machine[fp].push_back({&c->second, std::move(m)});
    } catch (const json::exception& e) {
      throw SpecError("'" + path + "' row ID " + std::to_string(id) + ": " + e.what());
    } catch (const SpecError& e) {
      throw SpecError("'" + path + "' row ID " + std::to_string(id) + ": " + e.what());
    }
    ++result.rows;
    if (progress && (result.rows % 1000 == 0 || result.rows == total)) progress(result.rows, total);
  }
  result.workloads = canonicals.size();
  result.machines = machines.size();
  for (const auto& [fp, pending] : by_machine) {
    std::vector<std::pair<const Canonical*, Measurement>> measurements;
    measurements.reserve(pending.size());
    for (const auto& p : pending) measurements.emplace_back(p.canonical, p.m);
    RunInfo run;
    run.label = "feinsum import";
    run.command = "einsumdb import --from feinsum " + path;
    const auto r = store.record_run(run, machines.at(fp), measurements);
    result.inserted += r.inserted;
    result.duplicates += r.duplicates;
    result.runs += r.run != 0;
  }
  return result;
}

}  // namespace einsumdb
