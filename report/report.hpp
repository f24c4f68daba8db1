// `einsumdb report`: the performance database as one self-contained HTML page (inline SVG and
// CSS, no script, no network) that a browser opens directly.
//
// The page holds, for the selected machines and time span:
//   - a summary: the store, its schema version, machines, counts by status, the time span;
//   - per machine, a roofline: the measured one-core peak and bandwidth per dtype as the roof
//     (and the peak of all cores, dashed), every workload's best verified transform as a point
//     at its arithmetic intensity (work / bytes moved, at its binding for a symbolic workload)
//     and GFLOP/s, colored by its fraction of the roof; the einsum, strategy and figures in each
//     point's title (shown on hover);
//   - per workload (the ones asked for, else the most measured), every candidate of its tuning
//     runs as a dot at its median with a line from its fastest to its slowest repetition:
//     verified, invalid, timed out and failed told apart, the winner marked; and the winner of
//     each run over time (did a BLAS upgrade or a new strategy change it?);
//   - partitionings: predicted against measured bytes per graph step and P, and their times.
// Large stores stay usable: a machine's roofline draws at most `max_points` points (those
// farthest below the roof and an even sample of the rest) and says so; the page never grows
// with the number of measurements beyond these caps.
//
// Every text that comes from the store is escaped: names with <, & or quotes render as text.
// The output is well-formed XML as well as HTML (every element closed, attributes quoted,
// only the five XML entities), so a plain XML parser can check it.
#pragma once

#include <cstddef>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#include "einsumdb/db/store.hpp"

namespace einsumdb {

struct ReportOptions {
  std::string machine;                 // a machine selector (Store::machines_matching); empty: all
  std::string since;                   // ISO 8601: measurements recorded at or after; empty: all
  std::vector<std::string> workloads;  // hashes or prefixes; empty: the most measured ones
  std::size_t max_points = 2000;       // roofline points drawn per machine
  std::size_t max_workloads = 12;      // workload sections when none are named
  std::size_t max_candidates = 60;     // candidates drawn per workload
  std::size_t max_partitionings = 500;
};

struct ReportSummary {
  std::size_t machines = 0;
  std::size_t points = 0, points_drawn = 0;  // roofline points in the store, and drawn
  std::size_t workloads = 0;                 // workload sections
  std::size_t partitionings = 0;
  std::size_t bytes = 0;  // of the page
};

// Writes the page for `store`. Throws SpecError for an unknown machine or workload.
ReportSummary write_report(Store& store, std::ostream& out, const ReportOptions& options = {});

// Text made safe for HTML and XML content and attribute values.
std::string html_escape(std::string_view text);

}  // namespace einsumdb
