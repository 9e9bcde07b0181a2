// Tests of the fake CUDA driver's surface: exports, initialisation, devices,
// contexts, errors, cuGetProcAddress, call counting, and the shared
// FAKE_GPU_* configuration.
#include <dlfcn.h>

#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "fake_driver_test_util.h"
#include "fake_gpus.h"

namespace fake_driver_test {
namespace {

const std::vector<std::string>& DriverSymbols() {
  static const auto* names = new std::vector<std::string>{
#define GPUSLICE_DRIVER_SYMBOL(name) #name,
#include "driver_symbols.inc"
#undef GPUSLICE_DRIVER_SYMBOL
  };
  return *names;
}

TEST(FakeCudaExports, EveryDriverSymbolIsExported) {
  ASSERT_GT(DriverSymbols().size(), 300u);
  for (const std::string& name : DriverSymbols()) {
    EXPECT_NE(dlsym(CudaHandle(), name.c_str()), nullptr) << name;
  }
}

TEST(FakeCudaExports, InternalsAreNotExported) {
  EXPECT_EQ(dlsym(CudaHandle(), "_ZN9fake_gpus16GetFakeGpuConfigEv"), nullptr);
  EXPECT_EQ(dlsym(CudaHandle(),
                  "_ZN9fake_cuda15EntryPointIndexESt17basic_string_viewIcSt11char_traitsIcEE"),
            nullptr);
  EXPECT_NE(dlsym(CudaHandle(), "fake_cuda_physical_used"), nullptr);
}

TEST(FakeCudaExports, UnimplementedEntryPointsAreCountedStubs) {
  // cuMemcpyHtoD_v2 is one the fake leaves to the generated stubs.
  const uint64_t before = CallCount("cuMemcpyHtoD_v2");
  const char byte = 0;
  EXPECT_EQ(CU(cuMemcpyHtoD_v2)(0, &byte, 1), CUDA_ERROR_NOT_SUPPORTED);
  EXPECT_EQ(CallCount("cuMemcpyHtoD_v2"), before + 1);
}

// Run in a fresh process (the threadsafe death-test style re-executes the
// binary): there the fake has not been loaded or initialised yet.
int CallsBeforeCuInitChild() {
  int count = 0, version = 0;
  CUdeviceptr ptr = 0;
  const bool ok = CU(cuDeviceGetCount)(&count) == CUDA_ERROR_NOT_INITIALIZED &&
                  CU(cuMemAlloc_v2)(&ptr, 512) == CUDA_ERROR_NOT_INITIALIZED &&
                  CallCount("cuMemAlloc_v2") == 1 &&
                  CU(cuDriverGetVersion)(&version) == CUDA_SUCCESS && version == 13000 &&
                  CU(cuInit)(1) == CUDA_ERROR_INVALID_VALUE && CU(cuInit)(0) == CUDA_SUCCESS &&
                  CU(cuDeviceGetCount)(&count) == CUDA_SUCCESS && count == kTestGpus;
  return ok ? 0 : 1;
}

int NoGpusChild() {
  setenv("FAKE_GPU_COUNT", "0", 1);
  void* handle = dlopen(FAKE_CUDA_PATH, RTLD_NOW | RTLD_LOCAL);
  return Fn<decltype(cuInit)>(handle, "cuInit")(0) == CUDA_ERROR_NO_DEVICE ? 0 : 1;
}

TEST(FakeCudaInitDeathTest, CallsBeforeCuInitFail) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(std::exit(CallsBeforeCuInitChild()), ::testing::ExitedWithCode(0), "");
}

TEST(FakeCudaInitDeathTest, NoGpusMeansNoDevice) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(std::exit(NoGpusChild()), ::testing::ExitedWithCode(0), "");
}

class FakeCudaDeviceTest : public FakeCudaTest {};

