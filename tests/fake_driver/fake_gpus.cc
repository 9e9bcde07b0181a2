#include "fake_gpus.h"

#include <dirent.h>
#include <errno.h>
#include <signal.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
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

bool SharedCapacity() {
  const char* on = std::getenv("FAKE_GPU_SHARED_CAPACITY");
  const char* dir = std::getenv("FAKE_GPU_PROCESS_DIR");
  return on != nullptr && std::strcmp(on, "1") == 0 && dir != nullptr && *dir != '\0';
}

void ForEachPublished(int index, const std::function<void(unsigned long pid, uint64_t bytes)>& each) {
  const char* dir = std::getenv("FAKE_GPU_PROCESS_DIR");
  DIR* d = dir != nullptr ? opendir(dir) : nullptr;
  while (dirent* e = d != nullptr ? readdir(d) : nullptr) {
    char* end = nullptr;
    const unsigned long pid = std::strtoul(e->d_name, &end, 10);
    if (end == e->d_name || *end != '\0' || (kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH)) continue;
    FILE* f = std::fopen((std::string(dir) + "/" + e->d_name).c_str(), "r");
    if (f == nullptr) continue;
    int gpu = 0;
    unsigned long long used = 0;
    while (std::fscanf(f, "%d %llu", &gpu, &used) == 2) {
      if (gpu == index) each(pid, used);
    }
    std::fclose(f);
  }
  if (d != nullptr) closedir(d);
}

uint64_t PublishedUsed(int index, unsigned long except_pid) {
  uint64_t sum = 0;
  ForEachPublished(index, [&](unsigned long pid, uint64_t bytes) {
    if (pid != except_pid) sum += bytes;
  });
  return sum;
}

}  // namespace fake_gpus
