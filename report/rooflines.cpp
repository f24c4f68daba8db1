#include "einsumdb/report/rooflines.hpp"

#include <algorithm>
#include <cmath>

#include "einsumdb/report/html.hpp"
#include "einsumdb/report/report.hpp"

namespace einsumdb::report {
namespace {

using json = nlohmann::json;

// A point's fraction of its dtype's roof on its machine; -1 without such a roof.
double fraction_of_roof(const Roofs& roofs, const std::string& dtype, double ai, double gflops) {
  const auto r = roofs.find(roof_dtype(dtype));
  if (r == roofs.end() || !(r->second.peak_gflops > 0) || !(r->second.bandwidth_gbs > 0)) return -1;
  return gflops / r->second.attainable_gflops(ai, 1);  // ai FLOPs over one byte
}

}  // namespace

std::vector<Point> drawable(const std::vector<const Store::BestPoint*>& best,
                            const std::map<std::string, Roofs>& roofs_of,
                            std::size_t* without_bytes) {
  std::vector<Point> out;
  for (const auto* p : best) {
    if (!p->flops || !p->bytes || !(*p->bytes > 0) || !(p->gflops > 0)) {
      if (without_bytes) ++*without_bytes;
      continue;
    }
    const double ai = *p->flops / *p->bytes;
    const std::string dtype = dtype_of(p->workload_key);
    const auto roofs = roofs_of.find(p->machine);
    const double f =
        roofs == roofs_of.end() ? -1 : fraction_of_roof(roofs->second, dtype, ai, p->gflops);
    out.push_back({p, ai, f, dtype});
  }
  return out;
}

namespace {

const char* fraction_class(double f) {
  return f < 0 ? "noroof" : f < 0.1 ? "far" : f < 0.5 ? "mid" : "near";
}

}  // namespace

std::string dtype_class(const std::string& dtype) {
  return dtype.empty() ? "" : " dt-" + dtype;
}

// ----------------------------------------------------------------- devices

namespace {

std::string device_machines(const Device& d) {
  std::string m;
  for (const auto* r : d.members) m += (m.empty() ? "" : " ") + short_fp(r->fingerprint);
  return m;
}

}  // namespace

std::size_t device_section(std::ostream& out, const Device& d,
                           const std::map<std::string, Roofs>& roofs_of, std::size_t max_points) {
  out << "<section class=\"device\" id=\"d" << short_fp(d.members.front()->fingerprint) << "\""
      << filter_attrs("", device_machines(d), "") << ">\n<h3>" << html_escape(d.model)
      << (d.here ? " <span class=\"tag\">this machine</span>" : "") << "</h3>\n";
  // A row per machine of the device: its BLAS or driver, what it holds, its roofs.
  std::map<std::string, std::vector<double>> fractions_of;
  std::map<std::string, std::size_t> points_of;
  for (const auto& p : d.points) {
    ++points_of[p.p->machine];
    if (p.fraction >= 0) fractions_of[p.p->machine].push_back(p.fraction);
  }
  out << "<table class=\"wide\"><thead><tr><th>"
      << (d.members.size() > 1 ? "BLAS or driver (" + std::to_string(d.members.size()) + ")"
                               : std::string("BLAS or driver"))
      << "</th><th>machine</th><th class=\"n\">cores</th><th class=\"n\">points</th><th "
         "class=\"n\">median of roof</th><th>measured roofs (one core)</th></tr></thead><tbody>\n";
  for (const auto* m : d.members) {
    const auto fr = fractions_of.find(m->fingerprint);
    const auto med =
        fr == fractions_of.end() ? std::vector<double>{} : quantiles(fr->second, {0.5});
    out << "<tr" << filter_attrs("", short_fp(m->fingerprint), "") << "><td>"
        << html_escape(m->blas) << "</td><td class=\"k\"><code>" << short_fp(m->fingerprint)
        << "</code></td><td class=\"n\">" << m->cores << "</td><td class=\"n\">"
        << points_of[m->fingerprint] << "</td><td class=\"n\">"
        << (med.empty() ? std::string("-") : percent(med[0])) << "</td><td>";
    const auto roofs = roofs_of.find(m->fingerprint);
    if (roofs == roofs_of.end() || roofs->second.empty()) out << "none";
    for (const auto& [dtype, r] : roofs == roofs_of.end() ? Roofs{} : roofs->second)
      out << "<span class=\"kv\">" << html_escape(dtype) << ": " << num(r.peak_gflops)
          << " GFLOP/s, " << num(r.bandwidth_gbs) << " GB/s</span>";
    out << "</td></tr>\n";
  }
  out << "</tbody></table>\n";

  const std::vector<Point>& all = d.points;
  // Too many to draw: those farthest below the roof, and an even sample of the rest.
  std::vector<Point> drawn = all;
  if (drawn.size() > max_points) {
    std::stable_sort(drawn.begin(), drawn.end(),
                     [](const Point& a, const Point& b) { return a.fraction < b.fraction; });
    const std::size_t far = max_points / 2;
    std::vector<Point> sample(drawn.begin(), drawn.begin() + static_cast<std::ptrdiff_t>(far));
    const std::size_t rest = drawn.size() - far, want = max_points - far;
    for (std::size_t k = 0; k < want; ++k) sample.push_back(drawn[far + k * rest / want]);
    out << "<p class=\"note\">" << all.size() << " workloads on this device; drawn: the " << far
        << " farthest below the roof and " << want << " of the other " << rest
        << ", evenly by fraction of the roof.</p>\n";
    drawn = std::move(sample);
  }
  double ai_lo = all[0].ai, ai_hi = all[0].ai, g_lo = all[0].p->gflops, g_hi = g_lo;
  for (const auto& p : all) {
    ai_lo = std::min(ai_lo, p.ai), ai_hi = std::max(ai_hi, p.ai);
    g_lo = std::min(g_lo, p.p->gflops), g_hi = std::max(g_hi, p.p->gflops);
  }
  bool any_roof = false;
  for (const auto* m : d.members) {
    const auto roofs = roofs_of.find(m->fingerprint);
    if (roofs == roofs_of.end()) continue;
    for (const auto& [dtype, r] : roofs->second) {
      any_roof = true;
      g_hi = std::max(g_hi, r.peak_gflops * std::max(1, m->cores));
      ai_hi = std::max(ai_hi, 2 * r.peak_gflops / r.bandwidth_gbs);  // past the knee
    }
  }
  const LogAxis x(ai_lo / 2, ai_hi * 2, kLeft, kWidth - kRight);
  const LogAxis y(g_lo / 2, g_hi * 2, kHeight - kBottom, kTop);
  open_svg(out, "roofline", "roofline of " + d.model);
  axes(out, x, y, "arithmetic intensity (FLOP/byte)", "GFLOP/s");
  const double lo = std::pow(10, x.lo), hi = std::pow(10, x.hi);
  for (const auto* m : d.members) {
    const auto roofs = roofs_of.find(m->fingerprint);
    if (roofs == roofs_of.end()) continue;
    for (const auto& [dtype, r] : roofs->second) {
      const double knee = r.peak_gflops / r.bandwidth_gbs;
      out << "<polyline class=\"roof" << dtype_class(dtype) << "\""
          << filter_attrs("", short_fp(m->fingerprint), "") << " points=\"" << px(x(lo)) << ","
          << px(y(lo * r.bandwidth_gbs)) << " " << px(x(knee)) << "," << px(y(r.peak_gflops)) << " "
          << px(x(hi)) << "," << px(y(r.peak_gflops)) << "\"><title>" << html_escape(dtype)
          << " roof of one core of " << short_fp(m->fingerprint) << ": " << num(r.peak_gflops)
          << " GFLOP/s, " << num(r.bandwidth_gbs) << " GB/s (measured "
          << html_escape(r.measured_at) << ")</title></polyline>\n";
      if (m->cores > 1 && dtype == "f64")
        out << "<line class=\"roof-all dt-f64\" x1=\"" << px(x(lo)) << "\" y1=\""
            << px(y(r.peak_gflops * m->cores)) << "\" x2=\"" << px(x(hi)) << "\" y2=\""
            << px(y(r.peak_gflops * m->cores)) << "\"><title>f64 peak of all " << m->cores
            << " cores</title></line>\n";
    }
  }
  for (const auto& p : drawn) {
    const auto params = parse_params(p.p->params);
    const std::string einsum = einsum_of(p.p->workload_key);
    out << "<circle class=\"pt " << fraction_class(p.fraction) << dtype_class(p.dtype) << "\""
        << filter_attrs(
               einsum + " " + p.p->workload_hash + " " + p.p->strategy + " " + params_text(params),
               short_fp(p.p->machine), strategy_token(p.p->strategy))
        << " cx=\"" << px(x(p.ai)) << "\" cy=\"" << px(y(p.p->gflops)) << "\" r=\"4\"><title>"
        << html_escape(einsum) << " (" << p.p->workload_hash.substr(0, 12) << ", "
        << html_escape(p.dtype) << ")&#10;" << html_escape(p.p->strategy) << " "
        << html_escape(params_text(params)) << "&#10;" << num(p.p->gflops) << " GFLOP/s at "
        << num(p.ai) << " FLOP/byte";
    if (p.fraction >= 0)
      out << ", " << percent(p.fraction) << " of the " << html_escape(roof_dtype(p.dtype))
          << " roof of one core";
    if (d.members.size() > 1) out << "&#10;machine " << short_fp(p.p->machine);
    if (!p.p->binding.empty()) out << "&#10;at " << html_escape(p.p->binding);
    out << "</title></circle>\n";
  }
  out << "</svg>\n<p class=\"legend note\"><span><i class=\"sw far\"></i>&lt; 10% of the "
         "roof</span><span><i class=\"sw mid\"></i>10–50%</span><span><i class=\"sw "
         "near\"></i>&#8805; 50%</span>"
      << (any_roof ? "<span>solid: f64 roof of one core; dashed: f32; dotted: f64 peak of all "
                     "cores. A complex workload is held to its real type's roof; a complex "
                     "multiply-add counts 8 FLOPs.</span>"
                   : "<span>no roofline measured for this device (einsumdb tune measures it): "
                     "points in blue</span>")
      << "</p>\n";
  if (d.without_bytes)
    out << "<p class=\"note\">" << d.without_bytes
        << " workload(s) without a known byte count are not drawn.</p>\n";
  if (any_roof) {
    std::vector<Point> low;
    for (const auto& p : all)
      if (p.fraction >= 0) low.push_back(p);
    std::stable_sort(low.begin(), low.end(),
                     [](const Point& a, const Point& b) { return a.fraction < b.fraction; });
    if (low.size() > 5) low.resize(5);
    out << "<table class=\"wide\"><thead><tr><th>farthest below the roof</th><th>best "
           "transform</th><th class=\"n\">GFLOP/s</th><th class=\"n\">of roof</th></tr></thead>"
           "<tbody>\n";
    for (const auto& p : low) {
      const std::string einsum = einsum_of(p.p->workload_key);
      out << "<tr"
          << filter_attrs(einsum + " " + p.p->workload_hash, short_fp(p.p->machine),
                          strategy_token(p.p->strategy))
          << "><td><code>" << html_escape(einsum) << "</code> " << p.p->workload_hash.substr(0, 12)
          << "</td><td>" << html_escape(p.p->strategy) << " ";
      write_params(out, parse_params(p.p->params));
      out << "</td><td class=\"n\">" << num(p.p->gflops) << "</td><td class=\"n\">"
          << percent(p.fraction) << "</td></tr>\n";
    }
    out << "</tbody></table>\n";
  }
  out << "</section>\n";
  return drawn.size();
}

void empty_devices(std::ostream& out, const std::vector<const Device*>& empty) {
  if (empty.empty()) return;
  std::size_t machines = 0;
  for (const auto* d : empty) machines += d->members.size();
  out << "<div class=\"note\"><details><summary>" << empty.size() << " more device(s) (" << machines
      << " machine(s)) with nothing to draw: no verified measurement with a known "
      << "work and byte count</summary><ul>\n";
  for (const auto* d : empty) {
    out << "<li" << filter_attrs("", device_machines(*d), "") << ">" << html_escape(d->model)
        << " (" << d->members.size() << " machine(s): ";
    for (std::size_t k = 0; k < d->members.size(); ++k)
      out << (k ? ", " : "") << html_escape(d->members[k]->blas);
    out << "): ";
    if (d->verified == 0)
      out << "no verified measurement";
    else
      out << d->verified << " best transform(s), none with a byte count (imported facts "
          << "that give a time but not the bytes moved)";
    out << "</li>\n";
  }
  out << "</ul></details></div>\n";
}

// ----------------------------------------------------------------- strategies

std::size_t strategies_section(std::ostream& out, const std::vector<Point>& points) {
  std::map<std::string, std::vector<double>> fractions;
  std::map<std::string, std::size_t> without_roof;
  for (const auto& p : points) {
    if (p.fraction >= 0)
      fractions[p.p->strategy].push_back(p.fraction);
    else
      ++without_roof[p.p->strategy];
  }
  if (fractions.empty()) {
    out << "<p class=\"note\">No strategy has a point under a measured roof (einsumdb tune "
           "measures this machine's).</p>\n";
    return 0;
  }
  // A box plot per strategy on one log axis of the fraction: 0.1 % to 100 %.
  const double w = 300, h = 16;
  const LogAxis x(1e-3, 1, 4, w - 4);
  out << "<table class=\"wide sortable\" id=\"strategies\"><thead><tr><th>strategy</th><th "
         "class=\"n\">points</th><th class=\"n\">min</th><th class=\"n\">25%</th><th "
         "class=\"n\">median</th><th class=\"n\">75%</th><th class=\"n\">max</th><th>0.1% "
         "&#8230; 100% of the roof (log)</th></tr></thead><tbody>\n";
  for (const auto& [strategy, f] : fractions) {
    const auto q = quantiles(f, {0, 0.25, 0.5, 0.75, 1});
    out << "<tr" << filter_attrs(strategy, "", strategy_token(strategy)) << "><td>"
        << html_escape(strategy) << "</td><td class=\"n\" data-v=\"" << f.size() << "\">"
        << f.size();
    if (without_roof.count(strategy)) out << " (+" << without_roof[strategy] << " no roof)";
    out << "</td>";
    for (double v : q)
      out << "<td class=\"n\" data-v=\"" << num(v, 6) << "\">" << percent(v) << "</td>";
    out << "<td><svg xmlns=\"http://www.w3.org/2000/svg\" class=\"box\" width=\"" << px(w)
        << "\" height=\"" << px(h) << "\" viewBox=\"0 0 " << px(w) << " " << px(h) << "\"><title>"
        << html_escape(strategy) << ": " << f.size() << " best points; fractions of the roof from "
        << percent(q[0]) << " to " << percent(q[4]) << ", median " << percent(q[2])
        << "</title><line class=\"whisker\" x1=\"" << px(x(q[0])) << "\" y1=\"8\" x2=\""
        << px(x(q[4])) << "\" y2=\"8\"/><rect class=\"quart\" x=\"" << px(x(q[1]))
        << "\" y=\"3\" width=\"" << px(std::max(1.0, x(q[3]) - x(q[1])))
        << "\" height=\"10\"/><line class=\"med\" x1=\"" << px(x(q[2])) << "\" y1=\"2\" x2=\""
        << px(x(q[2])) << "\" y2=\"14\"/></svg></td></tr>\n";
  }
  out << "</tbody></table>\n";
  return fractions.size();
}

}  // namespace einsumdb::report