TEST_F(FakeCudaDeviceTest, DescribesTheConfiguredGpus) {
  int count = 0;
  ASSERT_EQ(CU(cuDeviceGetCount)(&count), CUDA_SUCCESS);
  EXPECT_EQ(count, kTestGpus);
  CUdevice dev = -1;
  EXPECT_EQ(CU(cuDeviceGet)(&dev, 1), CUDA_SUCCESS);
  EXPECT_EQ(dev, 1);
  EXPECT_EQ(CU(cuDeviceGet)(&dev, kTestGpus), CUDA_ERROR_INVALID_DEVICE);

  char name[64];
  ASSERT_EQ(CU(cuDeviceGetName)(name, sizeof(name), 0), CUDA_SUCCESS);
  EXPECT_STREQ(name, "Fake H100");
  ASSERT_EQ(CU(cuDeviceGetName)(name, 5, 0), CUDA_SUCCESS);
  EXPECT_STREQ(name, "Fake");

  size_t total = 0;
  ASSERT_EQ(CU(cuDeviceTotalMem_v2)(&total, 1), CUDA_SUCCESS);
  EXPECT_EQ(total, kTestGpuMemory);

  CUuuid uuid;
  ASSERT_EQ(CU(cuDeviceGetUuid_v2)(&uuid, 1), CUDA_SUCCESS);
  const unsigned char expected[16] = {0xfa, 0xce, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
  EXPECT_EQ(std::memcmp(uuid.bytes, expected, 16), 0);
  CUuuid legacy;
  ASSERT_EQ(CU(cuDeviceGetUuid)(&legacy, 1), CUDA_SUCCESS);
  EXPECT_EQ(std::memcmp(legacy.bytes, expected, 16), 0);
}

TEST_F(FakeCudaDeviceTest, AttributesAreThoseOfAnH100) {
  auto attribute = [](CUdevice_attribute a, CUdevice dev = 0) {
    int value = -1;
    EXPECT_EQ(CU(cuDeviceGetAttribute)(&value, a, dev), CUDA_SUCCESS);
    return value;
  };
  EXPECT_EQ(attribute(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT), 132);
  EXPECT_EQ(attribute(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR), 9);
  EXPECT_EQ(attribute(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR), 0);
  EXPECT_EQ(attribute(CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING), 1);
  EXPECT_EQ(attribute(CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED), 1);
  EXPECT_EQ(attribute(CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED), 1);
  EXPECT_EQ(attribute(CU_DEVICE_ATTRIBUTE_TCC_DRIVER), 0);
  EXPECT_EQ(attribute(CU_DEVICE_ATTRIBUTE_PCI_BUS_ID, 1), 1);
  int value = 0;
  EXPECT_EQ(CU(cuDeviceGetAttribute)(&value, CU_DEVICE_ATTRIBUTE_MAX, 0), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(CU(cuDeviceGetAttribute)(&value, CU_DEVICE_ATTRIBUTE_WARP_SIZE, 7),
            CUDA_ERROR_INVALID_DEVICE);
}

TEST_F(FakeCudaDeviceTest, PciBusIdsRoundTrip) {
  char bus_id[32];
  ASSERT_EQ(CU(cuDeviceGetPCIBusId)(bus_id, sizeof(bus_id), 1), CUDA_SUCCESS);
  EXPECT_STREQ(bus_id, "0000:01:00.0");
  CUdevice dev = -1;
  EXPECT_EQ(CU(cuDeviceGetByPCIBusId)(&dev, bus_id), CUDA_SUCCESS);
  EXPECT_EQ(dev, 1);
  EXPECT_EQ(CU(cuDeviceGetByPCIBusId)(&dev, "00000000:00:00.0"), CUDA_SUCCESS);  // NVML's form
  EXPECT_EQ(dev, 0);
  EXPECT_EQ(CU(cuDeviceGetByPCIBusId)(&dev, "0000:09:00.0"), CUDA_ERROR_INVALID_DEVICE);
  EXPECT_EQ(CU(cuDeviceGetByPCIBusId)(&dev, "nonsense"), CUDA_ERROR_INVALID_VALUE);
}

class FakeCudaContextTest : public FakeCudaTest {};

TEST_F(FakeCudaContextTest, CreatedContextsStackOnTheThread) {
  CUcontext primary = nullptr, created = nullptr, current = nullptr;
  ASSERT_EQ(CU(cuCtxGetCurrent)(&primary), CUDA_SUCCESS);
  ASSERT_NE(primary, nullptr);

  ASSERT_EQ(CU(cuCtxCreate_v4)(&created, nullptr, 0, 1), CUDA_SUCCESS);
  ASSERT_EQ(CU(cuCtxGetCurrent)(&current), CUDA_SUCCESS);
  EXPECT_EQ(current, created);
  CUdevice dev = -1;
  ASSERT_EQ(CU(cuCtxGetDevice)(&dev), CUDA_SUCCESS);
  EXPECT_EQ(dev, 1);

  CUcontext popped = nullptr;
  ASSERT_EQ(CU(cuCtxPopCurrent_v2)(&popped), CUDA_SUCCESS);
  EXPECT_EQ(popped, created);
  ASSERT_EQ(CU(cuCtxGetCurrent)(&current), CUDA_SUCCESS);
  EXPECT_EQ(current, primary);

  ASSERT_EQ(CU(cuCtxPushCurrent_v2)(created), CUDA_SUCCESS);
  ASSERT_EQ(CU(cuCtxDestroy_v2)(created), CUDA_SUCCESS);  // also pops it
  ASSERT_EQ(CU(cuCtxGetCurrent)(&current), CUDA_SUCCESS);
  EXPECT_EQ(current, primary);
  EXPECT_EQ(CU(cuCtxPushCurrent_v2)(created), CUDA_ERROR_INVALID_CONTEXT);
  EXPECT_EQ(CU(cuCtxDestroy_v2)(primary), CUDA_ERROR_INVALID_CONTEXT);
}

TEST_F(FakeCudaContextTest, EveryCtxCreateVersionCreates) {
  CUcontext a = nullptr, b = nullptr, c = nullptr;
  ASSERT_EQ(CU(cuCtxCreate)(&a, 0, 0), CUDA_SUCCESS);
  ASSERT_EQ(CU(cuCtxCreate_v2)(&b, 0, 1), CUDA_SUCCESS);
  ASSERT_EQ(CU(cuCtxCreate_v3)(&c, nullptr, 0, 0, 0), CUDA_SUCCESS);
  EXPECT_NE(a, b);
  CUdevice dev = -1;
  ASSERT_EQ(CU(cuCtxGetDevice_v2)(&dev, b), CUDA_SUCCESS);
  EXPECT_EQ(dev, 1);
  EXPECT_EQ(CU(cuCtxCreate_v4)(&a, nullptr, 0, kTestGpus), CUDA_ERROR_INVALID_DEVICE);
  for (CUcontext ctx : {c, b, a}) EXPECT_EQ(CU(cuCtxDestroy_v2)(ctx), CUDA_SUCCESS);
}

TEST_F(FakeCudaContextTest, PrimaryContextHandleIsStable) {
  CUcontext first = nullptr, second = nullptr;
  ASSERT_EQ(CU(cuDevicePrimaryCtxRetain)(&first, 1), CUDA_SUCCESS);
  ASSERT_EQ(CU(cuDevicePrimaryCtxRetain)(&second, 1), CUDA_SUCCESS);
  EXPECT_EQ(first, second);
  unsigned int flags = 0;
  int active = 0;
  ASSERT_EQ(CU(cuDevicePrimaryCtxGetState)(1, &flags, &active), CUDA_SUCCESS);
  EXPECT_EQ(active, 1);
  EXPECT_EQ(CU(cuDevicePrimaryCtxRelease_v2)(1), CUDA_SUCCESS);
  EXPECT_EQ(CU(cuDevicePrimaryCtxRelease_v2)(1), CUDA_SUCCESS);
}

TEST_F(FakeCudaContextTest, ContextsAreCurrentPerThread) {
  CUresult in_thread = CUDA_SUCCESS;
  CUcontext seen = reinterpret_cast<CUcontext>(1);
  std::thread([&] {
    CUdeviceptr ptr = 0;
    in_thread = CU(cuMemAlloc_v2)(&ptr, 512);
    CU(cuCtxGetCurrent)(&seen);
  }).join();
  EXPECT_EQ(in_thread, CUDA_ERROR_INVALID_CONTEXT);
  EXPECT_EQ(seen, nullptr);
}

TEST(FakeCudaErrors, NamesAndStrings) {
  const char* text = nullptr;
  EXPECT_EQ(CU(cuGetErrorName)(CUDA_ERROR_OUT_OF_MEMORY, &text), CUDA_SUCCESS);
  EXPECT_STREQ(text, "CUDA_ERROR_OUT_OF_MEMORY");
  EXPECT_EQ(CU(cuGetErrorString)(CUDA_ERROR_NOT_SUPPORTED, &text), CUDA_SUCCESS);
  EXPECT_STREQ(text, "operation not supported");
  EXPECT_EQ(CU(cuGetErrorName)(static_cast<CUresult>(123456), &text), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(text, nullptr);
}

void* Exported(const char* name) { return dlsym(CudaHandle(), name); }

void* ProcAddress(const char* name, cuuint64_t flags,
                  CUdriverProcAddressQueryResult* status = nullptr, CUresult* result = nullptr) {
  void* pfn = reinterpret_cast<void*>(1);
  CUdriverProcAddressQueryResult ignored;
  CUresult r = CU(cuGetProcAddress_v2)(name, &pfn, 13000, flags, status ? status : &ignored);
  if (result != nullptr) *result = r;
  return pfn;
}

TEST(FakeCudaProcAddress, MapsBaseNamesToCurrentVersions) {
  EXPECT_EQ(ProcAddress("cuMemAlloc", CU_GET_PROC_ADDRESS_DEFAULT), Exported("cuMemAlloc_v2"));
  EXPECT_EQ(ProcAddress("cuCtxCreate", CU_GET_PROC_ADDRESS_DEFAULT), Exported("cuCtxCreate_v4"));
  EXPECT_EQ(ProcAddress("cuGetProcAddress", CU_GET_PROC_ADDRESS_DEFAULT),
            Exported("cuGetProcAddress_v2"));
  EXPECT_EQ(ProcAddress("cuLaunchKernel", CU_GET_PROC_ADDRESS_LEGACY_STREAM),
            Exported("cuLaunchKernel"));
  EXPECT_EQ(ProcAddress("cuLaunchKernel", CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM),
            Exported("cuLaunchKernel_ptsz"));
  EXPECT_EQ(ProcAddress("cuMemAllocAsync", CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM),
            Exported("cuMemAllocAsync_ptsz"));
  // The per-thread flag does not change APIs without a stream.
  EXPECT_EQ(ProcAddress("cuMemAlloc", CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM),
            Exported("cuMemAlloc_v2"));
  // Names outside the map resolve to themselves.
  EXPECT_EQ(ProcAddress("cuMemAlloc_v2", CU_GET_PROC_ADDRESS_DEFAULT), Exported("cuMemAlloc_v2"));
}

TEST(FakeCudaProcAddress, FollowsTheWholeVersionMap) {
  struct Row {
    const char* base;
    const char* current;
    const char* ptds;
  };
  const Row rows[] = {
#define GPUSLICE_DRIVER_VERSIONED(base, current, ptds) {#base, #current, #ptds},
#include "driver_version_map.inc"
#undef GPUSLICE_DRIVER_VERSIONED
  };
  for (const Row& row : rows) {
    // The real driver keeps the five-argument _v2 for this name, whatever
    // cuda.h maps it to (OlderCudaVersionsGetLegacyEntryPoints).
    if (std::string_view(row.base) == "cuGraphInstantiate") continue;
    EXPECT_EQ(ProcAddress(row.base, CU_GET_PROC_ADDRESS_DEFAULT), Exported(row.current))
        << row.base;
    EXPECT_EQ(ProcAddress(row.base, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM),
              Exported(row.ptds))
        << row.base;
  }
}

TEST(FakeCudaProcAddress, UnknownSymbolsAreNotFound) {
  CUdriverProcAddressQueryResult status = CU_GET_PROC_ADDRESS_SUCCESS;
  CUresult result = CUDA_SUCCESS;
  EXPECT_EQ(ProcAddress("cuNoSuchFunction", 0, &status, &result), nullptr);
  EXPECT_EQ(result, CUDA_ERROR_NOT_FOUND);
  EXPECT_EQ(status, CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND);
  // Exported, but not a driver entry point.
  EXPECT_EQ(ProcAddress("fake_cuda_launch_count", 0, &status, &result), nullptr);
  EXPECT_EQ(result, CUDA_ERROR_NOT_FOUND);
}

// As a CUDA 13.0 driver answers: older callers get older entry points.
TEST(FakeCudaProcAddress, OlderCudaVersionsGetLegacyEntryPoints) {
  auto at = [](const char* name, int version) {
    void* pfn = nullptr;
    CUdriverProcAddressQueryResult status;
    EXPECT_EQ(CU(cuGetProcAddress_v2)(name, &pfn, version, 0, &status), CUDA_SUCCESS) << name << " " << version;
    return pfn;
  };
  EXPECT_EQ(at("cuDevicePrimaryCtxRelease", 10000), Exported("cuDevicePrimaryCtxRelease"));
  EXPECT_EQ(at("cuDevicePrimaryCtxRelease", 11000), Exported("cuDevicePrimaryCtxRelease_v2"));
  EXPECT_EQ(at("cuDevicePrimaryCtxReset", 7000), Exported("cuDevicePrimaryCtxReset"));
  EXPECT_EQ(at("cuMemAlloc", 3010), Exported("cuMemAlloc"));
  EXPECT_EQ(at("cuMemAlloc", 3020), Exported("cuMemAlloc_v2"));
  EXPECT_EQ(at("cuGraphInstantiate", 10000), Exported("cuGraphInstantiate"));
  EXPECT_EQ(at("cuGraphInstantiate", 13000), Exported("cuGraphInstantiate_v2"));
}

TEST(FakeCudaProcAddress, LegacyFourArgumentForm) {
  void* pfn = nullptr;
  ASSERT_EQ(CU(cuGetProcAddress)("cuStreamSynchronize", &pfn, 11000,
                                 CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM),
            CUDA_SUCCESS);
  EXPECT_EQ(pfn, Exported("cuStreamSynchronize_ptsz"));
  EXPECT_EQ(CU(cuGetProcAddress)("cuNoSuchFunction", &pfn, 12000, 0), CUDA_ERROR_NOT_FOUND);
  EXPECT_EQ(pfn, nullptr);
}

TEST_F(FakeCudaDeviceTest, CallCountsAreExactAndResettable) {
  const uint64_t before = CallCount("cuDeviceGetCount");
  int count = 0;
  CU(cuDeviceGetCount)(&count);
  CU(cuDeviceGetCount)(nullptr);  // failures count too
  EXPECT_EQ(CallCount("cuDeviceGetCount"), before + 2);
  EXPECT_EQ(CallCount("not_a_symbol"), 0u);
  Fn<decltype(fake_cuda_reset_counters)>(CudaHandle(), "fake_cuda_reset_counters")();
  EXPECT_EQ(CallCount("cuDeviceGetCount"), 0u);
  EXPECT_EQ(LaunchCount(), 0u);
}

TEST(FakeGpusConfig, DefaultsWhenUnset) {
  const fake_gpus::Config c = fake_gpus::ParseConfig(nullptr, nullptr, nullptr, nullptr, nullptr);
  EXPECT_EQ(c.count, 1);
  EXPECT_EQ(c.memory_bytes, 85899345920u);
  EXPECT_EQ(c.name, "Fake H100");
  EXPECT_FALSE(c.nvlink);
  EXPECT_EQ(c.pool_chunk_bytes, 32 * kMiB);
}

TEST(FakeGpusConfig, ParsesAndClamps) {
  fake_gpus::Config c = fake_gpus::ParseConfig("4", "1073741824", "Other", "1", "2097152");
  EXPECT_EQ(c.count, 4);
  EXPECT_EQ(c.memory_bytes, kTestGpuMemory);
  EXPECT_EQ(c.name, "Other");
  EXPECT_TRUE(c.nvlink);
  EXPECT_EQ(c.pool_chunk_bytes, 2 * kMiB);
  EXPECT_EQ(fake_gpus::ParseConfig("99", nullptr, nullptr, nullptr, nullptr).count, 16);
  EXPECT_EQ(fake_gpus::ParseConfig("0", nullptr, nullptr, nullptr, nullptr).count, 0);
  // Garbage falls back to the default rather than to a prefix of it.
  c = fake_gpus::ParseConfig("2x", "80G", "", "yes", "0");
  EXPECT_EQ(c.count, 1);
  EXPECT_EQ(c.memory_bytes, 85899345920u);
  EXPECT_EQ(c.name, "Fake H100");
  EXPECT_FALSE(c.nvlink);
  EXPECT_EQ(c.pool_chunk_bytes, 32 * kMiB);
  EXPECT_EQ(fake_gpus::ParseConfig(nullptr, "99999999999999999999", nullptr, nullptr, nullptr)
                .memory_bytes,
            85899345920u);
}

TEST(FakeGpusConfig, IdentifiersAreDeterministic) {
  EXPECT_EQ(fake_gpus::UuidString(0), "GPU-face0000-0000-0000-0000-000000000000");
  EXPECT_EQ(fake_gpus::UuidString(11), "GPU-face0000-0000-0000-0000-00000000000b");
  EXPECT_EQ(fake_gpus::NvmlPciBusId(10), "00000000:0a:00.0");
  EXPECT_EQ(fake_gpus::CudaPciBusId(3), "0000:03:00.0");
}

}  // namespace
}  // namespace fake_driver_test
