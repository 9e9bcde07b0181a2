#include "port/gpu_uuid.h"

namespace gpuslice::port {
namespace {

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace

bool ParseGpuUuid(std::string_view text, uint8_t out[16]) {
  if (text.substr(0, 4) == "GPU-") text.remove_prefix(4);
  int n = 0;
  for (char c : text) {
    if (c == '-') continue;
    const int v = HexValue(c);
    if (v < 0 || n >= 32) return false;
    if (n % 2 == 0) out[n / 2] = static_cast<uint8_t>(v << 4);
    else out[n / 2] |= static_cast<uint8_t>(v);
    ++n;
  }
  return n == 32;
}

}  // namespace gpuslice::port
