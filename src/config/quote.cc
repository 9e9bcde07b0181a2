#include "config/quote.h"

namespace gpuslice::config {
namespace {

void Escape(std::string_view value, size_t max_shown, bool escape_quotes, std::string& out) {
  for (size_t i = 0; i < value.size() && i < max_shown; ++i) {
    const unsigned char c = static_cast<unsigned char>(value[i]);
    if (c == '\n') {
      out += "\\n";
    } else if (c == '\t') {
      out += "\\t";
    } else if (escape_quotes && (c == '"' || c == '\\')) {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c < 0x20 || c == 0x7f) {
      constexpr char kHex[] = "0123456789abcdef";
      out += "\\x";
      out += kHex[c >> 4];
      out += kHex[c & 15];
    } else {
      out += static_cast<char>(c);
    }
  }
  if (value.size() > max_shown) out += "...";
}

}  // namespace

std::string Quote(std::string_view value) {
  std::string out = "\"";
  Escape(value, 64, /*escape_quotes=*/true, out);
  return out + "\"";
}

std::string OneLine(std::string_view text) {
  std::string out;
  Escape(text, 200, /*escape_quotes=*/false, out);
  return out;
}

}  // namespace gpuslice::config
