#include "fake_gpus.h"

#include <cstdio>
#include <cstdlib>
#include <optional>

namespace fake_gpus {
namespace {

// Strict decimal parse: the whole string must be digits and fit in 64 bits.
// A typo in a test's environment should fall back visibly to the default,
// not silently become a prefix of what was meant.
std::optional<uint64_t> ParseUnsigned(const char* text) {
  if (text == nullptr || *text == '\0') return std::nullopt;
  uint64_t value = 0;
  for (const char* p = text; *p != '\0'; ++p) {
    if (*p < '0' || *p > '9') return std::nullopt;
    const uint64_t digit = static_cast<uint64_t>(*p - '0');
    if (value > (UINT64_MAX - digit) / 10) return std::nullopt;
    value = value * 10 + digit;
  }
  return value;
}

}  // namespace

Config ParseConfig(const char* count, const char* memory, const char* name, const char* nvlink,
                   const char* pool_chunk) {
  Config config;
  if (auto n = ParseUnsigned(count)) {
    config.count = *n > kMaxGpus ? kMaxGpus : static_cast<int>(*n);
  }
  if (auto bytes = ParseUnsigned(memory); bytes && *bytes > 0) {
    config.memory_bytes = *bytes;
  }
  if (name != nullptr && *name != '\0') config.name = name;
  config.nvlink = nvlink != nullptr && std::string(nvlink) == "1";
  if (auto chunk = ParseUnsigned(pool_chunk); chunk && *chunk > 0) {
    config.pool_chunk_bytes = *chunk;
  }
  return config;
}

const Config& GetFakeGpuConfig() {
  // Built on first use, never destroyed: the fakes may be called from other
  // libraries' destructors at exit.
  static const Config* config = new Config(ParseConfig(
      std::getenv("FAKE_GPU_COUNT"), std::getenv("FAKE_GPU_MEMORY"), std::getenv("FAKE_GPU_NAME"),
      std::getenv("FAKE_GPU_NVLINK"), std::getenv("FAKE_POOL_CHUNK")));
  return *config;
}

std::array<uint8_t, 16> Uuid(int index) {
  std::array<uint8_t, 16> uuid{};
  uuid[0] = 0xfa;
  uuid[1] = 0xce;
  uuid[15] = static_cast<uint8_t>(index);
  return uuid;
}

std::string UuidString(int index) {
  const std::array<uint8_t, 16> b = Uuid(index);
  char text[64];
  std::snprintf(text, sizeof(text),
                "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-"
                "%02x%02x%02x%02x%02x%02x",
                b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12],
                b[13], b[14], b[15]);
  return text;
}

std::string NvmlPciBusId(int index) {
  char text[32];
  std::snprintf(text, sizeof(text), "00000000:%02x:00.0", index & 0xff);
  return text;
}

std::string CudaPciBusId(int index) {
  char text[32];
  std::snprintf(text, sizeof(text), "0000:%02x:00.0", index & 0xff);
  return text;
}

}  // namespace fake_gpus
