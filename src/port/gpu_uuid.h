// gpu_uuid.h — a GPU's UUID as text ("GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx",
// NVML's and nvidia-smi's spelling) to its 16 bytes (what cuDeviceGetUuid
// gives and core/vgpu_layout.h stores).
//
// Used by the CLI, daemon and k8s code (through nvml_library.h) and by the
// interposer's NVML hooks. Pure: thread-safe, no allocation, no syscall.
#ifndef GPUSLICE_PORT_GPU_UUID_H_
#define GPUSLICE_PORT_GPU_UUID_H_

#include <array>
#include <cstdint>
#include <string_view>

namespace gpuslice::port {

// Exactly 32 hex digits (either case), dashes anywhere, after an optional
// "GPU-". Returns false, leaving `out` in an unspecified state, otherwise.
bool ParseGpuUuid(std::string_view text, uint8_t out[16]);
inline bool ParseGpuUuid(std::string_view text, std::array<uint8_t, 16>* out) {
  return ParseGpuUuid(text, out->data());
}

}  // namespace gpuslice::port

#endif  // GPUSLICE_PORT_GPU_UUID_H_
