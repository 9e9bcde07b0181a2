// fake_driver_test_util.h — loads the fake CUDA driver and fake NVML the way
// gpuslice does (dlopen by absolute path) and calls them through dlsym, with
// each call's type taken from cuda.h (or fake_nvml_types.h).
//
// The first load sets the FAKE_* environment the tests assume: 2 GPUs of
// 1 GiB each, the default 32 MiB pool chunk. Test-only; not thread-safe
// before the first load.
#ifndef GPUSLICE_TESTS_FAKE_DRIVER_FAKE_DRIVER_TEST_UTIL_H_
#define GPUSLICE_TESTS_FAKE_DRIVER_FAKE_DRIVER_TEST_UTIL_H_

#include <cuda.h>
#include <gtest/gtest.h>

#include <cstdint>

#include "fake_cuda_api.h"
#include "fake_nvml_types.h"

namespace fake_driver_test {

inline constexpr int kTestGpus = 2;
inline constexpr uint64_t kTestGpuMemory = uint64_t{1} << 30;
inline constexpr uint64_t kMiB = uint64_t{1} << 20;
inline constexpr uint64_t kChunk = 32 * kMiB;

void* CudaHandle();
void* NvmlHandle();

// The address of `name` in `handle`; aborts the test binary when missing, as
// every later check would be meaningless.
void* Symbol(void* handle, const char* name);

template <typename F>
F* Fn(void* handle, const char* name) {
  return reinterpret_cast<F*>(Symbol(handle, name));
}

// Test API of the fake driver (fake_cuda_api.h).
uint64_t PhysicalUsed(int device);
uint64_t CallCount(const char* symbol);
uint64_t LaunchCount();

// A test with the driver initialised and device 0's primary context current.
// TearDown synchronises (releasing pool memory), trims graph memory, and
// checks that the test gave back every byte it took from each fake GPU.
class FakeCudaTest : public ::testing::Test {
 protected:
  void SetUp() override;
  void TearDown() override;
  // Makes `device`'s primary context current on this thread.
  void UseDevice(int device);

 private:
  uint64_t baseline_[kTestGpus] = {};
};

}  // namespace fake_driver_test

// Calls driver entry point `name` (its exported name) of the fake driver,
// typed by its cuda.h prototype: CU(cuMemAlloc_v2)(&ptr, size).
#define CU(name) (::fake_driver_test::Fn<decltype(::name)>(::fake_driver_test::CudaHandle(), #name))
#define NVML(name) \
  (::fake_driver_test::Fn<decltype(::name)>(::fake_driver_test::NvmlHandle(), #name))

#endif  // GPUSLICE_TESTS_FAKE_DRIVER_FAKE_DRIVER_TEST_UTIL_H_
