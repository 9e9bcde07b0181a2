#include "k8s/dra/quantity.h"

#include <limits>
#include <utility>

namespace gpuslice::k8s::dra {
namespace {

struct Suffix {
  const char* text;
  uint64_t multiplier;
};

constexpr Suffix kSuffixes[] = {
    {"Ki", 1ull << 10},         {"Mi", 1ull << 20},         {"Gi", 1ull << 30},     {"Ti", 1ull << 40},
    {"Pi", 1ull << 50},         {"Ei", 1ull << 60},         {"k", 1000ull},         {"M", 1000ull * 1000},
    {"G", 1000ull * 1000 * 1000}, {"T", 1000ull * 1000 * 1000 * 1000},
    {"P", 1000ull * 1000 * 1000 * 1000 * 1000}, {"E", 1000ull * 1000 * 1000 * 1000 * 1000 * 1000},
};

}  // namespace

StatusOr<uint64_t> ParseWholeQuantity(std::string_view text, const std::string& field) {
  auto bad = [&](const std::string& why) {
    return Status::Error(field + ": \"" + std::string(text) + "\" " + why +
                         "; write a whole number with an optional suffix (Ki, Mi, Gi, k, M, G), e.g. 4Gi or 30");
  };
  size_t digits = 0;
  while (digits < text.size() && text[digits] >= '0' && text[digits] <= '9') ++digits;
  if (digits == 0) return bad("does not start with digits");
  uint64_t value = 0;
  for (size_t i = 0; i < digits; ++i) {
    const uint64_t d = static_cast<uint64_t>(text[i] - '0');
    if (value > (std::numeric_limits<uint64_t>::max() - d) / 10) return bad("is too large");
    value = value * 10 + d;
  }
  const std::string_view suffix = text.substr(digits);
  if (suffix.empty()) return value;
  if (suffix == "m") {
    if (value % 1000 != 0) return bad("is not a whole number");
    return value / 1000;
  }
  for (const Suffix& s : kSuffixes) {
    if (suffix == s.text) {
      if (value != 0 && value > std::numeric_limits<uint64_t>::max() / s.multiplier) return bad("is too large");
      return value * s.multiplier;
    }
  }
  return bad("has an unknown suffix \"" + std::string(suffix) + "\"");
}

std::string FormatQuantity(uint64_t value) {
  static constexpr std::pair<const char*, int> kBinary[] = {{"Ei", 60}, {"Pi", 50}, {"Ti", 40}, {"Gi", 30},
                                                            {"Mi", 20}, {"Ki", 10}};
  if (value == 0) return "0";
  for (const auto& [suffix, shift] : kBinary) {
    if (value % (1ull << shift) == 0) return std::to_string(value >> shift) + suffix;
  }
  return std::to_string(value);
}

}  // namespace gpuslice::k8s::dra
