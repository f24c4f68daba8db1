// `einsumdb report`: the performance database as one self-contained HTML page (inline SVG, CSS
// and script, no network) that a browser opens directly.
//
// The page holds, for the selected machines and time span:
//   - a summary of the store, and a bar of filters: search (einsum, hash, strategy,
//     parameters), machine, strategy, and which dtypes' roofs and points are drawn; sortable
//     tables; the filters' state in the address (#q=...&m=...&s=...&off=f32), so a view can be
//     shared. Without script every section is shown whole;
//   - machines in the order an analyst reads them: this machine first, then the devices with
//     something to draw (machines of one device and several BLAS libraries or drivers are one
//     section with a row per driver), then one line naming those with nothing to draw and why.
//     Each device's roofline: the measured one-core peak and bandwidth per dtype as roofs, every
//     workload's best verified transform as a point at its arithmetic intensity, colored by its
//     fraction of its dtype's roof (a complex dtype's roof is its real one's);
//   - per strategy, the distribution of its best points' fractions of the roof;
//   - with `compare`, each workload's winner and rate on two machines side by side, the
//     workloads whose winner differs first;
//   - the facts that got slower: a transform whose latest median exceeds the one before by more
//     than both spreads;
//   - an index of the best points (einsum, hash, machine, transform, rate, fraction of the roof);
//   - per workload (the ones asked for, else the most measured), every candidate as a row: its
//     transform and parameters whole as key=value (those that differ from the winner marked),
//     its median and the range of its repetitions; and the winner of each run over time;
//   - partitionings: predicted against measured bytes per graph step and P, and their times.
// Large stores stay usable: every list has a cap (the options below), and the page says what it
// left out; the page never grows with the number of measurements beyond these caps.
//
// Every text that comes from the store is escaped: names with <, & or quotes render as text.
// The output is well-formed XML as well as HTML (every element closed, attributes quoted,
// only the five XML entities, the script in CDATA), so a plain XML parser can check it.
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
  std::string this_machine;            // fingerprint of the machine the page is written on
  std::vector<std::string> compare;    // none, or two machine selectors to set side by side
  std::size_t max_points = 2000;       // roofline points drawn per device
  std::size_t max_workloads = 12;      // workload sections when none are named
  std::size_t max_candidates = 60;     // candidates listed per workload
  std::size_t max_rows = 2000;         // rows of the index and of the comparison
  std::size_t max_slowdowns = 200;     // facts that got slower, the most slowed first
  std::size_t max_partitionings = 500;
};

struct ReportSummary {
  std::size_t machines = 0;
  std::size_t devices = 0, devices_drawn = 0;     // machine sections, and those with points
  std::size_t points = 0, points_drawn = 0;       // roofline points in the store, and drawn
  std::size_t strategies = 0;                     // strategies with a distribution of fractions
  std::size_t index_rows = 0;                     // rows of the index (of `points`)
  std::size_t compared = 0, compared_differ = 0;  // workloads on both machines; winner differs
  std::size_t slowdowns = 0;
  std::size_t workloads = 0;  // workload sections
  std::size_t partitionings = 0;
  std::size_t bytes = 0;  // of the page
};

// Writes the page for `store`. Throws SpecError for an unknown machine or workload, and for a
// `compare` selector that names no machine or several.
ReportSummary write_report(Store& store, std::ostream& out, const ReportOptions& options = {});

// Text made safe for HTML and XML content and attribute values.
std::string html_escape(std::string_view text);

}  // namespace einsumdb
