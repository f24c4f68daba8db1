#include "einsumdb/db/machine.hpp"

#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <set>
#include <sstream>

#include "einsumdb/canon/canonicalize.hpp"
#include "einsumdb/core/error.hpp"

namespace einsumdb {
namespace {

// Flags that change which kernels run fast; others (microcode, mitigations) would split one
// machine into many.
const std::set<std::string> kIsaFlags = {
    "sse4_2",   "avx",      "avx2",     "fma",         "f16c",        "avx512f",
    "avx512dq", "avx512bw", "avx512vl", "avx512_vnni", "avx512_bf16", "avx512_fp16",
    "amx_tile", "amx_bf16", "asimd",    "sve",         "sve2"};

std::string trim(const std::string& s) {
  const auto b = s.find_first_not_of(" \t");
  const auto e = s.find_last_not_of(" \t");
  return b == std::string::npos ? "" : s.substr(b, e - b + 1);
}

}  // namespace

std::string Machine::fingerprint() const {
  return hash_text(cpu_model + "\n" + std::to_string(cores) + "\n" + isa + "\n" + blas);
}

Machine detect_machine(const std::string& blas, const nlohmann::ordered_json& extra) {
  Machine m;
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::set<std::string> flags;
  for (std::string line; std::getline(cpuinfo, line);) {
    const auto colon = line.find(':');
    if (colon == std::string::npos) continue;
    const std::string key = trim(line.substr(0, colon)), value = trim(line.substr(colon + 1));
    if (m.cpu_model.empty() && (key == "model name" || key == "Model" || key == "cpu model"))
      m.cpu_model = value;
    if (flags.empty() && (key == "flags" || key == "Features")) {
      std::istringstream in(value);
      for (std::string f; in >> f;)
        if (kIsaFlags.count(f)) flags.insert(f);
    }
  }
  if (m.cpu_model.empty()) m.cpu_model = "unknown";
  for (const auto& f : flags) m.isa += (m.isa.empty() ? "" : " ") + f;
  m.cores = static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN));
  m.blas = blas;
  m.description = {{"cpu_model", m.cpu_model}, {"cores", m.cores}, {"isa", m.isa}, {"blas", blas}};
  for (const auto& [k, v] : extra.items()) m.description[k] = v;
  return m;
}

nlohmann::ordered_json to_json(const Machine& m) {
  return {{"fingerprint", m.fingerprint()},
          {"cpu_model", m.cpu_model},
          {"cores", m.cores},
          {"isa", m.isa},
          {"blas", m.blas},
          {"description", m.description}};
}

Machine machine_from_json(const nlohmann::json& j) {
  try {
    if (!j.is_object())
      throw SpecError("machine: expected an object {cpu_model, cores, isa, blas}");
    for (const auto& [key, value] : j.items()) {
      (void)value;
      if (key != "fingerprint" && key != "cpu_model" && key != "cores" && key != "isa" &&
          key != "blas" && key != "description")
        throw SpecError("machine: unknown key '" + key +
                        "' (expected cpu_model, cores, isa, blas, and optionally description and "
                        "fingerprint)");
    }
    Machine m;
    m.cpu_model = j.at("cpu_model").get<std::string>();
    m.cores = j.at("cores").get<int>();
    if (m.cores < 1)
      throw SpecError("machine: cores is " + std::to_string(m.cores) +
                      "; a machine has at least one core (an accelerator counts as one device)");
    if (m.cpu_model.empty()) throw SpecError("machine: cpu_model is empty");
    m.isa = j.at("isa").get<std::string>();
    m.blas = j.at("blas").get<std::string>();
    if (j.contains("description")) {
      if (!j.at("description").is_object())
        throw SpecError("machine: description must be an object");
      m.description = j.at("description");
    }
    if (j.contains("fingerprint") && j.at("fingerprint").get<std::string>() != m.fingerprint())
      throw SpecError("machine fingerprint " + j.at("fingerprint").get<std::string>() +
                      " does not match its fields (" + m.fingerprint() + ")");
    return m;
  } catch (const nlohmann::json::exception& e) {
    throw SpecError(std::string("machine: expected {cpu_model, cores, isa, blas}: ") + e.what());
  }
}

}  // namespace einsumdb
