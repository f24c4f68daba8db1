// The report's building blocks (internal to the report module): numbers and units as text,
// a transform's parameters as key=value, the parts of a canonical key the page shows, and the
// log-scaled SVG charts. Everything that writes markup escapes what it is given.
#pragma once

#include <cstddef>
#include <ostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace einsumdb::report {

std::string num(double v, int digits = 3);  // %g with `digits` significant digits
std::string px(double v);                   // a coordinate, one decimal
std::string seconds_text(double s);         // "12.3 ms"
std::string bytes_text(double b);           // "1.2 GB"
std::string percent(double fraction);       // "12.3%"

// The einsum of a canonical key: its text up to the first ';'.
std::string einsum_of(const std::string& key);
// The widest element type among a canonical key's arrays ("f64", "c128", ...; "" if none).
std::string dtype_of(const std::string& key);
// The dtype whose roof bounds a workload of `dtype`: a complex type computes on its real one.
std::string roof_dtype(const std::string& dtype);

// A transform's parameters (a JSON object's text) as key=value spans, each whole and wrapped
// where it must be; a key whose value differs from `winner`'s (or is missing there) is marked
// class "diff". `winner` null: nothing marked. An empty object says "defaults".
void write_params(std::ostream& out, const nlohmann::json& params,
                  const nlohmann::json* winner = nullptr);
// The same as one line of plain text, for titles and search: "key=value key=value".
std::string params_text(const nlohmann::json& params);

// A fingerprint or hash as the tables print it: its first 12 digits.
std::string short_fp(const std::string& fingerprint);
std::string lower(std::string text);
// A transform's parameters from their JSON text (text that is not JSON: kept as a string).
nlohmann::json parse_params(const std::string& text);
// The filter attributes of an element: what the search box matches (lowercased), the machines
// (fingerprints' 12-digit prefixes) and strategies it belongs to, each a space-separated list.
// Empty ones are left out, so the element passes that filter.
std::string filter_attrs(const std::string& search, const std::string& machines,
                         const std::string& strategies);
// A strategy as a value of the strategy filter (data-s is a list: spaces become '_').
std::string strategy_token(std::string strategy);
// A transform as its name and parameters; with `other_*`, the name marked if it differs from
// the other's, else the parameters that differ from the other's.
void write_transform(std::ostream& out, const std::string& strategy, const nlohmann::json& params,
                     const std::string* other_strategy = nullptr,
                     const nlohmann::json* other_params = nullptr);

// A log-scaled axis from lo to hi (decades widened to whole powers of ten) onto [a, b].
struct LogAxis {
  double lo, hi, a, b;
  LogAxis(double min_value, double max_value, double from, double to);
  double operator()(double v) const;
};

// The size of the charts, in CSS pixels; they scale down with the page (viewBox).
constexpr double kWidth = 760, kHeight = 440, kLeft = 70, kRight = 20, kTop = 20, kBottom = 50;

// Opens an <svg> of kWidth × `height` with a title.
void open_svg(std::ostream& out, const std::string& cls, const std::string& title,
              double height = kHeight);
// Frame, decade grid lines and labels of a log-log chart.
void axes(std::ostream& out, const LogAxis& x, const LogAxis& y, const std::string& x_label,
          const std::string& y_label);

// Quantiles of `values` (sorted here) at the given fractions, linearly interpolated.
std::vector<double> quantiles(std::vector<double> values, const std::vector<double>& at);

}  // namespace einsumdb::report

namespace einsumdb::report {

// The page's style sheet, and its script: filters (search, machine, strategy), a dtype's
// roofs and points shown or hidden, sortable tables, the state kept in the address's #fragment
// (#q=TEXT&m=MACHINE&s=STRATEGY&off=f32). The page says everything without the script.
extern const char* const kPageStyle;
extern const char* const kPageScript;

}  // namespace einsumdb::report
