#include "port/log.h"

#include <unistd.h>

#include <atomic>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace gpuslice::port {
namespace {

int ParseLevel() {
  const char* v = getenv("GPUSLICE_LOG");
  if (v == nullptr) return static_cast<int>(LogLevel::kWarn);
  if (strcmp(v, "error") == 0) return 0;
  if (strcmp(v, "warn") == 0) return 1;
  if (strcmp(v, "info") == 0) return 2;
  if (strcmp(v, "debug") == 0) return 3;
  return static_cast<int>(LogLevel::kWarn);
}

int Level() {
  static std::atomic<int> level{-1};
  int l = level.load(std::memory_order_relaxed);
  if (l < 0) {
    l = ParseLevel();
    level.store(l, std::memory_order_relaxed);
  }
  return l;
}

}  // namespace

bool LogEnabled(LogLevel level) { return static_cast<int>(level) <= Level(); }

void Log(LogLevel level, const char* format, ...) {
  if (!LogEnabled(level)) return;
  static const char* const kNames[] = {"error", "warn", "info", "debug"};
  char line[512];
  int n = snprintf(line, sizeof line, "gpuslice[%d] %s: ", static_cast<int>(getpid()),
                   kNames[static_cast<int>(level)]);
  va_list args;
  va_start(args, format);
  const int m = vsnprintf(line + n, sizeof line - static_cast<size_t>(n) - 1, format, args);
  va_end(args);
  n += m < 0 ? 0 : m;
  if (n > static_cast<int>(sizeof line) - 2) n = sizeof line - 2;
  line[n++] = '\n';
  ssize_t ignored = write(STDERR_FILENO, line, static_cast<size_t>(n));
  (void)ignored;
}

}  // namespace gpuslice::port
