// lc_latency_recorder — a test helper that records LC request latencies in a
// vGPU's ledger through core::RecordLcLatency, as the library does at each
// gpuslice_span_end(), so that the daemon's views and metrics are tested with
// exact, known latencies and no CUDA application.
//
//   lc_latency_recorder VGPU_DIR COUNTxNANOSECONDS...
//   lc_latency_recorder /run/gpuslice/vgpus/lat 990x80000 10x6000000
//
// Exits 0 when every request was recorded, 2 with a one-line reason if the
// arguments or the vGPU are bad.
#include <cstdio>
#include <cstdlib>
#include <string>

#include "core/lc_latency.h"
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
    uint64_t count = 0;
    uint64_t ns = 0;
    if (!ParseCount(argv[i], &count, &ns)) {
      std::fprintf(stderr, "lc_latency_recorder: '%s' is not COUNTxNANOSECONDS (like 990x80000)\n", argv[i]);
      return 2;
    }
    for (uint64_t n = 0; n < count; ++n) gpuslice::core::RecordLcLatency(&handle->ledger(), ns);
  }
  return 0;
}
