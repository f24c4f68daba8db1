#include "einsumdb/report/html.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>

#include "einsumdb/report/report.hpp"

namespace einsumdb::report {

std::string num(double v, int digits) {
  char buf[48];
  std::snprintf(buf, sizeof buf, "%.*g", digits, v);
  return buf;
}

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

std::string percent(double fraction) {
  return num(100 * fraction, 3) + "%";
}

std::string einsum_of(const std::string& key) {
  return key.substr(0, key.find(';'));
}

std::string dtype_of(const std::string& key) {
  // The arrays are the key's last field: "A0:f64[2,2],A1:f32[2,8]".
  const std::size_t last = key.rfind(';');
  if (last == std::string::npos) return "";
  static const char* const kWidestFirst[] = {"c128", "c64", "f64", "f32", "f16"};
  for (const char* dtype : kWidestFirst)
    if (key.find(std::string(":") + dtype + "[", last) != std::string::npos) return dtype;
  return "";
}

std::string roof_dtype(const std::string& dtype) {
  if (dtype == "c128") return "f64";
  if (dtype == "c64") return "f32";
  return dtype;
}

namespace {

std::string value_text(const nlohmann::json& v) {
  return v.is_string() ? v.get<std::string>() : v.dump();
}

}  // namespace

void write_params(std::ostream& out, const nlohmann::json& params, const nlohmann::json* winner) {
  if (!params.is_object() || params.empty()) {
    out << "<span class=\"kv none\">"
        << (params.is_object() ? "defaults" : html_escape(params.dump())) << "</span>";
    return;
  }
  bool first = true;
  for (const auto& [key, value] : params.items()) {
    const bool differs =
        winner && winner->is_object() && (!winner->contains(key) || winner->at(key) != value);
    out << (first ? "" : " ") << "<span class=\"kv" << (differs ? " diff" : "") << "\">"
        << html_escape(key) << "=" << html_escape(value_text(value)) << "</span>";
    first = false;
  }
}

std::string params_text(const nlohmann::json& params) {
  if (!params.is_object()) return params.dump();
  std::string text;
  for (const auto& [key, value] : params.items())
    text += (text.empty() ? "" : " ") + key + "=" + value_text(value);
  return text;
}

std::string short_fp(const std::string& fingerprint) {
  return fingerprint.substr(0, 12);
}

std::string lower(std::string text) {
  for (char& c : text) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return text;
}

nlohmann::json parse_params(const std::string& text) {
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception&) {
    return text;
  }
}

std::string filter_attrs(const std::string& search, const std::string& machines,
                         const std::string& strategies) {
  std::string a;
  if (!search.empty()) a += " data-q=\"" + html_escape(lower(search)) + "\"";
  if (!machines.empty()) a += " data-m=\"" + html_escape(machines) + "\"";
  if (!strategies.empty()) a += " data-s=\"" + html_escape(strategies) + "\"";
  return a;
}

std::string strategy_token(std::string strategy) {
  std::replace(strategy.begin(), strategy.end(), ' ', '_');
  return strategy;
}

void write_transform(std::ostream& out, const std::string& strategy, const nlohmann::json& params,
                     const std::string* other_strategy, const nlohmann::json* other_params) {
  const bool name_differs = other_strategy && *other_strategy != strategy;
  out << "<span class=\"name" << (name_differs ? " diff" : "") << "\">" << html_escape(strategy)
      << "</span> ";
  write_params(out, params, name_differs ? nullptr : other_params);
}

LogAxis::LogAxis(double min_value, double max_value, double from, double to) : a(from), b(to) {
  lo = std::floor(std::log10(std::max(min_value, 1e-300)));
  hi = std::ceil(std::log10(std::max(max_value, 1e-300)));
  if (hi <= lo) hi = lo + 1;
}

double LogAxis::operator()(double v) const {
  const double t = (std::log10(std::max(v, 1e-300)) - lo) / (hi - lo);
  return a + std::clamp(t, -0.02, 1.02) * (b - a);
}

void open_svg(std::ostream& out, const std::string& cls, const std::string& title, double height) {
  out << "<svg xmlns=\"http://www.w3.org/2000/svg\" class=\"" << cls << "\" viewBox=\"0 0 "
      << px(kWidth) << " " << px(height) << "\" width=\"" << px(kWidth) << "\" height=\""
      << px(height) << "\" role=\"img\"><title>" << html_escape(title) << "</title>\n";
}

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

std::vector<double> quantiles(std::vector<double> values, const std::vector<double>& at) {
  std::vector<double> out;
  if (values.empty()) return out;
  std::sort(values.begin(), values.end());
  for (double q : at) {
    const double pos = q * static_cast<double>(values.size() - 1);
    const auto i = static_cast<std::size_t>(pos);
    const double t = pos - static_cast<double>(i);
    out.push_back(i + 1 < values.size() ? values[i] * (1 - t) + values[i + 1] * t : values[i]);
  }
  return out;
}

}  // namespace einsumdb::report
