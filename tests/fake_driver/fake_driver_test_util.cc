#include "fake_driver_test_util.h"

#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>
#include <string>

namespace fake_driver_test {
namespace {

void* Load(const char* path) {
  // Both fakes read the environment once, at their first call: set it before.
  static const bool configured = [] {
    setenv("FAKE_GPU_COUNT", std::to_string(kTestGpus).c_str(), 1);
    setenv("FAKE_GPU_MEMORY", std::to_string(kTestGpuMemory).c_str(), 1);
    setenv("FAKE_POOL_CHUNK", std::to_string(kChunk).c_str(), 1);
    unsetenv("FAKE_GPU_NAME");
    unsetenv("FAKE_GPU_NVLINK");
    return true;
  }();
  (void)configured;
  void* handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    std::fprintf(stderr, "dlopen(%s) failed: %s\n", path, dlerror());
    std::abort();
  }
  return handle;
}

}  // namespace

void* CudaHandle() {
  static void* handle = Load(FAKE_CUDA_PATH);
  return handle;
}

void* NvmlHandle() {
  static void* handle = Load(FAKE_NVML_PATH);
  return handle;
}

void* Symbol(void* handle, const char* name) {
  void* address = dlsym(handle, name);
  if (address == nullptr) {
    std::fprintf(stderr, "the fake does not export %s\n", name);
    std::abort();
  }
  return address;
}

uint64_t PhysicalUsed(int device) {
  return Fn<decltype(fake_cuda_physical_used)>(CudaHandle(), "fake_cuda_physical_used")(device);
}

uint64_t CallCount(const char* symbol) {
  return Fn<decltype(fake_cuda_call_count)>(CudaHandle(), "fake_cuda_call_count")(symbol);
}

uint64_t LaunchCount() {
  return Fn<decltype(fake_cuda_launch_count)>(CudaHandle(), "fake_cuda_launch_count")();
}

void FakeCudaTest::SetUp() {
  ASSERT_EQ(CU(cuInit)(0), CUDA_SUCCESS);
  for (int d = 0; d < kTestGpus; ++d) baseline_[d] = PhysicalUsed(d);
  UseDevice(0);
}

void FakeCudaTest::TearDown() {
  UseDevice(0);
  EXPECT_EQ(CU(cuCtxSynchronize)(), CUDA_SUCCESS);
  for (int d = 0; d < kTestGpus; ++d) {
    EXPECT_EQ(CU(cuDeviceGraphMemTrim)(d), CUDA_SUCCESS);
    EXPECT_EQ(PhysicalUsed(d), baseline_[d]) << "device " << d << " leaked memory";
  }
}

void FakeCudaTest::UseDevice(int device) {
  CUcontext ctx = nullptr;
  ASSERT_EQ(CU(cuDevicePrimaryCtxRetain)(&ctx, device), CUDA_SUCCESS);
  ASSERT_EQ(CU(cuCtxSetCurrent)(ctx), CUDA_SUCCESS);
}

}  // namespace fake_driver_test
