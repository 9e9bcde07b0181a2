// fake_gpus.h — the fake GPUs that the fake CUDA driver and the fake NVML
// both describe, so that the two agree on count, memory, names and UUIDs.
//
// Configured by environment variables, read once on first use:
//   FAKE_GPU_COUNT   number of GPUs, 0..16 (default 1; larger values are
//                    clamped to 16, unparsable ones give the default)
//   FAKE_GPU_MEMORY  bytes of memory per GPU, a plain decimal integer
//                    (default 80 GiB = 85899345920)
//   FAKE_GPU_NAME    device name (default "Fake H100")
//   FAKE_GPU_NVLINK  "1": the GPUs are NVLink-connected (NVML only)
//   FAKE_POOL_CHUNK  growth step of stream-ordered memory pools, bytes
//                    (default 32 MiB; CUDA only)
//   FAKE_GPU_SHARED_CAPACITY  "1", with FAKE_GPU_PROCESS_DIR: the processes
//                    share each GPU's memory, as on a real GPU. An allocation
//                    fails when what every live process publishes there
//                    (physical.h) plus it would pass the capacity, and the
//                    fake NVML reports that sum as used. Unset: each process
//                    has a whole GPU of its own (the default, which most
//                    tests want: they run many processes of one vGPU).
//
// Thread-safe. GetFakeGpuConfig() allocates once, on its first call; the
// other functions are pure.
#ifndef GPUSLICE_TESTS_FAKE_DRIVER_FAKE_GPUS_H_
#define GPUSLICE_TESTS_FAKE_DRIVER_FAKE_GPUS_H_

#include <array>
#include <cstdint>
#include <functional>
#include <string>

namespace fake_gpus {

inline constexpr int kMaxGpus = 16;
inline constexpr uint64_t kDefaultMemoryBytes = uint64_t{80} << 30;
inline constexpr uint64_t kDefaultPoolChunkBytes = uint64_t{32} << 20;

struct Config {
  int count = 1;
  uint64_t memory_bytes = kDefaultMemoryBytes;
  std::string name = "Fake H100";
  bool nvlink = false;
  uint64_t pool_chunk_bytes = kDefaultPoolChunkBytes;
};

// Builds a Config from the variables' values (nullptr: unset). Separate from
// the environment so that tests can check the parsing rules directly.
Config ParseConfig(const char* count, const char* memory, const char* name, const char* nvlink,
                   const char* pool_chunk);

// The process's configuration, from the environment at the first call.
const Config& GetFakeGpuConfig();

// GPU i's UUID: {0xfa, 0xce, 0, ..., 0, i}. Deterministic, so that a test can
// name a GPU by UUID without asking either fake.
std::array<uint8_t, 16> Uuid(int index);

// "GPU-face0000-0000-0000-0000-0000000000ii": NVML's text form of Uuid(i).
std::string UuidString(int index);

// PCI address of GPU i: domain 0, bus i, device 0, function 0. NVML spells
// the domain with 8 hex digits, CUDA with 4.
std::string NvmlPciBusId(int index);  // "00000000:0i:00.0"
std::string CudaPciBusId(int index);  // "0000:0i:00.0"

// FAKE_GPU_SHARED_CAPACITY is on (and FAKE_GPU_PROCESS_DIR set).
bool SharedCapacity();
// Calls `each(pid, bytes)` for every live process that publishes in
// FAKE_GPU_PROCESS_DIR what it holds on GPU `index` (physical.h). Reads the
// directory: slow, for allocations and NVML queries only.
void ForEachPublished(int index, const std::function<void(unsigned long pid, uint64_t bytes)>& each);
// Their sum, without process `except_pid` (0: none left out).
uint64_t PublishedUsed(int index, unsigned long except_pid);

}  // namespace fake_gpus

#endif  // GPUSLICE_TESTS_FAKE_DRIVER_FAKE_GPUS_H_
