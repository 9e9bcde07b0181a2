#include "physical.h"

#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include <array>
#include <string>

#include "fake_gpus.h"

namespace fake_cuda {
namespace {

constexpr CUdeviceptr kDeviceBase = 0x7000'0000'0000ull;
constexpr CUdeviceptr kDeviceStride = 1ull << 40;
constexpr CUdeviceptr kUnifiedBase = 0x6000'0000'0000ull;

struct Device {
  uint64_t used = 0;
  CUdeviceptr next = 0;  // 0: not yet started
};

std::array<Device, fake_gpus::kMaxGpus>& Devices(const Locked&) {
  static auto* devices = new std::array<Device, fake_gpus::kMaxGpus>;
  return *devices;
}

CUdeviceptr Bump(CUdeviceptr& next, uint64_t bytes, uint64_t alignment) {
  const CUdeviceptr base = RoundUp(next, alignment);
  // Leave a gap after each range so that an off-by-one pointer never lands
  // in the next allocation.
  next = base + RoundUp(bytes == 0 ? 1 : bytes, 512) + 512;
  return base;
}

// With FAKE_GPU_PROCESS_DIR set, what this process holds on each device is
// kept in DIR/<pid> ("index bytes" lines), where the fake NVML reads every
// process's memory as nvmlDeviceGetComputeRunningProcesses does a real
// GPU's. Rewritten whole at each change (a rename, so readers never see half).
void Publish(const Locked& locked) {
  const char* dir = getenv("FAKE_GPU_PROCESS_DIR");
  if (dir == nullptr || *dir == '\0') return;
  const std::string path = std::string(dir) + "/" + std::to_string(getpid());
  const std::string tmp = path + ".tmp";
  FILE* f = fopen(tmp.c_str(), "w");
  if (f == nullptr) return;
  for (int i = 0; i < DeviceCount(); ++i) {
    fprintf(f, "%d %llu\n", i, static_cast<unsigned long long>(Devices(locked)[i].used));
  }
  fclose(f);
  rename(tmp.c_str(), path.c_str());
}

}  // namespace

int DeviceCount() { return fake_gpus::GetFakeGpuConfig().count; }

bool ValidDevice(int device) { return device >= 0 && device < DeviceCount(); }

uint64_t DeviceCapacity(int device) {
  return ValidDevice(device) ? fake_gpus::GetFakeGpuConfig().memory_bytes : 0;
}

bool TakePhysical(const Locked& locked, int device, uint64_t bytes) {
  if (!ValidDevice(device)) return false;
  Device& d = Devices(locked)[device];
  uint64_t held = d.used;
  if (fake_gpus::SharedCapacity()) {
    // Other processes' usage as they last published it: two racing
    // allocations may both fit; tests that share capacity allocate in turn.
    const uint64_t others = fake_gpus::PublishedUsed(device, static_cast<unsigned long>(getpid()));
    held = others > DeviceCapacity(device) - d.used ? DeviceCapacity(device) : d.used + others;
  }
  if (bytes > DeviceCapacity(device) - held) return false;
  d.used += bytes;
  Publish(locked);
  return true;
}

void ReturnPhysical(const Locked& locked, int device, uint64_t bytes) {
  if (!ValidDevice(device)) return;
  Device& d = Devices(locked)[device];
  d.used = bytes > d.used ? 0 : d.used - bytes;
  Publish(locked);
}

uint64_t PhysicalUsed(const Locked& locked, int device) {
  return ValidDevice(device) ? Devices(locked)[device].used : 0;
}

CUdeviceptr NewDeviceAddress(const Locked& locked, int device, uint64_t bytes, uint64_t alignment) {
  Device& d = Devices(locked)[device];
  if (d.next == 0) d.next = kDeviceBase + static_cast<uint64_t>(device) * kDeviceStride;
  return Bump(d.next, bytes, alignment);
}

CUdeviceptr NewUnifiedAddress(const Locked&, uint64_t bytes, uint64_t alignment) {
  static CUdeviceptr next = kUnifiedBase;  // guarded by the Locked argument
  return Bump(next, bytes, alignment);
}

}  // namespace fake_cuda
