// Tests of the fake NVML, and that it agrees with the fake CUDA driver.
#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "fake_driver_test_util.h"
#include "fake_gpus.h"

namespace fake_driver_test {
namespace {

class FakeNvmlTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_EQ(NVML(nvmlInit_v2)(), NVML_SUCCESS); }
  void TearDown() override { EXPECT_EQ(NVML(nvmlShutdown)(), NVML_SUCCESS); }

  nvmlDevice_t Device(unsigned int index) {
    nvmlDevice_t device = nullptr;
    EXPECT_EQ(NVML(nvmlDeviceGetHandleByIndex_v2)(index, &device), NVML_SUCCESS);
    return device;
  }
};

TEST(FakeNvmlInit, CallsNeedInitAndShutdownIsCounted) {
  unsigned int count = 0;
  EXPECT_EQ(NVML(nvmlDeviceGetCount_v2)(&count), NVML_ERROR_UNINITIALIZED);
  ASSERT_EQ(NVML(nvmlInit_v2)(), NVML_SUCCESS);
  ASSERT_EQ(NVML(nvmlInitWithFlags)(0), NVML_SUCCESS);
  EXPECT_EQ(NVML(nvmlShutdown)(), NVML_SUCCESS);
  EXPECT_EQ(NVML(nvmlDeviceGetCount_v2)(&count), NVML_SUCCESS);  // one init left
  EXPECT_EQ(NVML(nvmlShutdown)(), NVML_SUCCESS);
  EXPECT_EQ(NVML(nvmlShutdown)(), NVML_ERROR_UNINITIALIZED);
  EXPECT_STREQ(NVML(nvmlErrorString)(NVML_ERROR_NOT_FOUND), "Not Found");
}

TEST_F(FakeNvmlTest, DescribesTheConfiguredGpus) {
  unsigned int count = 0;
  ASSERT_EQ(NVML(nvmlDeviceGetCount_v2)(&count), NVML_SUCCESS);
  EXPECT_EQ(count, static_cast<unsigned int>(kTestGpus));
  nvmlDevice_t device = nullptr;
  EXPECT_EQ(NVML(nvmlDeviceGetHandleByIndex_v2)(count, &device), NVML_ERROR_INVALID_ARGUMENT);

  char text[NVML_DEVICE_UUID_V2_BUFFER_SIZE];
  ASSERT_EQ(NVML(nvmlDeviceGetName)(Device(1), text, sizeof(text)), NVML_SUCCESS);
  EXPECT_STREQ(text, "Fake H100");
  ASSERT_EQ(NVML(nvmlSystemGetDriverVersion)(text, sizeof(text)), NVML_SUCCESS);
  EXPECT_STREQ(text, "580.00-fake");
  unsigned int index = 7;
  ASSERT_EQ(NVML(nvmlDeviceGetIndex)(Device(1), &index), NVML_SUCCESS);
  EXPECT_EQ(index, 1u);
  EXPECT_EQ(NVML(nvmlDeviceGetIndex)(reinterpret_cast<nvmlDevice_t>(&index), &index),
            NVML_ERROR_INVALID_ARGUMENT);
}

TEST_F(FakeNvmlTest, UuidsAgreeWithTheFakeCudaDriver) {
  ASSERT_EQ(CU(cuInit)(0), CUDA_SUCCESS);
  for (int i = 0; i < kTestGpus; ++i) {
    char text[NVML_DEVICE_UUID_V2_BUFFER_SIZE];
    ASSERT_EQ(NVML(nvmlDeviceGetUUID)(Device(i), text, sizeof(text)), NVML_SUCCESS);
    EXPECT_EQ(std::string(text), fake_gpus::UuidString(i));
    CUuuid uuid;
    ASSERT_EQ(CU(cuDeviceGetUuid_v2)(&uuid, i), CUDA_SUCCESS);
    char from_cuda[64];
    const auto* b = reinterpret_cast<const unsigned char*>(uuid.bytes);
    std::snprintf(from_cuda, sizeof(from_cuda),
                  "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0],
                  b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13],
                  b[14], b[15]);
    EXPECT_STREQ(text, from_cuda);
    nvmlDevice_t by_uuid = nullptr;
    ASSERT_EQ(NVML(nvmlDeviceGetHandleByUUID)(text, &by_uuid), NVML_SUCCESS);
    EXPECT_EQ(by_uuid, Device(i));
  }
  nvmlDevice_t device = nullptr;
  EXPECT_EQ(NVML(nvmlDeviceGetHandleByUUID)("GPU-00000000-0000-0000-0000-000000000000", &device),
            NVML_ERROR_NOT_FOUND);
  char small[8];
  EXPECT_EQ(NVML(nvmlDeviceGetUUID)(Device(0), small, sizeof(small)), NVML_ERROR_INSUFFICIENT_SIZE);
}

