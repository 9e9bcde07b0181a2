// Tests of the fake driver's plain memory: capacity and OOM, 512-byte
// granules, pitch, managed and host memory, pointer queries.
#include <cstring>

#include "fake_driver_test_util.h"

namespace fake_driver_test {
namespace {

class FakeMemoryTest : public FakeCudaTest {};

TEST_F(FakeMemoryTest, AllocationsAreCommittedIn512ByteGranules) {
  const uint64_t before = PhysicalUsed(0);
  CUdeviceptr ptr = 0;
  ASSERT_EQ(CU(cuMemAlloc_v2)(&ptr, 1000), CUDA_SUCCESS);
  EXPECT_NE(ptr, 0u);
  EXPECT_EQ(PhysicalUsed(0) - before, 1024u);

  CUdeviceptr base = 0;
  size_t size = 0;
  ASSERT_EQ(CU(cuMemGetAddressRange_v2)(&base, &size, ptr + 700), CUDA_SUCCESS);
  EXPECT_EQ(base, ptr);
  EXPECT_EQ(size, 1024u);
  EXPECT_EQ(CU(cuMemGetAddressRange_v2)(&base, &size, ptr + 1024), CUDA_ERROR_NOT_FOUND);

  EXPECT_EQ(CU(cuMemFree_v2)(ptr + 512), CUDA_ERROR_INVALID_VALUE);  // not a base
  ASSERT_EQ(CU(cuMemFree_v2)(ptr), CUDA_SUCCESS);
  EXPECT_EQ(PhysicalUsed(0), before);
  EXPECT_EQ(CU(cuMemFree_v2)(ptr), CUDA_ERROR_INVALID_VALUE);  // double free
}

TEST_F(FakeMemoryTest, OutOfMemoryExactlyAtCapacity) {
  size_t free = 0, total = 0;
  ASSERT_EQ(CU(cuMemGetInfo_v2)(&free, &total), CUDA_SUCCESS);
  EXPECT_EQ(total, kTestGpuMemory);
  EXPECT_EQ(free, total - PhysicalUsed(0));

  CUdeviceptr all = 0, more = 0;
  const uint64_t calls = CallCount("cuMemAlloc_v2");
  EXPECT_EQ(CU(cuMemAlloc_v2)(&more, free + 1), CUDA_ERROR_OUT_OF_MEMORY);
  ASSERT_EQ(CU(cuMemAlloc_v2)(&all, free), CUDA_SUCCESS);
  EXPECT_EQ(PhysicalUsed(0), kTestGpuMemory);
  EXPECT_EQ(CU(cuMemAlloc_v2)(&more, 1), CUDA_ERROR_OUT_OF_MEMORY);
  EXPECT_EQ(CallCount("cuMemAlloc_v2"), calls + 3);
  size_t now_free = 1;
  ASSERT_EQ(CU(cuMemGetInfo_v2)(&now_free, &total), CUDA_SUCCESS);
  EXPECT_EQ(now_free, 0u);

  // Device 1 is unaffected.
  UseDevice(1);
  ASSERT_EQ(CU(cuMemAlloc_v2)(&more, 1), CUDA_SUCCESS);
  EXPECT_EQ(CU(cuMemFree_v2)(more), CUDA_SUCCESS);
  EXPECT_EQ(CU(cuMemFree_v2)(all), CUDA_SUCCESS);
}

TEST_F(FakeMemoryTest, RejectsWhatTheRealDriverRejects) {
  CUdeviceptr ptr = 0;
  EXPECT_EQ(CU(cuMemAlloc_v2)(&ptr, 0), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(CU(cuMemAlloc_v2)(nullptr, 512), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(CU(cuMemAlloc_v2)(&ptr, ~size_t{0}), CUDA_ERROR_OUT_OF_MEMORY);
  EXPECT_EQ(CU(cuMemFree_v2)(0), CUDA_SUCCESS);
  EXPECT_EQ(CU(cuMemFree_v2)(0x1234), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(CU(cuMemAllocManaged)(&ptr, 512, 0), CUDA_ERROR_INVALID_VALUE);
}

TEST_F(FakeMemoryTest, PitchRoundsRowsTo512) {
  const uint64_t before = PhysicalUsed(0);
  CUdeviceptr ptr = 0;
  size_t pitch = 0;
  ASSERT_EQ(CU(cuMemAllocPitch_v2)(&ptr, &pitch, 1000, 3, 4), CUDA_SUCCESS);
  EXPECT_EQ(pitch, 1024u);
  EXPECT_EQ(PhysicalUsed(0) - before, 3072u);
  EXPECT_EQ(CU(cuMemAllocPitch_v2)(&ptr, &pitch, 1000, 3, 3), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(CU(cuMemFree_v2)(ptr), CUDA_SUCCESS);
}

TEST_F(FakeMemoryTest, ManagedMemoryIsChargedToTheCurrentDevice) {
  UseDevice(1);
  const uint64_t before = PhysicalUsed(1);
  CUdeviceptr ptr = 0;
  ASSERT_EQ(CU(cuMemAllocManaged)(&ptr, 4096, CU_MEM_ATTACH_GLOBAL), CUDA_SUCCESS);
  EXPECT_EQ(PhysicalUsed(1) - before, 4096u);
  unsigned int managed = 0;
  int ordinal = -1;
  EXPECT_EQ(CU(cuPointerGetAttribute)(&managed, CU_POINTER_ATTRIBUTE_IS_MANAGED, ptr),
            CUDA_SUCCESS);
  EXPECT_EQ(managed, 1u);
  EXPECT_EQ(CU(cuPointerGetAttribute)(&ordinal, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, ptr),
            CUDA_SUCCESS);
  EXPECT_EQ(ordinal, 1);
  EXPECT_EQ(CU(cuMemFree_v2)(ptr), CUDA_SUCCESS);
}

TEST_F(FakeMemoryTest, PointerAttributesDescribeTheAllocation) {
  UseDevice(1);
  CUdeviceptr ptr = 0;
  ASSERT_EQ(CU(cuMemAlloc_v2)(&ptr, 3000), CUDA_SUCCESS);
  int ordinal = -1;
  unsigned int type = 0, managed = 7;
  CUdeviceptr start = 0;
  size_t size = 0;
  EXPECT_EQ(CU(cuPointerGetAttribute)(&ordinal, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, ptr + 5),
            CUDA_SUCCESS);
  EXPECT_EQ(ordinal, 1);
  EXPECT_EQ(CU(cuPointerGetAttribute)(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, ptr), CUDA_SUCCESS);
  EXPECT_EQ(type, static_cast<unsigned int>(CU_MEMORYTYPE_DEVICE));
  EXPECT_EQ(CU(cuPointerGetAttribute)(&start, CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, ptr + 100),
            CUDA_SUCCESS);
  EXPECT_EQ(start, ptr);
  EXPECT_EQ(CU(cuPointerGetAttribute)(&size, CU_POINTER_ATTRIBUTE_RANGE_SIZE, ptr), CUDA_SUCCESS);
  EXPECT_EQ(size, 3072u);
  EXPECT_EQ(CU(cuPointerGetAttribute)(&managed, CU_POINTER_ATTRIBUTE_IS_MANAGED, ptr),
            CUDA_SUCCESS);
  EXPECT_EQ(managed, 0u);
  EXPECT_EQ(CU(cuMemFree_v2)(ptr), CUDA_SUCCESS);
  EXPECT_EQ(CU(cuPointerGetAttribute)(&ordinal, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, ptr),
            CUDA_ERROR_INVALID_VALUE);
}

TEST_F(FakeMemoryTest, HostMemoryIsRealAndNotCharged) {
  const uint64_t before = PhysicalUsed(0);
  void* host = nullptr;
  ASSERT_EQ(CU(cuMemAllocHost_v2)(&host, 4096), CUDA_SUCCESS);
  std::memset(host, 0xab, 4096);  // usable memory
  EXPECT_EQ(PhysicalUsed(0), before);
  unsigned int type = 0;
  EXPECT_EQ(CU(cuPointerGetAttribute)(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
                                      reinterpret_cast<CUdeviceptr>(host) + 10),
            CUDA_SUCCESS);
  EXPECT_EQ(type, static_cast<unsigned int>(CU_MEMORYTYPE_HOST));
  EXPECT_EQ(CU(cuMemFree_v2)(reinterpret_cast<CUdeviceptr>(host)), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(CU(cuMemFreeHost)(host), CUDA_SUCCESS);
  EXPECT_EQ(CU(cuMemFreeHost)(host), CUDA_ERROR_INVALID_VALUE);
}

}  // namespace
}  // namespace fake_driver_test
