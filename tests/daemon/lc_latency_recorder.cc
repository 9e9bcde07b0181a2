// lc_latency_recorder — a test helper that records LC request latencies in a
// vGPU's ledger through core::RecordLcLatency, as the library does at each
// gpuslice_span_end(), and task API tasks through core::RecordTask, as
// gpuslice_task_record() does, so that the daemon's views and metrics are
// tested with exact, known latencies and no CUDA application.
//
//   lc_latency_recorder VGPU_DIR [LEVEL[+FLAGS]:]COUNTxNANOSECONDS...
//   lc_latency_recorder /run/gpuslice/vgpus/lat 990x80000 10x6000000
//   lc_latency_recorder /run/gpuslice/vgpus/lat high:4x300000 high+2:1x9000000
//
// With a LEVEL, the requests are tasks of that level; FLAGS are
// core::kTaskFailed (1) and kTaskSloMiss (2), added.
//
// Exits 0 when every request was recorded, 2 with a one-line reason if the
// arguments or the vGPU are bad.
#include <cstdio>
#include <cstdlib>
#include <string>

#include "core/lc_latency.h"
#include "core/task_metrics.h"
#include "core/vgpu_store.h"

namespace {

bool ParseCount(const std::string& text, uint64_t* count, uint64_t* ns) {
  const size_t x = text.find('x');
  if (x == std::string::npos || x == 0 || x + 1 == text.size()) return false;
  char* end = nullptr;
  *count = std::strtoull(text.c_str(), &end, 10);
  if (end != text.c_str() + x) return false;
  *ns = std::strtoull(text.c_str() + x + 1, &end, 10);
  return *end == '\0';
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s VGPU_DIR COUNTxNANOSECONDS...\n", argv[0]);
    return 2;
  }
  auto handle = gpuslice::core::VgpuHandle::Open(argv[1], gpuslice::port::MappedFile::Access::kReadOnly);
  if (!handle.ok()) {
    std::fprintf(stderr, "lc_latency_recorder: %s\n", handle.status().message().c_str());
    return 2;
  }
  for (int i = 2; i < argc; ++i) {
    std::string arg = argv[i];
    std::string level;
    uint32_t flags = 0;
    if (const size_t colon = arg.find(':'); colon != std::string::npos) {
      level = arg.substr(0, colon);
      arg = arg.substr(colon + 1);
      if (const size_t plus = level.find('+'); plus != std::string::npos) {
        flags = static_cast<uint32_t>(std::strtoul(level.c_str() + plus + 1, nullptr, 10));
        level.resize(plus);
      }
    }
    uint64_t count = 0;
    uint64_t ns = 0;
    if (!ParseCount(arg, &count, &ns)) {
      std::fprintf(stderr, "lc_latency_recorder: '%s' is not [LEVEL[+FLAGS]:]COUNTxNANOSECONDS (like 990x80000)\n",
                   argv[i]);
      return 2;
    }
    for (uint64_t n = 0; n < count; ++n) {
      if (level.empty()) {
        gpuslice::core::RecordLcLatency(&handle->ledger(), ns);
      } else if (!gpuslice::core::RecordTask(&handle->ledger(), level, ns, flags)) {
        std::fprintf(stderr, "lc_latency_recorder: '%s' is no level name\n", level.c_str());
        return 2;
      }
    }
  }
  return 0;
}
