#include "core/byte_size.h"

#include <cctype>
#include <cmath>
#include <cstdio>

namespace gpuslice::core {
namespace {

struct Unit {
  const char* name;
  double factor;
};
constexpr Unit kUnits[] = {
    {"", 1.0},          {"b", 1.0},
    {"k", 1024.0},      {"kib", 1024.0},      {"ki", 1024.0},      {"kb", 1e3},
    {"m", 1048576.0},   {"mib", 1048576.0},   {"mi", 1048576.0},   {"mb", 1e6},
    {"g", 1073741824.0}, {"gib", 1073741824.0}, {"gi", 1073741824.0}, {"gb", 1e9},
    {"t", 1099511627776.0}, {"tib", 1099511627776.0}, {"ti", 1099511627776.0}, {"tb", 1e12},
};

Status Bad(std::string_view text, const char* why) {
  return Status::Error("invalid size '" + std::string(text) + "': " + why +
                       "; write a number with a unit, for example 4GiB, 512MiB or 1.5G");
}

}  // namespace

StatusOr<uint64_t> ParseByteSize(std::string_view text) {
  size_t i = 0;
  bool digits = false, dot = false;
  while (i < text.size() && (isdigit(static_cast<unsigned char>(text[i])) || (text[i] == '.' && !dot))) {
    if (text[i] == '.') dot = true; else digits = true;
    ++i;
  }
  if (!digits) return Bad(text, "it does not start with a number");
  const std::string number(text.substr(0, i));
  std::string unit;
  for (char c : text.substr(i)) unit += static_cast<char>(tolower(static_cast<unsigned char>(c)));
  for (const Unit& u : kUnits) {
    if (unit != u.name) continue;
    const double value = std::strtod(number.c_str(), nullptr) * u.factor;
    if (!std::isfinite(value) || value >= 1.8e19) return Bad(text, "it is too large");
    const double rounded = std::floor(value);
    if (rounded != value) return Bad(text, "it is not a whole number of bytes");
    if (rounded == 0) return Bad(text, "it is zero");
    return static_cast<uint64_t>(rounded);
  }
  return Bad(text, "the unit is not one of B, KiB, MiB, GiB, TiB, KB, MB, GB, TB");
}

std::string FormatByteSize(uint64_t bytes) {
  static const char* const kNames[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  double v = static_cast<double>(bytes);
  int u = 0;
  while (v >= 1024.0 && u < 5) {
    v /= 1024.0;
    ++u;
  }
  char buf[32];
  if (v == std::floor(v)) snprintf(buf, sizeof buf, "%.0f %s", v, kNames[u]);
  else snprintf(buf, sizeof buf, "%.2f %s", v, kNames[u]);
  return buf;
}

}  // namespace gpuslice::core
