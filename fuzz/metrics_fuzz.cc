// Fuzzes the hand-written Prometheus text format (src/metrics): whatever a
// vGPU is named, its series must stay one line whose label value unescapes
// back to the name; HELP text must not break lines; the name grammar must
// agree with Prometheus's regular expressions; values must round-trip.
// The first input byte picks the check, the rest is its input.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>

#include "fuzz_target.h"
#include "metrics/registry.h"
#include "metrics/text_format.h"

namespace {

using gpuslice::fuzz::FuzzCheckFailed;
using gpuslice::metrics::Registry;

size_t CountLines(const std::string& s) { return static_cast<size_t>(std::count(s.begin(), s.end(), '\n')); }

// Reads the value of the first label on `line` (after `name{label="`),
// undoing the format's three escapes; false if it is malformed.
bool ReadLabelValue(const std::string& line, size_t start, std::string* out) {
  for (size_t i = start; i < line.size(); ++i) {
    if (line[i] == '"') return line.compare(i, 4, "\"} 1") == 0 && i + 4 == line.size();
    if (line[i] == '\n') return false;
    if (line[i] != '\\') {
      *out += line[i];
      continue;
    }
    if (++i == line.size()) return false;
    if (line[i] == 'n') {
      *out += '\n';
    } else if (line[i] == '\\' || line[i] == '"') {
      *out += line[i];
    } else {
      return false;
    }
  }
  return false;
}

void CheckLabelValue(std::string_view input) {
  Registry registry;
  auto family = registry.AddGauge("gpuslice_vgpu_processes", "Processes.", {"vgpu"});
  if (!family.ok()) FuzzCheckFailed("cannot register", family.status().message().c_str());
  (*family)->WithLabels({std::string(input)}).Set(1);
  const std::string text = registry.Render();
  if (CountLines(text) != 3) FuzzCheckFailed("a label value broke the line structure", text.c_str());
  const size_t series = text.find("\ngpuslice_vgpu_processes{vgpu=\"");
  if (series == std::string::npos) FuzzCheckFailed("series line missing", text.c_str());
  const std::string line = text.substr(series + 1, text.size() - series - 2);
  std::string value;
  if (!ReadLabelValue(line, std::strlen("gpuslice_vgpu_processes{vgpu=\""), &value) || value != input) {
    FuzzCheckFailed("label value does not unescape to the original", line.c_str());
  }
}

void CheckHelp(std::string_view input) {
  Registry registry;
  if (!registry.AddGauge("g", std::string(input)).ok()) FuzzCheckFailed("help text refused", "");
  const std::string text = registry.Render();
  if (CountLines(text) != 2 || text.rfind("# HELP g ", 0) != 0) {
    FuzzCheckFailed("help text broke the line structure", text.c_str());
  }
}

void CheckNames(std::string_view input) {
  // Prometheus's definitions (docs: data model), [a-zA-Z_:][a-zA-Z0-9_:]*
  // and [a-zA-Z_][a-zA-Z0-9_]*, restated as character sets: a second
  // formulation to hold the first one to. (Not std::regex: GCC 12 reports
  // false maybe-uninitialized errors in it under ASan.)
  static constexpr char kLetters[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ_";
  const std::string s(input);
  const std::string first = s.substr(0, 1);
  const std::string rest = s.empty() ? "" : s.substr(1);
  const std::string letters = kLetters;
  const bool metric = !s.empty() && first.find_first_not_of(letters + ":") == std::string::npos &&
                      rest.find_first_not_of(letters + ":0123456789") == std::string::npos;
  const bool label = !s.empty() && first.find_first_not_of(letters) == std::string::npos &&
                     rest.find_first_not_of(letters + "0123456789") == std::string::npos && s.rfind("__", 0) != 0;
  if (metric != gpuslice::metrics::IsValidMetricName(s)) FuzzCheckFailed("metric name grammar", s.c_str());
  if (label != gpuslice::metrics::IsValidLabelName(s)) FuzzCheckFailed("label name grammar", s.c_str());
  Registry registry;
  const bool added = registry.AddGauge(s, "h").ok();
  if (added != metric) FuzzCheckFailed("AddGauge disagrees with the grammar", s.c_str());
  if (added && registry.Render().find("# TYPE " + s + " gauge\n") == std::string::npos) {
    FuzzCheckFailed("registered name not rendered", s.c_str());
  }
}

void CheckValue(std::string_view input) {
  double v = 0;
  if (input.size() < sizeof(v)) return;
  std::memcpy(&v, input.data(), sizeof(v));
  const std::string text = gpuslice::metrics::FormatValue(v);
  if (std::isnan(v)) {
    if (text != "NaN") FuzzCheckFailed("NaN not written as NaN", text.c_str());
    return;
  }
  const double back = std::strtod(text.c_str(), nullptr);
  if (back != v || std::signbit(back) != std::signbit(v)) FuzzCheckFailed("value does not round-trip", text.c_str());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0 || size > 4096) return 0;
  const std::string_view input(reinterpret_cast<const char*>(data) + 1, size - 1);
  switch (data[0] % 4) {
    case 0:
      CheckLabelValue(input);
      break;
    case 1:
      CheckHelp(input);
      break;
    case 2:
      CheckNames(input);
      break;
    default:
      CheckValue(input);
      break;
  }
  return 0;
}
