// text_format.h — the pieces of Prometheus's text exposition format 0.0.4
// that Registry::Render() is made of: the name grammar, escaping and number
// formatting. https://prometheus.io/docs/instrumenting/exposition_formats/
//
// Pure functions; thread-safe; the string-returning ones allocate.
#ifndef GPUSLICE_METRICS_TEXT_FORMAT_H_
#define GPUSLICE_METRICS_TEXT_FORMAT_H_

#include <string>
#include <string_view>

#include "core/status.h"

namespace gpuslice::metrics {

// [a-zA-Z_:][a-zA-Z0-9_:]*
bool IsValidMetricName(std::string_view name);
// [a-zA-Z_][a-zA-Z0-9_]*, and not beginning with "__" (reserved).
bool IsValidLabelName(std::string_view name);

// Label values: \ -> \\, " -> \", newline -> \n.
std::string EscapeLabelValue(std::string_view value);
// HELP text: \ -> \\, newline -> \n (quotes stay as they are).
std::string EscapeHelp(std::string_view help);

// A sample value as Prometheus parses it: integers without a fraction,
// others with enough digits to round-trip, and NaN, +Inf, -Inf.
std::string FormatValue(double value);

}  // namespace gpuslice::metrics

#endif  // GPUSLICE_METRICS_TEXT_FORMAT_H_
