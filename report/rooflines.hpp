// The report's machine sections (internal to the report module): devices (machines of one
// model, a row per BLAS or driver) with their rooflines, the devices with nothing to draw, and
// per strategy the distribution of its best points' fractions of the roof.
#pragma once

#include <cstddef>
#include <map>
#include <ostream>
#include <string>
#include <vector>

#include "einsumdb/db/store.hpp"

namespace einsumdb::report {

struct MachineRow {
  std::string fingerprint, cpu_model, blas;
  int cores = 0;
};

using Roofs = std::map<std::string, Store::Roofline>;  // a machine's, by dtype

// A best point that can be drawn: it has a work and a byte count.
struct Point {
  const Store::BestPoint* p;
  double ai;        // FLOP per byte moved
  double fraction;  // of the roof of its dtype on its machine; -1 without one
  std::string dtype;
};

// The points of `best` that can be drawn; those that cannot are counted in `without_bytes`.
std::vector<Point> drawable(const std::vector<const Store::BestPoint*>& best,
                            const std::map<std::string, Roofs>& roofs_of,
                            std::size_t* without_bytes);

// " dt-f64": the class that the dtype toggles show or hide ("" for no dtype).
std::string dtype_class(const std::string& dtype);

// Machines of one device (the same CPU or GPU model) with several BLAS libraries or drivers.
struct Device {
  std::string model;
  std::vector<const MachineRow*> members;  // by BLAS or driver name
  std::vector<Point> points;
  std::size_t verified = 0;       // best points, drawable or not
  std::size_t without_bytes = 0;  // of those, the ones without a byte count
  bool here = false;              // holds this machine
};

// A device's section: a row per machine, the roofline with at most `max_points` points, the
// workloads farthest below the roof. Returns the points drawn.
std::size_t device_section(std::ostream& out, const Device& d,
                           const std::map<std::string, Roofs>& roofs_of, std::size_t max_points);
// The devices with nothing to draw, in one line and a list that says why.
void empty_devices(std::ostream& out, const std::vector<const Device*>& empty);
// Per strategy, the quartiles of its points' fractions of the roof, as a table of box plots.
// Returns the strategies shown.
std::size_t strategies_section(std::ostream& out, const std::vector<Point>& points);

}  // namespace einsumdb::report
