// Tests of the virtual memory management API: granularity, handles charged
// at creation and freed only when released and unmapped everywhere.
#include <unistd.h>

#include <cstdint>

#include "fake_driver_test_util.h"

namespace fake_driver_test {
namespace {

class FakeVmmTest : public FakeCudaTest {
 protected:
  static CUmemAllocationProp Prop(int device) {
    CUmemAllocationProp prop{};
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = device;
    return prop;
  }
};

TEST_F(FakeVmmTest, GranularityIsTwoMiB) {
  const CUmemAllocationProp prop = Prop(0);
  size_t granularity = 0;
  ASSERT_EQ(
      CU(cuMemGetAllocationGranularity)(&granularity, &prop, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED),
      CUDA_SUCCESS);
  EXPECT_EQ(granularity, 2 * kMiB);
  CUmemGenericAllocationHandle handle = 0;
  EXPECT_EQ(CU(cuMemCreate)(&handle, kMiB, &prop, 0), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(CU(cuMemCreate)(&handle, 3 * kMiB, &prop, 0), CUDA_ERROR_INVALID_VALUE);
  const CUmemAllocationProp bad = Prop(kTestGpus);
  EXPECT_EQ(CU(cuMemCreate)(&handle, 2 * kMiB, &bad, 0), CUDA_ERROR_INVALID_DEVICE);
}

TEST_F(FakeVmmTest, CreateIsChargedAndOomAtCapacity) {
  const CUmemAllocationProp prop = Prop(1);
  const uint64_t before = PhysicalUsed(1);
  CUmemGenericAllocationHandle handle = 0;
  ASSERT_EQ(CU(cuMemCreate)(&handle, 4 * kMiB, &prop, 0), CUDA_SUCCESS);
  EXPECT_EQ(PhysicalUsed(1) - before, 4 * kMiB);
  CUmemAllocationProp got{};
  ASSERT_EQ(CU(cuMemGetAllocationPropertiesFromHandle)(&got, handle), CUDA_SUCCESS);
  EXPECT_EQ(got.location.id, 1);
  CUmemGenericAllocationHandle too_big = 0;
  EXPECT_EQ(CU(cuMemCreate)(&too_big, kTestGpuMemory, &prop, 0), CUDA_ERROR_OUT_OF_MEMORY);
  ASSERT_EQ(CU(cuMemRelease)(handle), CUDA_SUCCESS);
  EXPECT_EQ(PhysicalUsed(1), before);
  EXPECT_EQ(CU(cuMemRelease)(handle), CUDA_ERROR_INVALID_VALUE);
}

TEST_F(FakeVmmTest, MappingsKeepReleasedMemoryAlive) {
  const CUmemAllocationProp prop = Prop(0);
  const uint64_t before = PhysicalUsed(0);
  CUmemGenericAllocationHandle handle = 0;
  ASSERT_EQ(CU(cuMemCreate)(&handle, 4 * kMiB, &prop, 0), CUDA_SUCCESS);
  CUdeviceptr va = 0;
  ASSERT_EQ(CU(cuMemAddressReserve)(&va, 8 * kMiB, 0, 0, 0), CUDA_SUCCESS);
  EXPECT_EQ(PhysicalUsed(0) - before, 4 * kMiB);  // address space is free

  // Two mappings of the same handle.
  ASSERT_EQ(CU(cuMemMap)(va, 4 * kMiB, 0, handle, 0), CUDA_SUCCESS);
  ASSERT_EQ(CU(cuMemMap)(va + 4 * kMiB, 2 * kMiB, 2 * kMiB, handle, 0), CUDA_SUCCESS);
  EXPECT_EQ(CU(cuMemMap)(va, 2 * kMiB, 0, handle, 0), CUDA_ERROR_INVALID_VALUE);  // overlap
  CUmemAccessDesc access{};
  access.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  access.location.id = 0;
  access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  ASSERT_EQ(CU(cuMemSetAccess)(va, 6 * kMiB, &access, 1), CUDA_SUCCESS);
  EXPECT_EQ(CU(cuMemSetAccess)(va, 8 * kMiB, &access, 1),
            CUDA_ERROR_INVALID_VALUE);  // unmapped tail

  int ordinal = -1;
  CUdeviceptr start = 0;
  size_t size = 0;
  ASSERT_EQ(CU(cuPointerGetAttribute)(&ordinal, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, va + 5 * kMiB),
            CUDA_SUCCESS);
  EXPECT_EQ(ordinal, 0);
  ASSERT_EQ(CU(cuPointerGetAttribute)(&start, CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, va + 5 * kMiB),
            CUDA_SUCCESS);
  EXPECT_EQ(start, va);  // the reservation, not the mapping
  ASSERT_EQ(CU(cuPointerGetAttribute)(&size, CU_POINTER_ATTRIBUTE_RANGE_SIZE, va), CUDA_SUCCESS);
  EXPECT_EQ(size, 8 * kMiB);

  // Released but mapped: still held. A retained reference keeps it too.
  ASSERT_EQ(CU(cuMemRelease)(handle), CUDA_SUCCESS);
  EXPECT_EQ(PhysicalUsed(0) - before, 4 * kMiB);
  CUmemGenericAllocationHandle retained = 0;
  ASSERT_EQ(CU(cuMemRetainAllocationHandle)(&retained, reinterpret_cast<void*>(va + kMiB)),
            CUDA_SUCCESS);
  EXPECT_EQ(retained, handle);
  EXPECT_EQ(CU(cuMemAddressFree)(va, 8 * kMiB), CUDA_ERROR_INVALID_VALUE);  // still mapped

  ASSERT_EQ(CU(cuMemUnmap)(va, 6 * kMiB), CUDA_SUCCESS);
  EXPECT_EQ(PhysicalUsed(0) - before, 4 * kMiB);  // the retained reference
  ASSERT_EQ(CU(cuMemRelease)(retained), CUDA_SUCCESS);
  EXPECT_EQ(PhysicalUsed(0), before);
  EXPECT_EQ(CU(cuMemUnmap)(va, 2 * kMiB), CUDA_ERROR_INVALID_VALUE);
  ASSERT_EQ(CU(cuMemAddressFree)(va, 8 * kMiB), CUDA_SUCCESS);
}

TEST_F(FakeVmmTest, UnmapOneOfTwoMappings) {
  const CUmemAllocationProp prop = Prop(0);
  const uint64_t before = PhysicalUsed(0);
  CUmemGenericAllocationHandle handle = 0;
  ASSERT_EQ(CU(cuMemCreate)(&handle, 2 * kMiB, &prop, 0), CUDA_SUCCESS);
  CUdeviceptr a = 0, b = 0;
  ASSERT_EQ(CU(cuMemAddressReserve)(&a, 2 * kMiB, 0, 0, 0), CUDA_SUCCESS);
  ASSERT_EQ(CU(cuMemAddressReserve)(&b, 2 * kMiB, 0, 0, 0), CUDA_SUCCESS);
  ASSERT_EQ(CU(cuMemMap)(a, 2 * kMiB, 0, handle, 0), CUDA_SUCCESS);
  ASSERT_EQ(CU(cuMemMap)(b, 2 * kMiB, 0, handle, 0), CUDA_SUCCESS);
  ASSERT_EQ(CU(cuMemRelease)(handle), CUDA_SUCCESS);
  EXPECT_EQ(CU(cuMemMap)(a, 2 * kMiB, 0, handle, 0), CUDA_ERROR_INVALID_VALUE);  // released
  ASSERT_EQ(CU(cuMemUnmap)(a, 2 * kMiB), CUDA_SUCCESS);
  EXPECT_EQ(PhysicalUsed(0) - before, 2 * kMiB);  // b still maps it
  ASSERT_EQ(CU(cuMemUnmap)(b, 2 * kMiB), CUDA_SUCCESS);
  EXPECT_EQ(PhysicalUsed(0), before);
  ASSERT_EQ(CU(cuMemAddressFree)(a, 2 * kMiB), CUDA_SUCCESS);
  ASSERT_EQ(CU(cuMemAddressFree)(b, 2 * kMiB), CUDA_SUCCESS);
}

TEST_F(FakeVmmTest, AnExportedDescriptorAndAnImportEachKeepTheMemory) {
  const CUmemAllocationProp prop = Prop(0);
  const uint64_t before = PhysicalUsed(0);
  CUmemGenericAllocationHandle handle = 0;
  ASSERT_EQ(CU(cuMemCreate)(&handle, 4 * kMiB, &prop, 0), CUDA_SUCCESS);
  int fd = -1;
  EXPECT_EQ(CU(cuMemExportToShareableHandle)(&fd, handle, CU_MEM_HANDLE_TYPE_FABRIC, 0), CUDA_ERROR_NOT_SUPPORTED);
  ASSERT_EQ(CU(cuMemExportToShareableHandle)(&fd, handle, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0), CUDA_SUCCESS);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(CU(cuMemRelease)(handle), CUDA_SUCCESS);
  EXPECT_EQ(PhysicalUsed(0) - before, 4 * kMiB);  // the open descriptor holds it

  // An import through a duplicate of the descriptor is a new handle to it.
  const int dup_fd = dup(fd);
  CUmemGenericAllocationHandle imported = 0;
  ASSERT_EQ(CU(cuMemImportFromShareableHandle)(&imported, reinterpret_cast<void*>(static_cast<intptr_t>(dup_fd)),
                                               CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR),
            CUDA_SUCCESS);
  EXPECT_NE(imported, handle);
  close(fd);
  close(dup_fd);
  EXPECT_EQ(PhysicalUsed(0) - before, 4 * kMiB);  // the import holds it
  ASSERT_EQ(CU(cuMemRelease)(imported), CUDA_SUCCESS);
  EXPECT_EQ(PhysicalUsed(0), before);
}

}  // namespace
}  // namespace fake_driver_test