TEST_F(FakeNvmlTest, MemoryIsTheCapacityAndNothingUsed) {
  nvmlMemory_t memory{};
  ASSERT_EQ(NVML(nvmlDeviceGetMemoryInfo)(Device(0), &memory), NVML_SUCCESS);
  EXPECT_EQ(memory.total, kTestGpuMemory);
  EXPECT_EQ(memory.free, kTestGpuMemory);
  EXPECT_EQ(memory.used, 0u);
  nvmlMemory_v2_t v2{};
  EXPECT_EQ(NVML(nvmlDeviceGetMemoryInfo_v2)(Device(0), &v2), NVML_ERROR_ARGUMENT_VERSION_MISMATCH);
  v2.version = nvmlMemory_v2;
  ASSERT_EQ(NVML(nvmlDeviceGetMemoryInfo_v2)(Device(0), &v2), NVML_SUCCESS);
  EXPECT_EQ(v2.total, kTestGpuMemory);
  EXPECT_EQ(v2.reserved, 0u);
  EXPECT_EQ(v2.used, 0u);
  EXPECT_EQ(nvmlMemory_v2, static_cast<unsigned int>(sizeof(nvmlMemory_v2_t) | (2u << 24)));
}

TEST_F(FakeNvmlTest, PciInfoMatchesCuda) {
  nvmlPciInfo_t pci{};
  ASSERT_EQ(NVML(nvmlDeviceGetPciInfo_v3)(Device(1), &pci), NVML_SUCCESS);
  EXPECT_STREQ(pci.busId, "00000000:01:00.0");
  EXPECT_STREQ(pci.busIdLegacy, "0000:01:00.0");
  EXPECT_EQ(pci.bus, 1u);
  EXPECT_EQ(pci.pciDeviceId & 0xffff, 0x10deu);
  ASSERT_EQ(CU(cuInit)(0), CUDA_SUCCESS);
  CUdevice dev = -1;
  ASSERT_EQ(CU(cuDeviceGetByPCIBusId)(&dev, pci.busId), CUDA_SUCCESS);
  EXPECT_EQ(dev, 1);
  nvmlDevice_t device = nullptr;
  ASSERT_EQ(NVML(nvmlDeviceGetHandleByPciBusId_v2)(pci.busId, &device), NVML_SUCCESS);
  EXPECT_EQ(device, Device(1));
}

TEST_F(FakeNvmlTest, TopologyWithoutNvLink) {
  nvmlGpuTopologyLevel_t level = NVML_TOPOLOGY_NODE;
  ASSERT_EQ(NVML(nvmlDeviceGetTopologyCommonAncestor)(Device(0), Device(1), &level), NVML_SUCCESS);
  EXPECT_EQ(level, NVML_TOPOLOGY_SYSTEM);
  ASSERT_EQ(NVML(nvmlDeviceGetTopologyCommonAncestor)(Device(1), Device(1), &level), NVML_SUCCESS);
  EXPECT_EQ(level, NVML_TOPOLOGY_INTERNAL);
  nvmlEnableState_t state = NVML_FEATURE_ENABLED;
  ASSERT_EQ(NVML(nvmlDeviceGetNvLinkState)(Device(0), 0, &state), NVML_SUCCESS);
  EXPECT_EQ(state, NVML_FEATURE_DISABLED);
  EXPECT_EQ(NVML(nvmlDeviceGetNvLinkState)(Device(0), 18, &state), NVML_ERROR_INVALID_ARGUMENT);
}

int NvLinkChild() {
  setenv("FAKE_GPU_COUNT", "2", 1);
  setenv("FAKE_GPU_NVLINK", "1", 1);
  void* handle = dlopen(FAKE_NVML_PATH, RTLD_NOW | RTLD_LOCAL);
  Fn<decltype(nvmlInit_v2)>(handle, "nvmlInit_v2")();
  auto by_index =
      Fn<decltype(nvmlDeviceGetHandleByIndex_v2)>(handle, "nvmlDeviceGetHandleByIndex_v2");
  nvmlDevice_t a = nullptr, b = nullptr;
  by_index(0, &a);
  by_index(1, &b);
  nvmlGpuTopologyLevel_t level = NVML_TOPOLOGY_SYSTEM;
  nvmlEnableState_t state = NVML_FEATURE_DISABLED;
  Fn<decltype(nvmlDeviceGetTopologyCommonAncestor)>(handle, "nvmlDeviceGetTopologyCommonAncestor")(
      a, b, &level);
  Fn<decltype(nvmlDeviceGetNvLinkState)>(handle, "nvmlDeviceGetNvLinkState")(a, 17, &state);
  return level == NVML_TOPOLOGY_SINGLE && state == NVML_FEATURE_ENABLED ? 0 : 1;
}

// A fresh process (threadsafe death-test style), so the fake reads this
// environment rather than the suite's.
TEST(FakeNvmlDeathTest, NvLinkMakesGpusClose) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(std::exit(NvLinkChild()), ::testing::ExitedWithCode(0), "");
}

}  // namespace
}  // namespace fake_driver_test
