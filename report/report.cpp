#include "einsumdb/report/report.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <set>
#include <sstream>

#include "einsumdb/canon/error.hpp"

#ifndef EINSUMDB_VERSION
#define EINSUMDB_VERSION "0"
#endif

namespace einsumdb {
namespace {

using json = nlohmann::json;
using ojson = nlohmann::ordered_json;

std::string num(double v, int digits = 3) {
  char buf[48];
  std::snprintf(buf, sizeof buf, "%.*g", digits, v);
  return buf;
}

// A coordinate: one decimal is plenty on a screen.
std::string px(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", v);
  return buf;
}

std::string seconds_text(double s) {
  if (s >= 1) return num(s) + " s";
  if (s >= 1e-3) return num(s * 1e3) + " ms";
  if (s >= 1e-6) return num(s * 1e6) + " us";
  return num(s * 1e9) + " ns";
}

std::string bytes_text(double b) {
  if (b >= 1e9) return num(b / 1e9) + " GB";
  if (b >= 1e6) return num(b / 1e6) + " MB";
  if (b >= 1e3) return num(b / 1e3) + " kB";
  return num(b) + " B";
}

// The einsum of a canonical key: its text up to the first ';'.
std::string einsum_of(const std::string& key) {
  return key.substr(0, key.find(';'));
}

// A log-scaled axis from lo to hi (decades widened to whole powers of ten) onto [a, b].
struct LogAxis {
  double lo, hi, a, b;
  LogAxis(double min_value, double max_value, double from, double to) : a(from), b(to) {
    lo = std::floor(std::log10(std::max(min_value, 1e-300)));
    hi = std::ceil(std::log10(std::max(max_value, 1e-300)));
    if (hi <= lo) hi = lo + 1;
  }
  double operator()(double v) const {
    const double t = (std::log10(std::max(v, 1e-300)) - lo) / (hi - lo);
    return a + std::clamp(t, -0.02, 1.02) * (b - a);
  }
};

constexpr double kWidth = 760, kHeight = 440, kLeft = 70, kRight = 20, kTop = 20, kBottom = 50;

// Frame, decade grid lines and labels of a log-log chart.
void axes(std::ostream& out, const LogAxis& x, const LogAxis& y, const std::string& x_label,
          const std::string& y_label) {
  out << "<rect x=\"" << px(kLeft) << "\" y=\"" << px(kTop) << "\" width=\""
      << px(kWidth - kLeft - kRight) << "\" height=\"" << px(kHeight - kTop - kBottom)
      << "\" class=\"frame\"/>\n";
  for (double d = x.lo; d <= x.hi; ++d) {
    const double at = x(std::pow(10, d));
    out << "<line x1=\"" << px(at) << "\" y1=\"" << px(kTop) << "\" x2=\"" << px(at) << "\" y2=\""
        << px(kHeight - kBottom) << "\" class=\"grid\"/><text x=\"" << px(at) << "\" y=\""
        << px(kHeight - kBottom + 16) << "\" class=\"tick\" text-anchor=\"middle\">"
        << num(std::pow(10, d)) << "</text>\n";
  }
  for (double d = y.lo; d <= y.hi; ++d) {
    const double at = y(std::pow(10, d));
    out << "<line x1=\"" << px(kLeft) << "\" y1=\"" << px(at) << "\" x2=\"" << px(kWidth - kRight)
        << "\" y2=\"" << px(at) << "\" class=\"grid\"/><text x=\"" << px(kLeft - 6) << "\" y=\""
        << px(at + 4) << "\" class=\"tick\" text-anchor=\"end\">" << num(std::pow(10, d))
        << "</text>\n";
  }
  out << "<text x=\"" << px((kLeft + kWidth - kRight) / 2) << "\" y=\"" << px(kHeight - 10)
      << "\" class=\"label\" text-anchor=\"middle\">" << html_escape(x_label) << "</text>\n"
      << "<text x=\"16\" y=\"" << px((kTop + kHeight - kBottom) / 2)
      << "\" class=\"label\" text-anchor=\"middle\" transform=\"rotate(-90 16 "
      << px((kTop + kHeight - kBottom) / 2) << ")\">" << html_escape(y_label) << "</text>\n";
}

void open_svg(std::ostream& out, const std::string& cls, const std::string& title) {
  out << "<svg xmlns=\"http://www.w3.org/2000/svg\" class=\"" << cls << "\" viewBox=\"0 0 "
      << px(kWidth) << " " << px(kHeight) << "\" width=\"" << px(kWidth) << "\" height=\""
      << px(kHeight) << "\" role=\"img\"><title>" << html_escape(title) << "</title>\n";
}

constexpr const char* kStyle = R"css(
body { font: 14px/1.45 system-ui, sans-serif; margin: 24px auto; max-width: 1100px; color: #222; }
h1 { font-size: 22px; } h2 { font-size: 18px; margin-top: 36px; border-bottom: 1px solid #ccc; }
h3 { font-size: 15px; margin-top: 24px; }
table { border-collapse: collapse; margin: 8px 0; }
td, th { border-bottom: 1px solid #eee; padding: 2px 8px; text-align: left; vertical-align: top; }
td.n, th.n { text-align: right; font-variant-numeric: tabular-nums; }
code { font-size: 12px; background: #f4f4f4; padding: 0 3px; }
.note { color: #555; font-size: 13px; }
svg { display: block; margin: 8px 0; background: #fff; }
.frame { fill: none; stroke: #888; } .grid { stroke: #eee; }
.tick { font-size: 11px; fill: #555; } .label { font-size: 12px; fill: #222; }
.roof { fill: none; stroke: #333; stroke-width: 2; }
.roof-f32 { stroke-dasharray: 6 3; } .roof-all { fill: none; stroke: #999; stroke-dasharray: 2 3; }
.pt { stroke: #fff; stroke-width: 0.5; }
.far { fill: #d62728; } .mid { fill: #ff7f0e; } .near { fill: #2ca02c; } .noroof { fill: #1f77b4; }
.ok { fill: #1f77b4; stroke: #1f77b4; } .invalid { fill: #d62728; stroke: #d62728; }
.timeout { fill: #999; stroke: #999; } .winner { fill: #2ca02c; stroke: #2ca02c; }
.range { stroke-width: 1.5; } .diag { stroke: #999; stroke-dasharray: 4 3; }
.part { fill: #9467bd; stroke: #fff; stroke-width: 0.5; }
.legend span { display: inline-block; margin-right: 14px; }
.sw { display: inline-block; width: 10px; height: 10px; margin-right: 4px; border-radius: 5px; }
.sw.far { background: #d62728; } .sw.mid { background: #ff7f0e; } .sw.near { background: #2ca02c; }
.sw.ok { background: #1f77b4; } .sw.invalid { background: #d62728; } .sw.timeout { background: #999; }
.sw.winner { background: #2ca02c; }
)css";

struct MachineRow {
  std::string fingerprint, cpu_model, blas;
  int cores = 0;
};

// ----------------------------------------------------------------- roofline

std::size_t roofline_section(Store& store, std::ostream& out, const MachineRow& m,
                             const std::vector<const Store::BestPoint*>& points,
                             std::size_t max_points) {
  out << "<h3>" << html_escape(m.cpu_model) << " <code>" << m.fingerprint.substr(0, 12)
      << "</code></h3>\n<p class=\"note\">" << m.cores << " core(s), " << html_escape(m.blas)
      << "</p>\n";
  std::vector<Store::Roofline> roofs;
  for (const char* dtype : {"f64", "f32"})
    if (auto r = store.roofline(m.fingerprint, dtype)) roofs.push_back(*r);
  struct Point {
    const Store::BestPoint* p;
    double ai, fraction;  // fraction of the roof; -1 without a roof
  };
  std::vector<Point> all;
  std::size_t without_bytes = 0;
  for (const auto* p : points) {
    if (!p->flops || !p->bytes || !(*p->bytes > 0) || !(p->gflops > 0)) {
      ++without_bytes;
      continue;
    }
    const double ai = *p->flops / *p->bytes;
    double fraction = -1;
    if (!roofs.empty())
      fraction = p->gflops / std::min(roofs[0].peak_gflops, ai * roofs[0].bandwidth_gbs);
    all.push_back({p, ai, fraction});
  }
  // Too many to draw: those farthest below the roof, and an even sample of the rest.
  std::vector<Point> drawn = all;
  if (drawn.size() > max_points) {
    std::stable_sort(drawn.begin(), drawn.end(),
                     [](const Point& a, const Point& b) { return a.fraction < b.fraction; });
    const std::size_t far = max_points / 2;
    std::vector<Point> sample(drawn.begin(), drawn.begin() + static_cast<std::ptrdiff_t>(far));
    const std::size_t rest = drawn.size() - far, want = max_points - far;
    for (std::size_t k = 0; k < want; ++k) sample.push_back(drawn[far + k * rest / want]);
    out << "<p class=\"note\">" << all.size() << " workloads on this machine; drawn: the " << far
        << " farthest below the roof and " << want << " of the other " << rest
        << ", evenly by fraction of the roof.</p>\n";
    drawn = std::move(sample);
  }
  if (all.empty()) {
    out << "<p class=\"note\">No verified measurement with a known work and byte count.</p>\n";
    return 0;
  }
  double ai_lo = all[0].ai, ai_hi = all[0].ai, g_lo = all[0].p->gflops, g_hi = g_lo;
  for (const auto& p : all) {
    ai_lo = std::min(ai_lo, p.ai), ai_hi = std::max(ai_hi, p.ai);
    g_lo = std::min(g_lo, p.p->gflops), g_hi = std::max(g_hi, p.p->gflops);
  }
  for (const auto& r : roofs) {
    g_hi = std::max(g_hi, r.peak_gflops * std::max(1, m.cores));
    ai_hi = std::max(ai_hi, 2 * r.peak_gflops / r.bandwidth_gbs);  // past the knee
  }
  const LogAxis x(ai_lo / 2, ai_hi * 2, kLeft, kWidth - kRight);
  const LogAxis y(g_lo / 2, g_hi * 2, kHeight - kBottom, kTop);
  open_svg(out, "roofline", "roofline of " + m.cpu_model);
  axes(out, x, y, "arithmetic intensity (FLOP/byte)", "GFLOP/s");
  for (std::size_t k = 0; k < roofs.size(); ++k) {
    const auto& r = roofs[k];
    const double knee = r.peak_gflops / r.bandwidth_gbs;
    const double lo = std::pow(10, x.lo), hi = std::pow(10, x.hi);
    out << "<polyline class=\"roof roof-" << r.dtype << "\" points=\"" << px(x(lo)) << ","
        << px(y(lo * r.bandwidth_gbs)) << " " << px(x(knee)) << "," << px(y(r.peak_gflops)) << " "
        << px(x(hi)) << "," << px(y(r.peak_gflops)) << "\"><title>" << r.dtype
        << " roof of one core: " << num(r.peak_gflops) << " GFLOP/s, " << num(r.bandwidth_gbs)
        << " GB/s (measured " << html_escape(r.measured_at) << ")</title></polyline>\n";
    if (m.cores > 1 && k == 0)
      out << "<line class=\"roof-all\" x1=\"" << px(x(lo)) << "\" y1=\""
          << px(y(r.peak_gflops * m.cores)) << "\" x2=\"" << px(x(hi)) << "\" y2=\""
          << px(y(r.peak_gflops * m.cores)) << "\"><title>" << r.dtype << " peak of all " << m.cores
          << " cores</title></line>\n";
  }
  for (const auto& p : drawn) {
    const char* cls = p.fraction < 0     ? "noroof"
                      : p.fraction < 0.1 ? "far"
                      : p.fraction < 0.5 ? "mid"
                                         : "near";
    out << "<circle class=\"pt " << cls << "\" cx=\"" << px(x(p.ai)) << "\" cy=\""
        << px(y(p.p->gflops)) << "\" r=\"4\"><title>" << html_escape(einsum_of(p.p->workload_key))
        << " (" << p.p->workload_hash.substr(0, 12) << ")&#10;" << html_escape(p.p->strategy) << " "
        << html_escape(p.p->params) << "&#10;" << num(p.p->gflops) << " GFLOP/s at " << num(p.ai)
        << " FLOP/byte";
    if (p.fraction >= 0) out << ", " << num(100 * p.fraction, 2) << "% of the one-core roof";
    if (!p.p->binding.empty()) out << "&#10;at " << html_escape(p.p->binding);
    out << "</title></circle>\n";
  }
  out << "</svg>\n<p class=\"legend note\"><span><i class=\"sw far\"></i>&lt; 10% of the "
         "roof</span><span><i class=\"sw mid\"></i>10–50%</span><span><i class=\"sw "
         "near\"></i>&#8805; 50%</span>"
      << (roofs.empty() ? "<span>no roofline measured for this machine (einsumdb tune "
                          "measures it): points in blue</span>"
                        : "<span>solid: f64 roof of one core; dashed: f32; dotted: peak of "
                          "all cores</span>")
      << "</p>\n";
  if (without_bytes)
    out << "<p class=\"note\">" << without_bytes
        << " workload(s) without a known byte count are not drawn.</p>\n";
  // The workloads farthest below the roof, as a table.
  if (!roofs.empty()) {
    std::vector<Point> low = all;
    std::stable_sort(low.begin(), low.end(),
                     [](const Point& a, const Point& b) { return a.fraction < b.fraction; });
    if (low.size() > 5) low.resize(5);
    out << "<table><tr><th>farthest below the roof</th><th>best transform</th><th "
           "class=\"n\">GFLOP/s</th><th class=\"n\">of roof</th></tr>\n";
    for (const auto& p : low)
      out << "<tr><td><code>" << html_escape(einsum_of(p.p->workload_key)) << "</code> "
          << p.p->workload_hash.substr(0, 12) << "</td><td>" << html_escape(p.p->strategy)
          << "</td><td class=\"n\">" << num(p.p->gflops) << "</td><td class=\"n\">"
          << num(100 * p.fraction, 2) << "%</td></tr>\n";
    out << "</table>\n";
  }
  return drawn.size();
}

// ----------------------------------------------------------------- one workload

void workload_section(std::ostream& out, const std::string& hash, const std::vector<ojson>& rows,
                      const std::set<std::string>& machines, const std::string& since,
                      std::size_t max_candidates) {
  std::vector<const ojson*> kept;
  for (const auto& r : rows)
    if ((machines.empty() || machines.count(r["machine"]["fingerprint"].get<std::string>())) &&
        (since.empty() || r["recorded_at"].get<std::string>() >= since))
      kept.push_back(&r);
  const std::string key = rows.empty() ? "" : rows.front()["workload"]["key"].get<std::string>();
  out << "<h3 id=\"w" << hash.substr(0, 12) << "\"><code>" << html_escape(einsum_of(key))
      << "</code> " << hash.substr(0, 12) << "</h3>\n<p class=\"note\"><code>" << html_escape(key)
      << "</code></p>\n";
  std::map<std::string, int> by_status;
  std::vector<const ojson*> timed;
  for (const auto* r : kept) {
    ++by_status[(*r)["status"].get<std::string>()];
    if (!(*r)["median_s"].is_null()) timed.push_back(r);
  }
  out << "<p class=\"note\">" << kept.size() << " measurement(s):";
  for (const auto& [status, n] : by_status) out << " " << n << " " << html_escape(status);
  out << ".</p>\n";
  if (timed.empty()) return;
  // Verified first, fastest first; then the others.
  std::stable_sort(timed.begin(), timed.end(), [](const ojson* a, const ojson* b) {
    const bool ok_a = (*a)["status"] == "ok", ok_b = (*b)["status"] == "ok";
    if (ok_a != ok_b) return ok_a;
    return (*a)["median_s"].get<double>() < (*b)["median_s"].get<double>();
  });
  const std::size_t hidden = timed.size() > max_candidates ? timed.size() - max_candidates : 0;
  timed.resize(timed.size() - hidden);
  double lo = 1e300, hi = 0;
  auto slowest = [](const ojson& r) {
    double s = r["median_s"].get<double>();
    for (const auto& t : r["seconds"]) s = std::max(s, t.get<double>());
    return s;
  };
  for (const auto* r : timed) {
    lo = std::min(
        lo, (*r)["min_s"].is_null() ? (*r)["median_s"].get<double>() : (*r)["min_s"].get<double>());
    hi = std::max(hi, slowest(*r));
  }
  const double row_h = 14, height = kTop + row_h * static_cast<double>(timed.size()) + 40;
  const LogAxis x(lo / 1.5, hi * 1.5, 300, kWidth - kRight);
  out << "<svg xmlns=\"http://www.w3.org/2000/svg\" class=\"candidates\" viewBox=\"0 0 "
      << px(kWidth) << " " << px(height) << "\" width=\"" << px(kWidth) << "\" height=\""
      << px(height) << "\" role=\"img\"><title>candidates of " << hash.substr(0, 12)
      << "</title>\n";
  for (double d = x.lo; d <= x.hi; ++d)
    out << "<line class=\"grid\" x1=\"" << px(x(std::pow(10, d))) << "\" y1=\"" << px(kTop)
        << "\" x2=\"" << px(x(std::pow(10, d))) << "\" y2=\"" << px(height - 30)
        << "\"/><text class=\"tick\" text-anchor=\"middle\" x=\"" << px(x(std::pow(10, d)))
        << "\" y=\"" << px(height - 16) << "\">" << seconds_text(std::pow(10, d)) << "</text>\n";
  for (std::size_t k = 0; k < timed.size(); ++k) {
    const ojson& r = *timed[k];
    const std::string status = r["status"];
    const bool winner = k == 0 && status == "ok";
    const std::string cls = winner ? "winner" : status == "ok" ? "ok" : status;
    const double cy = kTop + row_h * (static_cast<double>(k) + 0.5);
    const double median = r["median_s"].get<double>();
    const double fastest = r["min_s"].is_null() ? median : r["min_s"].get<double>();
    std::string label =
        r["transform"]["name"].get<std::string>() + " " + r["transform"]["params"].dump();
    if (label.size() > 46) label = label.substr(0, 43) + "...";
    out << "<g class=\"cand " << cls << "\"><title>"
        << html_escape(r["transform"]["name"].get<std::string>()) << " "
        << html_escape(r["transform"]["params"].dump()) << "&#10;" << html_escape(status)
        << (winner ? " (the winner)" : "") << ": median " << seconds_text(median) << ", "
        << seconds_text(fastest) << " to " << seconds_text(slowest(r)) << " over "
        << r["repetitions"] << " repetition(s)&#10;run " << r["run"]["id"] << " "
        << html_escape(r["run"]["label"].get<std::string>()) << ", "
        << html_escape(r["recorded_at"].get<std::string>()) << "&#10;machine "
        << r["machine"]["fingerprint"].get<std::string>().substr(0, 12)
        << "</title><text class=\"tick\" x=\"4\" y=\"" << px(cy + 4) << "\">"
        << (winner ? "&#9733; " : "") << html_escape(label) << "</text><line class=\"range " << cls
        << "\" x1=\"" << px(x(fastest)) << "\" y1=\"" << px(cy) << "\" x2=\"" << px(x(slowest(r)))
        << "\" y2=\"" << px(cy) << "\"/>";
    if (status == "invalid")
      out << "<path class=\"" << cls << "\" d=\"M" << px(x(median) - 4) << " " << px(cy - 4) << "L"
          << px(x(median) + 4) << " " << px(cy + 4) << "M" << px(x(median) - 4) << " " << px(cy + 4)
          << "L" << px(x(median) + 4) << " " << px(cy - 4) << "\" stroke-width=\"2\"/>";
    else if (status == "timeout")
      out << "<path class=\"" << cls << "\" d=\"M" << px(x(median)) << " " << px(cy - 5) << "L"
          << px(x(median) + 5) << " " << px(cy + 4) << "L" << px(x(median) - 5) << " " << px(cy + 4)
          << "Z\"/>";
    else
      out << "<circle class=\"dot " << cls << "\" cx=\"" << px(x(median)) << "\" cy=\"" << px(cy)
          << "\" r=\"4\"/>";
    out << "</g>\n";
  }
  out << "</svg>\n<p class=\"legend note\"><span><i class=\"sw winner\"></i>&#9733; the "
         "winner</span><span><i class=\"sw ok\"></i>verified</span><span><i class=\"sw "
         "invalid\"></i>&#215; invalid (wrong result, never an answer)</span><span><i "
         "class=\"sw timeout\"></i>&#9650; timed out</span><span>dot: median; line: fastest to "
         "slowest repetition</span></p>\n";
  if (hidden) out << "<p class=\"note\">" << hidden << " slower candidate(s) not drawn.</p>\n";
  if (by_status.count("failed"))
    out << "<p class=\"note\">" << by_status["failed"]
        << " candidate(s) failed (threw; no time).</p>\n";

  // The winner of each run, in time order: did an upgrade or a new strategy change it?
  std::map<std::pair<std::string, std::int64_t>, const ojson*> best_of_run;
  for (const auto* r : kept) {
    if ((*r)["status"] != "ok" || (*r)["median_s"].is_null()) continue;
    const auto run = std::make_pair((*r)["run"]["started_at"].get<std::string>(),
                                    (*r)["run"]["id"].get<std::int64_t>());
    const ojson*& b = best_of_run[run];
    if (!b || (*r)["median_s"].get<double>() < (*b)["median_s"].get<double>()) b = r;
  }
  if (best_of_run.empty()) return;
  out << "<table><tr><th>run</th><th>started</th><th>label</th><th>machine</th><th>best "
         "transform</th><th class=\"n\">median</th><th class=\"n\">GFLOP/s</th><th></th></tr>\n";
  std::string previous;
  for (const auto& [run, r] : best_of_run) {
    const std::string winner = (*r)["transform"]["name"].get<std::string>() + " " +
                               (*r)["transform"]["params"].dump() + " on " +
                               (*r)["machine"]["fingerprint"].get<std::string>();
    out << "<tr><td>" << run.second << "</td><td>" << html_escape(run.first) << "</td><td>"
        << html_escape((*r)["run"]["label"].get<std::string>()) << "</td><td><code>"
        << (*r)["machine"]["fingerprint"].get<std::string>().substr(0, 12) << "</code></td><td>"
        << html_escape((*r)["transform"]["name"].get<std::string>()) << " <code>"
        << html_escape((*r)["transform"]["params"].dump()) << "</code></td><td class=\"n\">"
        << seconds_text((*r)["median_s"].get<double>()) << "</td><td class=\"n\">"
        << ((*r)["gflops"].is_null() ? std::string("-") : num((*r)["gflops"].get<double>()))
        << "</td><td>" << (!previous.empty() && winner != previous ? "winner changed" : "")
        << "</td></tr>\n";
    previous = winner;
  }
  out << "</table>\n";
}

// ----------------------------------------------------------------- partitionings

std::size_t partitionings_section(std::ostream& out, const std::vector<Store::Partitioning>& parts,
                                  const std::set<std::string>& machines) {
  std::vector<const Store::Partitioning*> kept;
  for (const auto& p : parts)
    if (machines.empty() || machines.count(p.machine)) kept.push_back(&p);
  if (kept.empty()) {
    out << "<p class=\"note\">No partitioning with a measured time (an MPI run of a graph "
           "records them: mpirun -np P einsumdb run GRAPH).</p>\n";
    return 0;
  }
  std::vector<const Store::Partitioning*> both;
  for (const auto* p : kept)
    if (p->predicted_bytes && p->measured_bytes && *p->predicted_bytes > 0 &&
        *p->measured_bytes > 0)
      both.push_back(p);
  if (!both.empty()) {
    double lo = 1e300, hi = 0;
    for (const auto* p : both)
      for (double v : {*p->predicted_bytes, *p->measured_bytes})
        lo = std::min(lo, v), hi = std::max(hi, v);
    const LogAxis x(lo / 2, hi * 2, kLeft, kWidth - kRight);
    const LogAxis y(lo / 2, hi * 2, kHeight - kBottom, kTop);
    open_svg(out, "partitionings", "predicted against measured bytes per step");
    axes(out, x, y, "predicted bytes moved", "measured bytes sent");
    out << "<line class=\"diag\" x1=\"" << px(x(std::pow(10, x.lo))) << "\" y1=\""
        << px(y(std::pow(10, x.lo))) << "\" x2=\"" << px(x(std::pow(10, x.hi))) << "\" y2=\""
        << px(y(std::pow(10, x.hi))) << "\"><title>measured = predicted</title></line>\n";
    for (const auto* p : both)
      out << "<circle class=\"pt part\" cx=\"" << px(x(*p->predicted_bytes)) << "\" cy=\""
          << px(y(*p->measured_bytes)) << "\" r=\"4\"><title>step " << html_escape(p->step) << " "
          << html_escape(p->einsum) << ", P = " << p->procs << ", " << html_escape(p->method)
          << "&#10;predicted " << bytes_text(*p->predicted_bytes) << ", measured "
          << bytes_text(*p->measured_bytes)
          << (p->measured_seconds ? ", " + seconds_text(*p->measured_seconds) : "")
          << "</title></circle>\n";
    out << "</svg>\n";
  }
  out << "<table><tr><th>step</th><th>einsum</th><th class=\"n\">P</th><th>method</th><th "
         "class=\"n\">predicted</th><th class=\"n\">measured</th><th "
         "class=\"n\">time</th><th>machine</th></tr>\n";
  for (const auto* p : kept)
    out << "<tr><td>" << html_escape(p->step) << "</td><td><code>" << html_escape(p->einsum)
        << "</code></td><td class=\"n\">" << p->procs << "</td><td>" << html_escape(p->method)
        << "</td><td class=\"n\">"
        << (p->predicted_bytes ? bytes_text(*p->predicted_bytes) : std::string("-"))
        << "</td><td class=\"n\">"
        << (p->measured_bytes ? bytes_text(*p->measured_bytes) : std::string("-"))
        << "</td><td class=\"n\">"
        << (p->measured_seconds ? seconds_text(*p->measured_seconds) : std::string("-"))
        << "</td><td><code>" << p->machine.substr(0, 12) << "</code></td></tr>\n";
  out << "</table>\n";
  return kept.size();
}

}  // namespace

std::string html_escape(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        // Control characters are not allowed in XML text: shown as a replacement mark.
        if (static_cast<unsigned char>(c) < 0x20 && c != '\n' && c != '\t')
          out += "&#65533;";
        else
          out += c;
    }
  }
  return out;
}

ReportSummary write_report(Store& store, std::ostream& page, const ReportOptions& o) {
  ReportSummary summary;
  std::set<std::string> machine_filter;
  if (!o.machine.empty())
    for (const auto& fp : store.machines_matching(o.machine)) machine_filter.insert(fp);
  std::vector<std::string> named;
  for (const auto& w : o.workloads) named.push_back(store.resolve_workload(w));

  const ojson stats = store.stats();
  std::map<std::string, MachineRow> machines;
  for (const auto& m : stats["by_machine"]) {
    const std::string fp = m["fingerprint"];
    if (!machine_filter.empty() && !machine_filter.count(fp)) continue;
    machines[fp] = {fp, m["cpu_model"], m["blas"], m["cores"].get<int>()};
  }
  summary.machines = machines.size();

  // Points: one query over the measurements for every machine at once.
  ListFilter filter;
  filter.since = o.since;
  if (machine_filter.size() == 1) filter.machine = *machine_filter.begin();
  const auto points = store.best_points(filter);
  std::map<std::string, std::vector<const Store::BestPoint*>> points_of;
  for (const auto& p : points)
    if (machines.count(p.machine)) points_of[p.machine].push_back(&p);

  std::ostringstream out;
  out << "<!DOCTYPE html>\n<html xmlns=\"http://www.w3.org/1999/xhtml\" lang=\"en\">\n<head>"
         "<meta charset=\"utf-8\"/><title>einsumdb report: "
      << html_escape(stats["path"].get<std::string>()) << "</title><style>" << kStyle
      << "</style></head>\n<body>\n<h1>einsumdb performance report</h1>\n";
  out << "<table class=\"summary\">"
      << "<tr><th>store</th><td><code>" << html_escape(stats["path"].get<std::string>())
      << "</code> (schema version " << stats["schema_version"] << ")</td></tr>"
      << "<tr><th>written</th><td>" << now_iso8601() << " by einsumdb " << EINSUMDB_VERSION
      << "</td></tr>"
      << "<tr><th>machines</th><td>" << stats["machines"] << " (this report: " << machines.size()
      << ")</td></tr>"
      << "<tr><th>workloads</th><td>" << stats["workloads"] << " (" << stats["structures"]
      << " structures)</td></tr>"
      << "<tr><th>measurements</th><td>" << stats["measurements"] << ":";
  for (const auto& [status, n] : stats["measurements_by_status"].items())
    out << " " << n << " " << html_escape(status);
  out << "; " << stats["runs"] << " runs</td></tr>"
      << "<tr><th>recorded</th><td>" << html_escape(stats["first_recorded"].get<std::string>())
      << " to " << html_escape(stats["last_recorded"].get<std::string>()) << "</td></tr>"
      << "<tr><th>partitionings</th><td>" << stats["partitionings"] << "</td></tr>";
  if (!o.machine.empty() || !o.since.empty())
    out << "<tr><th>filter</th><td>"
        << (o.machine.empty() ? "" : "machine " + html_escape(o.machine) + " ")
        << (o.since.empty() ? "" : "since " + html_escape(o.since)) << "</td></tr>";
  out << "</table>\n";

  out << "<h2>Rooflines</h2>\n<p class=\"note\">Each point is a workload's verified "
         "transform of highest rate on the machine, at its arithmetic intensity (work over "
         "bytes moved; a symbolic workload at the lengths it was timed at). Hover for the "
         "einsum, the transform and the figures.</p>\n";
  for (const auto& [fp, m] : machines) {
    const auto& p = points_of[fp];
    summary.points += p.size();
    summary.points_drawn += roofline_section(store, out, m, p, o.max_points);
  }

  std::vector<std::string> sections = named;
  if (sections.empty()) {
    ListFilter f;
    f.since = o.since;
    if (machine_filter.size() == 1) f.machine = *machine_filter.begin();
    sections = store.most_measured(f, o.max_workloads);
  }
  out << "<h2>Workloads</h2>\n<p class=\"note\">"
      << (named.empty() ? "The " + std::to_string(sections.size()) +
                              " most measured workloads (name others with --workload HASH)."
                        : std::string("The workloads asked for."))
      << " Every candidate of their tuning runs, fastest first.</p>\n";
  for (const auto& hash : sections) {
    workload_section(out, hash, store.show(hash), machine_filter, o.since, o.max_candidates);
    ++summary.workloads;
  }

  out << "<h2>Partitionings</h2>\n<p class=\"note\">Predicted against measured bytes of each "
         "graph step on P ranks (the most recent "
      << o.max_partitionings << " measured).</p>\n";
  summary.partitionings = partitionings_section(
      out, store.measured_partitionings(o.since, o.max_partitionings), machine_filter);
  out << "</body>\n</html>\n";
  const std::string text = out.str();
  summary.bytes = text.size();
  page << text;
  return summary;
}

}  // namespace einsumdb
