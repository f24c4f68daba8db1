#include "einsumdb/report/report.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <map>
#include <set>
#include <sstream>

#include "einsumdb/core/error.hpp"
#include "einsumdb/report/html.hpp"
#include "einsumdb/report/rooflines.hpp"
#include "einsumdb/version.hpp"

namespace einsumdb {
namespace {

using json = nlohmann::json;
using ojson = nlohmann::ordered_json;
using namespace report;  // the page\'s building blocks: html.hpp, rooflines.hpp

// ----------------------------------------------------------------- two machines

struct Compared {
  std::size_t both = 0, differ = 0;
};

Compared compare_section(std::ostream& out, Store& store, const MachineRow& a, const MachineRow& b,
                         const std::string& since, std::size_t max_rows) {
  auto best_on = [&](const MachineRow& m) {
    ListFilter f;
    f.machine = m.fingerprint;
    f.since = since;
    return store.best_points(f);
  };
  const auto pa = best_on(a), pb = best_on(b);
  std::map<std::string, const Store::BestPoint*> on_b;
  for (const auto& p : pb) on_b[p.workload_hash] = &p;
  struct Row {
    const Store::BestPoint *a, *b;
    bool differs;
    double ratio;  // b's rate over a's
  };
  std::vector<Row> rows;
  for (const auto& p : pa) {
    const auto q = on_b.find(p.workload_hash);
    if (q == on_b.end()) continue;
    const bool differs = p.strategy != q->second->strategy ||
                         parse_params(p.params) != parse_params(q->second->params);
    rows.push_back({&p, q->second, differs, q->second->gflops / p.gflops});
  }
  Compared c{rows.size(), 0};
  for (const auto& r : rows) c.differ += r.differs;
  out << "<p class=\"note\">A: <code>" << short_fp(a.fingerprint) << "</code> "
      << html_escape(a.cpu_model) << ", " << html_escape(a.blas) << ". B: <code>"
      << short_fp(b.fingerprint) << "</code> " << html_escape(b.cpu_model) << ", "
      << html_escape(b.blas) << ". " << rows.size() << " workload(s) have a verified best on both ("
      << pa.size() - rows.size() << " only on A, " << pb.size() - rows.size()
      << " only on B); the best transform differs on " << c.differ
      << ", listed first. Marked: where B's winner differs from A's.</p>\n";
  if (rows.empty()) return c;
  std::stable_sort(rows.begin(), rows.end(), [](const Row& x, const Row& y) {
    if (x.differs != y.differs) return x.differs;
    return std::abs(std::log(x.ratio)) > std::abs(std::log(y.ratio));
  });
  if (rows.size() > max_rows) {
    out << "<p class=\"note\">The first " << max_rows << " of " << rows.size() << " shown.</p>\n";
    rows.resize(max_rows);
  }
  out << "<table class=\"wide sortable\" id=\"compare\"><thead><tr><th>workload</th><th>A's "
         "best transform</th><th class=\"n\">A GFLOP/s</th><th>B's best transform</th><th "
         "class=\"n\">B GFLOP/s</th><th class=\"n\">B / A</th></tr></thead><tbody>\n";
  for (const auto& r : rows) {
    const std::string einsum = einsum_of(r.a->workload_key);
    const json params_a = parse_params(r.a->params), params_b = parse_params(r.b->params);
    out << "<tr class=\"" << (r.differs ? "differs" : "same") << "\""
        << filter_attrs(
               einsum + " " + r.a->workload_hash + " " + r.a->strategy + " " + r.b->strategy, "",
               strategy_token(r.a->strategy) + " " + strategy_token(r.b->strategy))
        << "><td class=\"e\"><code>" << html_escape(einsum) << "</code><br/>"
        << r.a->workload_hash.substr(0, 12) << "</td><td>";
    write_transform(out, r.a->strategy, params_a);
    out << "</td><td class=\"n\" data-v=\"" << num(r.a->gflops, 6) << "\">" << num(r.a->gflops)
        << "</td><td>";
    write_transform(out, r.b->strategy, params_b, &r.a->strategy, &params_a);
    out << "</td><td class=\"n\" data-v=\"" << num(r.b->gflops, 6) << "\">" << num(r.b->gflops)
        << "</td><td class=\"n\" data-v=\"" << num(r.ratio, 6) << "\">" << num(r.ratio)
        << "</td></tr>\n";
  }
  out << "</tbody></table>\n";
  return c;
}

// ----------------------------------------------------------------- slowdowns

std::size_t slowdowns_section(std::ostream& out, const std::vector<Store::RateChange>& changes,
                              std::size_t limit) {
  if (changes.empty()) {
    out << "<p class=\"note\">No fact got slower: no transform's latest median exceeds the one "
           "before it by more than both spreads.</p>\n";
    return 0;
  }
  out << "<p class=\"note\">A transform whose latest verified median on a machine exceeds the "
         "one before it by more than both spreads (median − fastest repetition, each) and 1%"
      << (changes.size() >= limit ? "; the " + std::to_string(limit) + " most slowed" : "")
      << ".</p>\n<table class=\"wide sortable\" id=\"slowdowns\"><thead><tr><th>workload</th>"
         "<th>machine</th><th>transform</th><th>before</th><th>latest</th><th "
         "class=\"n\">slower</th></tr></thead><tbody>\n";
  auto side = [&](const Store::RateChange::Side& s) {
    out << "<td class=\"n\" data-v=\"" << num(s.median_s, 6) << "\">" << seconds_text(s.median_s)
        << " (fastest " << seconds_text(s.min_s) << ")<br/><span class=\"note\">"
        << html_escape(s.run_label) << ", " << html_escape(s.recorded_at.substr(0, 19))
        << "</span></td>";
  };
  for (const auto& c : changes) {
    const std::string einsum = einsum_of(c.workload_key);
    out << "<tr"
        << filter_attrs(einsum + " " + c.workload_hash + " " + c.strategy, short_fp(c.machine),
                        strategy_token(c.strategy))
        << "><td class=\"e\"><code>" << html_escape(einsum) << "</code><br/>"
        << c.workload_hash.substr(0, 12) << "</td><td class=\"k\"><code>" << short_fp(c.machine)
        << "</code></td><td>";
    write_transform(out, c.strategy, parse_params(c.params));
    out << "</td>";
    side(c.before);
    side(c.after);
    const double ratio = c.after.median_s / c.before.median_s;
    out << "<td class=\"n\" data-v=\"" << num(ratio, 6) << "\">" << num(ratio)
        << "&#215;</td></tr>\n";
  }
  out << "</tbody></table>\n";
  return changes.size();
}

// ----------------------------------------------------------------- the index

std::size_t index_section(std::ostream& out, const std::vector<Point>& points,
                          const std::set<std::string>& detailed,
                          const std::map<std::string, MachineRow>& machines, std::size_t max_rows) {
  if (points.empty()) {
    out << "<p class=\"note\">No verified measurement with a known work and byte count.</p>\n";
    return 0;
  }
  std::vector<const Point*> rows;
  for (const auto& p : points) rows.push_back(&p);
  // Farthest below the roof first (no roof last), then by einsum.
  std::stable_sort(rows.begin(), rows.end(), [](const Point* a, const Point* b) {
    const double fa = a->fraction < 0 ? 2 : a->fraction, fb = b->fraction < 0 ? 2 : b->fraction;
    if (fa != fb) return fa < fb;
    return a->p->workload_key < b->p->workload_key;
  });
  out << "<p class=\"note\">Every workload's best verified transform per machine, farthest below "
         "the roof first. Search and filter with the bar above; click a column to sort.";
  if (rows.size() > max_rows) {
    out << " The first " << max_rows << " of " << rows.size()
        << " (einsumdb list and einsumdb best give the rest).";
    rows.resize(max_rows);
  }
  out << "</p>\n<table class=\"wide sortable\" id=\"index\"><thead><tr><th>einsum</th><th>hash"
         "</th><th>machine</th><th>best transform</th><th class=\"n\">GFLOP/s</th><th "
         "class=\"n\">FLOP/byte</th><th class=\"n\">of roof</th></tr></thead><tbody>\n";
  for (const auto* p : rows) {
    const std::string einsum = einsum_of(p->p->workload_key);
    const auto params = parse_params(p->p->params);
    const auto m = machines.find(p->p->machine);
    const std::string hash12 = p->p->workload_hash.substr(0, 12);
    out << "<tr class=\""
        << html_escape(dtype_class(p->dtype).substr(dtype_class(p->dtype).empty() ? 0 : 1)) << "\""
        << filter_attrs(einsum + " " + p->p->workload_hash + " " + p->p->strategy + " " +
                            report::params_text(params) + " " + p->dtype,
                        short_fp(p->p->machine), strategy_token(p->p->strategy))
        << "><td class=\"e\"><code>" << html_escape(einsum) << "</code></td><td class=\"k\">";
    if (detailed.count(p->p->workload_hash))
      out << "<a href=\"#w" << hash12 << "\">" << hash12 << "</a>";
    else
      out << hash12;
    out << "</td><td><code>" << short_fp(p->p->machine) << "</code>"
        << (m == machines.end() ? "" : "<br/>" + html_escape(m->second.cpu_model)) << "</td><td>";
    write_transform(out, p->p->strategy, params);
    out << "</td><td class=\"n\" data-v=\"" << num(p->p->gflops, 6) << "\">" << num(p->p->gflops)
        << "</td><td class=\"n\" data-v=\"" << num(p->ai, 6) << "\">" << num(p->ai)
        << "</td><td class=\"n\" data-v=\""
        << (p->fraction < 0 ? std::string("") : num(p->fraction, 6)) << "\">"
        << (p->fraction < 0 ? std::string("-") : percent(p->fraction)) << "</td></tr>\n";
  }
  out << "</tbody></table>\n";
  return rows.size();
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
  std::set<std::string> machines_here, strategies_here;
  for (const auto* r : kept) {
    machines_here.insert(short_fp((*r)["machine"]["fingerprint"].get<std::string>()));
    strategies_here.insert(strategy_token((*r)["transform"]["name"].get<std::string>()));
  }
  auto joined = [](const std::set<std::string>& s) {
    std::string t;
    for (const auto& v : s) t += (t.empty() ? "" : " ") + v;
    return t;
  };
  out << "<section class=\"workload\" id=\"w" << hash.substr(0, 12) << "\""
      << filter_attrs(einsum_of(key) + " " + hash + " " + key, joined(machines_here),
                      joined(strategies_here))
      << ">\n<h3><code>" << html_escape(einsum_of(key)) << "</code> " << hash.substr(0, 12)
      << "</h3>\n<p class=\"note\"><code>" << html_escape(key) << "</code></p>\n";
  std::map<std::string, int> by_status;
  std::vector<const ojson*> timed;
  for (const auto* r : kept) {
    ++by_status[(*r)["status"].get<std::string>()];
    if (!(*r)["median_s"].is_null()) timed.push_back(r);
  }
  out << "<p class=\"note\">" << kept.size() << " measurement(s):";
  for (const auto& [status, n] : by_status) out << " " << n << " " << html_escape(status);
  out << ".</p>\n";
  if (timed.empty()) {
    out << "</section>\n";
    return;
  }
  // Verified first, fastest first; then the others.
  std::stable_sort(timed.begin(), timed.end(), [](const ojson* a, const ojson* b) {
    const bool ok_a = (*a)["status"] == "ok", ok_b = (*b)["status"] == "ok";
    if (ok_a != ok_b) return ok_a;
    return (*a)["median_s"].get<double>() < (*b)["median_s"].get<double>();
  });
  const std::size_t hidden = timed.size() > max_candidates ? timed.size() - max_candidates : 0;
  timed.resize(timed.size() - hidden);
  auto slowest = [](const ojson& r) {
    double s = r["median_s"].get<double>();
    for (const auto& t : r["seconds"]) s = std::max(s, t.get<double>());
    return s;
  };
  auto fastest = [](const ojson& r) {
    return r["min_s"].is_null() ? r["median_s"].get<double>() : r["min_s"].get<double>();
  };
  double lo = 1e300, hi = 0;
  for (const auto* r : timed) lo = std::min(lo, fastest(*r)), hi = std::max(hi, slowest(*r));
  // Each row's repetitions on one log axis shared by the rows.
  const double bar_w = 220, bar_h = 14;
  const LogAxis x(lo / 1.5, hi * 1.5, 5, bar_w - 5);
  const ojson* winner = (*timed.front())["status"] == "ok" ? timed.front() : nullptr;
  const json winner_params = winner ? json((*winner)["transform"]["params"]) : json();
  const std::string winner_name =
      winner ? (*winner)["transform"]["name"].get<std::string>() : std::string();
  out << "<table class=\"wide sortable candidates\" id=\"c" << hash.substr(0, 12)
      << "\"><thead><tr><th></th><th>transform</th><th class=\"n\">median</th><th>fastest "
         "&#8230; slowest</th><th>status</th><th>machine</th></tr></thead><tbody>\n";
  for (std::size_t k = 0; k < timed.size(); ++k) {
    const ojson& r = *timed[k];
    const std::string status = r["status"];
    const bool is_winner = &r == winner;
    const std::string cls = is_winner ? "winner" : status == "ok" ? "ok" : status;
    const double median = r["median_s"].get<double>();
    const std::string name = r["transform"]["name"];
    const json params = r["transform"]["params"];
    const std::string fp = r["machine"]["fingerprint"];
    out << "<tr class=\"cand " << cls << "\""
        << filter_attrs("", short_fp(fp), strategy_token(name)) << " title=\""
        << html_escape(status) << (is_winner ? " (the winner)" : "") << ": median "
        << seconds_text(median) << ", " << seconds_text(fastest(r)) << " to "
        << seconds_text(slowest(r)) << " over " << r["repetitions"] << " repetition(s); run "
        << r["run"]["id"] << " " << html_escape(r["run"]["label"].get<std::string>()) << ", "
        << html_escape(r["recorded_at"].get<std::string>()) << "\"><td>"
        << (is_winner ? "&#9733;" : "") << "</td><td>";
    write_transform(out, name, params, winner && !is_winner ? &winner_name : nullptr,
                    winner && !is_winner ? &winner_params : nullptr);
    const double cy = bar_h / 2;
    out << "</td><td class=\"n\" data-v=\"" << num(median, 6) << "\">" << seconds_text(median)
        << "</td><td><svg xmlns=\"http://www.w3.org/2000/svg\" class=\"bar\" width=\"" << px(bar_w)
        << "\" height=\"" << px(bar_h) << "\" viewBox=\"0 0 " << px(bar_w) << " " << px(bar_h)
        << "\"><line class=\"range " << cls << "\" x1=\"" << px(x(fastest(r))) << "\" y1=\""
        << px(cy) << "\" x2=\"" << px(x(slowest(r))) << "\" y2=\"" << px(cy) << "\"/>";
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
    out << "</svg></td><td class=\"k\">" << html_escape(status) << "</td><td class=\"k\"><code>"
        << short_fp(fp) << "</code></td></tr>\n";
  }
  out << "</tbody></table>\n<p class=\"legend note\"><span><i class=\"sw winner\"></i>&#9733; "
         "the winner</span><span><i class=\"sw ok\"></i>verified</span><span><i class=\"sw "
         "invalid\"></i>&#215; invalid (wrong result, never an answer)</span><span><i "
         "class=\"sw timeout\"></i>&#9650; timed out</span><span><i class=\"sw diff\"></i>differs "
         "from the winner</span><span>dot: median; line: fastest to slowest repetition (one "
         "axis for the rows: "
      << seconds_text(std::pow(10, x.lo)) << " to " << seconds_text(std::pow(10, x.hi))
      << ", log)</span></p>\n";
  if (hidden) out << "<p class=\"note\">" << hidden << " slower candidate(s) not listed.</p>\n";
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
  if (!best_of_run.empty()) {
    out << "<table class=\"wide\"><thead><tr><th>run</th><th>started</th><th>label</th><th>"
           "machine</th><th>best transform</th><th class=\"n\">median</th><th "
           "class=\"n\">GFLOP/s</th><th></th></tr></thead><tbody>\n";
    std::string previous;
    for (const auto& [run, r] : best_of_run) {
      const std::string fp = (*r)["machine"]["fingerprint"];
      const std::string winner_of_run = (*r)["transform"]["name"].get<std::string>() + " " +
                                        (*r)["transform"]["params"].dump() + " on " + fp;
      out << "<tr" << filter_attrs("", short_fp(fp), "") << "><td>" << run.second << "</td><td>"
          << html_escape(run.first) << "</td><td>"
          << html_escape((*r)["run"]["label"].get<std::string>()) << "</td><td><code>"
          << short_fp(fp) << "</code></td><td>";
      write_transform(out, (*r)["transform"]["name"], json((*r)["transform"]["params"]));
      out << "</td><td class=\"n\">" << seconds_text((*r)["median_s"].get<double>())
          << "</td><td class=\"n\">"
          << ((*r)["gflops"].is_null() ? std::string("-") : num((*r)["gflops"].get<double>()))
          << "</td><td>" << (!previous.empty() && winner_of_run != previous ? "winner changed" : "")
          << "</td></tr>\n";
      previous = winner_of_run;
    }
    out << "</tbody></table>\n";
  }
  out << "</section>\n";
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
    report::open_svg(out, "partitionings", "predicted against measured bytes per step");
    report::axes(out, x, y, "predicted bytes moved", "measured bytes sent");
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
  std::map<std::string, MachineRow> all_machines, machines;
  for (const auto& m : stats["by_machine"]) {
    const std::string fp = m["fingerprint"];
    all_machines[fp] = {fp, m["cpu_model"], m["blas"], m["cores"].get<int>()};
    if (machine_filter.empty() || machine_filter.count(fp)) machines[fp] = all_machines[fp];
  }
  summary.machines = machines.size();
  // The two machines to set side by side, each named by one selector that matches one machine.
  std::vector<const MachineRow*> compared;
  if (!o.compare.empty()) {
    if (o.compare.size() != 2)
      throw SpecError("--compare takes two machines; got " + std::to_string(o.compare.size()));
    for (const auto& selector : o.compare) {
      const auto found = store.machines_matching(selector);
      if (found.size() != 1) {
        std::string names;
        for (const auto& fp : found) names += " " + short_fp(fp);
        throw SpecError("--compare '" + selector + "' names " + std::to_string(found.size()) +
                        " machines (" + names.substr(names.empty() ? 0 : 1) +
                        "); give a fingerprint prefix that names one");
      }
      compared.push_back(&all_machines.at(found.front()));
    }
    if (compared[0] == compared[1])
      throw SpecError("--compare names the same machine twice: " +
                      short_fp(compared[0]->fingerprint));
  }

  ListFilter filter;
  filter.since = o.since;
  if (machine_filter.size() == 1) filter.machine = *machine_filter.begin();
  const auto best = store.best_points(filter);
  std::map<std::string, Roofs> roofs_of;
  for (const auto& [fp, m] : machines)
    for (const char* dtype : {"f64", "f32"})
      if (auto r = store.roofline(fp, dtype)) roofs_of[fp][dtype] = *r;

  // Devices: machines grouped by model; this machine's first, then those with points (most
  // first), then the ones with nothing to draw.
  std::map<std::string, Device> device_of;
  for (const auto& [fp, m] : machines) {
    Device& d = device_of[m.cpu_model];
    d.model = m.cpu_model;
    d.members.push_back(&m);
    d.here = d.here || fp == o.this_machine;
  }
  for (auto& [model, d] : device_of)
    std::stable_sort(d.members.begin(), d.members.end(),
                     [](const MachineRow* a, const MachineRow* b) { return a->blas < b->blas; });
  std::map<std::string, std::vector<const Store::BestPoint*>> best_of;
  for (const auto& p : best)
    if (machines.count(p.machine)) best_of[p.machine].push_back(&p);
  std::vector<Point> all_points;
  for (auto& [model, d] : device_of)
    for (const auto* m : d.members) {
      const auto& b = best_of[m->fingerprint];
      d.verified += b.size();
      auto pts = drawable(b, roofs_of, &d.without_bytes);
      d.points.insert(d.points.end(), pts.begin(), pts.end());
      all_points.insert(all_points.end(), pts.begin(), pts.end());
    }
  std::vector<const Device*> shown, empty;
  for (const auto& [model, d] : device_of) (d.points.empty() ? empty : shown).push_back(&d);
  std::stable_sort(shown.begin(), shown.end(), [](const Device* a, const Device* b) {
    if (a->here != b->here) return a->here;
    return a->points.size() > b->points.size();
  });
  summary.devices = device_of.size();
  summary.devices_drawn = shown.size();

  // What the filter bar offers.
  std::set<std::string> strategies, dtypes;
  for (const auto& p : best) strategies.insert(p.strategy);
  for (const auto& p : all_points)
    if (!p.dtype.empty()) dtypes.insert(p.dtype);
  for (const auto& [fp, roofs] : roofs_of)
    for (const auto& [dtype, r] : roofs) dtypes.insert(dtype);

  std::vector<std::string> sections = named;
  if (sections.empty()) {
    ListFilter f;
    f.since = o.since;
    if (machine_filter.size() == 1) f.machine = *machine_filter.begin();
    sections = store.most_measured(f, o.max_workloads);
  }
  const std::set<std::string> detailed(sections.begin(), sections.end());

  std::ostringstream out;
  out << "<!DOCTYPE html>\n<html xmlns=\"http://www.w3.org/1999/xhtml\" lang=\"en\">\n<head>"
         "<meta charset=\"utf-8\"/><meta name=\"viewport\" content=\"width=device-width\"/>"
         "<title>einsumdb report: "
      << html_escape(stats["path"].get<std::string>()) << "</title><style>" << report::kPageStyle
      << "</style></head>\n<body>\n<h1>einsumdb performance report</h1>\n";
  out << "<table class=\"summary\">"
      << "<tr><th>store</th><td><code>" << html_escape(stats["path"].get<std::string>())
      << "</code> (schema version " << stats["schema_version"] << ")</td></tr>"
      << "<tr><th>written</th><td>" << now_iso8601() << " by einsumdb " << kVersion;
  if (!o.this_machine.empty()) {
    const auto here = all_machines.find(o.this_machine);
    out << " on <code>" << short_fp(o.this_machine) << "</code>"
        << (here == all_machines.end() ? std::string(" (no measurement of this machine in the "
                                                     "store)")
                                       : " " + html_escape(here->second.cpu_model));
  }
  out << "</td></tr>"
      << "<tr><th>machines</th><td>" << stats["machines"] << " (this report: " << machines.size()
      << ", as " << device_of.size() << " device(s))</td></tr>"
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
  out << "<p class=\"note\">Sections: <a href=\"#machines\">machines</a> &#183; <a "
         "href=\"#strategies-h\">strategies</a> &#183; "
      << (compared.empty() ? "" : "<a href=\"#compare-h\">two machines</a> &#183; ")
      << "<a href=\"#slowdowns-h\">slower facts</a> &#183; <a href=\"#index-h\">index</a> "
         "&#183; <a href=\"#workloads\">workloads</a> &#183; <a "
         "href=\"#partitionings\">partitionings</a>. Rates are GFLOP/s; a complex multiply-add "
         "counts 8 real FLOPs.</p>\n";
  // The filter bar: shown by the script, which alone makes it work.
  out << "<div id=\"controls\" class=\"controls\" hidden=\"hidden\"><input type=\"search\" "
         "id=\"f-q\" placeholder=\"search einsum, hash, strategy, parameters\" "
         "aria-label=\"search\"/><select id=\"f-m\" aria-label=\"machine\"><option "
         "value=\"\">every machine</option>";
  for (const auto& [fp, m] : machines)
    out << "<option value=\"" << short_fp(fp) << "\">" << short_fp(fp) << " "
        << html_escape(m.cpu_model) << " (" << html_escape(m.blas) << ")</option>";
  out << "</select><select id=\"f-s\" aria-label=\"strategy\"><option value=\"\">every "
         "strategy</option>";
  for (const auto& s : strategies)
    out << "<option value=\"" << html_escape(strategy_token(s)) << "\">" << html_escape(s)
        << "</option>";
  out << "</select><span id=\"f-dt\">roofs and points:";
  for (const auto& dt : dtypes)
    out << " <label><input type=\"checkbox\" value=\"" << html_escape(dt)
        << "\" checked=\"checked\"/>" << html_escape(dt) << "</label>";
  out << "</span><span id=\"f-shown\" class=\"note\"></span></div>\n<noscript><p "
         "class=\"note\">Without script the page shows everything; searching, filtering and "
         "sorting need it.</p></noscript>\n";

  out << "<h2 id=\"machines\">Machines and their rooflines</h2>\n<p class=\"note\">Each point "
         "is a workload's verified transform of highest rate on the machine, at its arithmetic "
         "intensity (work over bytes moved; a symbolic workload at the lengths it was timed at). "
         "Hover for the einsum, the transform and the figures.</p>\n";
  for (const auto* d : shown)
    summary.points_drawn += device_section(out, *d, roofs_of, o.max_points);
  if (shown.empty())
    out << "<p class=\"note\">No verified measurement with a known work and byte count.</p>\n";
  empty_devices(out, empty);
  summary.points = all_points.size();

  out << "<h2 id=\"strategies-h\">Strategies against the roof</h2>\n<p class=\"note\">Per "
         "strategy, its best point on each workload and machine with a measured roof (where it "
         "is not the winner too), as a fraction of that roof.</p>\n";
  {
    const auto per_strategy = store.strategy_points(filter);
    std::vector<const Store::BestPoint*> kept;
    for (const auto& p : per_strategy)
      if (machines.count(p.machine)) kept.push_back(&p);
    summary.strategies = strategies_section(out, drawable(kept, roofs_of, nullptr));
  }

  if (!compared.empty()) {
    out << "<h2 id=\"compare-h\">Two machines side by side</h2>\n";
    const Compared c = compare_section(out, store, *compared[0], *compared[1], o.since, o.max_rows);
    summary.compared = c.both;
    summary.compared_differ = c.differ;
  }

  out << "<h2 id=\"slowdowns-h\">Facts that got slower</h2>\n";
  {
    ListFilter f = filter;
    f.limit = o.max_slowdowns;
    auto changes = store.slowdowns(f);
    std::erase_if(changes, [&](const Store::RateChange& c) { return !machines.count(c.machine); });
    summary.slowdowns = slowdowns_section(out, changes, o.max_slowdowns);
  }

  out << "<h2 id=\"index-h\">Index of best transforms</h2>\n";
  summary.index_rows = index_section(out, all_points, detailed, machines, o.max_rows);

  out << "<h2 id=\"workloads\">Workloads</h2>\n<p class=\"note\">"
      << (named.empty() ? "The " + std::to_string(sections.size()) +
                              " most measured workloads (name others with --workload HASH)."
                        : std::string("The workloads asked for."))
      << " Every candidate of their tuning runs, fastest first.</p>\n";
  for (const auto& hash : sections) {
    workload_section(out, hash, store.show(hash), machine_filter, o.since, o.max_candidates);
    ++summary.workloads;
  }

  out << "<h2 id=\"partitionings\">Partitionings</h2>\n<p class=\"note\">Predicted against "
         "measured bytes of each graph step on P ranks (the most recent "
      << o.max_partitionings << " measured).</p>\n";
  summary.partitionings = partitionings_section(
      out, store.measured_partitionings(o.since, o.max_partitionings), machine_filter);
  out << "<script>" << report::kPageScript << "</script>\n</body>\n</html>\n";
  const std::string text = out.str();
  summary.bytes = text.size();
  page << text;
  return summary;
}

}  // namespace einsumdb
