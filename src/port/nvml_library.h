// nvml_library.h — the node's GPUs, as NVML reports them.
//
// Loads libnvidia-ml.so.1 with dlopen (by absolute path: see
// driver_locator.h) and reads each GPU's index, UUID, name and memory. NVML's
// index order is PCI bus order, the order nvidia-smi shows.
//
// Used by the CLI and the daemon, never by the interposer. Not thread-safe;
// construct one per thread. Blocks in NVML (tens of milliseconds at init).
#ifndef GPUSLICE_PORT_NVML_LIBRARY_H_
#define GPUSLICE_PORT_NVML_LIBRARY_H_

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/status.h"

namespace gpuslice::port {

struct GpuInfo {
  uint32_t index = 0;
  std::array<uint8_t, 16> uuid{};
  std::string uuid_text;  // "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx"
  std::string name;
  uint64_t memory_total_bytes = 0;
};

class NvmlLibrary {
 public:
  // Opens and initialises NVML. The error names the fix.
  static StatusOr<std::unique_ptr<NvmlLibrary>> Open();
  ~NvmlLibrary();

  StatusOr<std::vector<GpuInfo>> ListGpus();

 private:
  NvmlLibrary() = default;
  void* handle_ = nullptr;
  std::string path_;
};

// "GPU-..." (or bare hex with dashes) to 16 bytes.
bool ParseGpuUuid(const std::string& text, std::array<uint8_t, 16>* out);

}  // namespace gpuslice::port

#endif  // GPUSLICE_PORT_NVML_LIBRARY_H_
