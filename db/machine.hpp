// The machine a measurement was taken on. Facts are matched on a coarse fingerprint — CPU model,
// core count, ISA flags, BLAS library and version — so that facts from another machine, or from
// before a BLAS upgrade, are never silently mixed in. The full description (compiler, OS, thread
// settings, einsumdb version, ...) is kept as provenance and does not affect matching.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace einsumdb {

struct Machine {
  std::string cpu_model;
  int cores = 0;
  std::string isa;   // the vector ISA flags that matter for kernels, space-separated, sorted
  std::string blas;  // BLAS library and version, e.g. "OpenBLAS 0.3.21 ... Haswell"
  nlohmann::ordered_json description = nlohmann::ordered_json::object();

  // 32 hex digits: XXH3-128 of the coarse fields. Equal fingerprints are the same machine.
  std::string fingerprint() const;
  bool operator==(const Machine& other) const { return fingerprint() == other.fingerprint(); }
};

// This machine, from /proc/cpuinfo and sysconf; `blas` is supplied by the caller that links
// the BLAS library. `extra` is merged into the description.
Machine detect_machine(const std::string& blas,
                       const nlohmann::ordered_json& extra = nlohmann::ordered_json::object());

// {"fingerprint", "cpu_model", "cores", "isa", "blas", "description"}
nlohmann::ordered_json to_json(const Machine& m);
// Reads the form above (the fingerprint, if present, must match); throws SpecError.
Machine machine_from_json(const nlohmann::json& j);

}  // namespace einsumdb
