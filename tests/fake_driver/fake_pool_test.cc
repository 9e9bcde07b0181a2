// Tests of stream-ordered pools: growth in chunks, release at
// synchronisation points, thresholds, trimming, attributes, created pools,
// and allocation during stream capture.
#include "fake_driver_test_util.h"

namespace fake_driver_test {
namespace {

class FakePoolTest : public FakeCudaTest {
 protected:
  void SetUp() override {
    FakeCudaTest::SetUp();
    ASSERT_EQ(CU(cuStreamCreate)(&stream_, 0), CUDA_SUCCESS);
    ASSERT_EQ(CU(cuDeviceGetDefaultMemPool)(&pool_, 0), CUDA_SUCCESS);
    base_ = PhysicalUsed(0);
  }
  void TearDown() override {
    EXPECT_EQ(CU(cuStreamDestroy_v2)(stream_), CUDA_SUCCESS);
    FakeCudaTest::TearDown();
  }

  cuuint64_t Attribute(CUmemoryPool pool, CUmemPool_attribute attr) {
    cuuint64_t value = ~cuuint64_t{0};
    EXPECT_EQ(CU(cuMemPoolGetAttribute)(pool, attr, &value), CUDA_SUCCESS);
    return value;
  }
  cuuint64_t Reserved() { return Attribute(pool_, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT); }
  cuuint64_t Used() { return Attribute(pool_, CU_MEMPOOL_ATTR_USED_MEM_CURRENT); }

  CUstream stream_ = nullptr;
  CUmemoryPool pool_ = nullptr;
  uint64_t base_ = 0;
};

TEST_F(FakePoolTest, GrowsInChunksAndReleasesAtStreamSync) {
  CUdeviceptr small = 0, large = 0;
  ASSERT_EQ(CU(cuMemAllocAsync)(&small, kMiB, stream_), CUDA_SUCCESS);
  EXPECT_EQ(Reserved(), kChunk);
  EXPECT_EQ(Used(), kMiB);
  EXPECT_EQ(PhysicalUsed(0) - base_, kChunk);

  // 40 MiB does not fit in the 31 MiB left: one more chunk.
  ASSERT_EQ(CU(cuMemAllocAsync)(&large, 40 * kMiB, stream_), CUDA_SUCCESS);
  EXPECT_EQ(Reserved(), 2 * kChunk);
  EXPECT_EQ(PhysicalUsed(0) - base_, 2 * kChunk);

  // Freed bytes return to the pool, not to the device.
  ASSERT_EQ(CU(cuMemFreeAsync)(small, stream_), CUDA_SUCCESS);
  EXPECT_EQ(Used(), 40 * kMiB);
  EXPECT_EQ(Reserved(), 2 * kChunk);
  // A sync releases only chunks that hold no live allocation.
  ASSERT_EQ(CU(cuStreamSynchronize)(stream_), CUDA_SUCCESS);
  EXPECT_EQ(Reserved(), 2 * kChunk);

  ASSERT_EQ(CU(cuMemFreeAsync)(large, stream_), CUDA_SUCCESS);
  EXPECT_EQ(PhysicalUsed(0) - base_, 2 * kChunk);  // still reserved until a sync
  ASSERT_EQ(CU(cuStreamSynchronize)(stream_), CUDA_SUCCESS);
  EXPECT_EQ(Reserved(), 0u);
  EXPECT_EQ(PhysicalUsed(0), base_);
  EXPECT_EQ(Attribute(pool_, CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH), 2 * kChunk);
}

TEST_F(FakePoolTest, EventAndContextSyncReleaseToo) {
  CUdeviceptr ptr = 0;
  CUevent event = nullptr;
  ASSERT_EQ(CU(cuEventCreate)(&event, 0), CUDA_SUCCESS);
  ASSERT_EQ(CU(cuMemAllocAsync)(&ptr, kMiB, stream_), CUDA_SUCCESS);
  ASSERT_EQ(CU(cuMemFreeAsync)(ptr, stream_), CUDA_SUCCESS);
  ASSERT_EQ(CU(cuEventRecord)(event, stream_), CUDA_SUCCESS);
  ASSERT_EQ(CU(cuEventSynchronize)(event), CUDA_SUCCESS);
  EXPECT_EQ(Reserved(), 0u);

  ASSERT_EQ(CU(cuMemAllocAsync)(&ptr, kMiB, stream_), CUDA_SUCCESS);
  ASSERT_EQ(CU(cuMemFreeAsync)(ptr, stream_), CUDA_SUCCESS);
  ASSERT_EQ(CU(cuStreamQuery)(stream_), CUDA_SUCCESS);
  EXPECT_EQ(Reserved(), kChunk);  // a query is not a sync
  ASSERT_EQ(CU(cuCtxSynchronize)(), CUDA_SUCCESS);
  EXPECT_EQ(Reserved(), 0u);
  EXPECT_EQ(CU(cuEventDestroy_v2)(event), CUDA_SUCCESS);
}

TEST_F(FakePoolTest, ReleaseThresholdKeepsMemoryUntilTrimmed) {
  cuuint64_t threshold = 2 * kChunk;
  ASSERT_EQ(CU(cuMemPoolSetAttribute)(pool_, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &threshold),
            CUDA_SUCCESS);
  CUdeviceptr ptr = 0;
  ASSERT_EQ(CU(cuMemAllocAsync)(&ptr, 40 * kMiB, stream_), CUDA_SUCCESS);
  ASSERT_EQ(CU(cuMemFreeAsync)(ptr, stream_), CUDA_SUCCESS);
  ASSERT_EQ(CU(cuStreamSynchronize)(stream_), CUDA_SUCCESS);
  EXPECT_EQ(Reserved(), 2 * kChunk);
  EXPECT_EQ(PhysicalUsed(0) - base_, 2 * kChunk);

  ASSERT_EQ(CU(cuMemPoolTrimTo)(pool_, kChunk), CUDA_SUCCESS);
  EXPECT_EQ(Reserved(), kChunk);
  ASSERT_EQ(CU(cuMemPoolTrimTo)(pool_, 0), CUDA_SUCCESS);
  EXPECT_EQ(Reserved(), 0u);
  EXPECT_EQ(PhysicalUsed(0), base_);
  threshold = 0;
  ASSERT_EQ(CU(cuMemPoolSetAttribute)(pool_, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &threshold),
            CUDA_SUCCESS);
}

TEST_F(FakePoolTest, TrimKeepsChunksInUse) {
  CUdeviceptr ptr = 0;
  ASSERT_EQ(CU(cuMemAllocAsync)(&ptr, kMiB, stream_), CUDA_SUCCESS);
  ASSERT_EQ(CU(cuMemPoolTrimTo)(pool_, 0), CUDA_SUCCESS);
  EXPECT_EQ(Reserved(), kChunk);
  ASSERT_EQ(CU(cuMemFreeAsync)(ptr, stream_), CUDA_SUCCESS);
}

TEST_F(FakePoolTest, GrowthIsLimitedByPhysicalMemory) {
  // Leave less than a chunk free on the device.
  size_t free = 0, total = 0;
  ASSERT_EQ(CU(cuMemGetInfo_v2)(&free, &total), CUDA_SUCCESS);
  CUdeviceptr filler = 0, ptr = 0;
  ASSERT_EQ(CU(cuMemAlloc_v2)(&filler, free - kChunk / 2), CUDA_SUCCESS);
  EXPECT_EQ(CU(cuMemAllocAsync)(&ptr, kMiB, stream_), CUDA_ERROR_OUT_OF_MEMORY);
  EXPECT_EQ(Reserved(), 0u);
  ASSERT_EQ(CU(cuMemFree_v2)(filler), CUDA_SUCCESS);
  ASSERT_EQ(CU(cuMemAllocAsync)(&ptr, kMiB, stream_), CUDA_SUCCESS);
  // cuMemFree also accepts a stream-ordered allocation.
  ASSERT_EQ(CU(cuMemFree_v2)(ptr), CUDA_SUCCESS);
  EXPECT_EQ(Used(), 0u);
}

TEST_F(FakePoolTest, CreatedPoolsAndCurrentPool) {
  CUmemPoolProps props{};
  props.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
  props.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  props.location.id = 1;
  CUmemoryPool pool = nullptr;
  ASSERT_EQ(CU(cuMemPoolCreate)(&pool, &props), CUDA_SUCCESS);
  EXPECT_EQ(CU(cuDeviceSetMemPool)(0, pool), CUDA_ERROR_INVALID_VALUE);  // wrong device
  ASSERT_EQ(CU(cuDeviceSetMemPool)(1, pool), CUDA_SUCCESS);
  CUmemoryPool current = nullptr;
  ASSERT_EQ(CU(cuDeviceGetMemPool)(&current, 1), CUDA_SUCCESS);
  EXPECT_EQ(current, pool);

  const uint64_t base1 = PhysicalUsed(1);
  CUdeviceptr ptr = 0;
  // Allocates on the pool's device, whatever the stream's.
  ASSERT_EQ(CU(cuMemAllocFromPoolAsync)(&ptr, 3 * kMiB, pool, stream_), CUDA_SUCCESS);
  EXPECT_EQ(PhysicalUsed(1) - base1, kChunk);
  EXPECT_EQ(PhysicalUsed(0), base_);
  CUmemoryPool owner = nullptr;
  ASSERT_EQ(CU(cuPointerGetAttribute)(&owner, CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE, ptr),
            CUDA_SUCCESS);
  EXPECT_EQ(owner, pool);

  // Destroying a pool with a live allocation defers the release to its free.
  ASSERT_EQ(CU(cuMemPoolDestroy)(pool), CUDA_SUCCESS);
  ASSERT_EQ(CU(cuDeviceGetMemPool)(&current, 1), CUDA_SUCCESS);
  EXPECT_NE(current, pool);
  EXPECT_EQ(PhysicalUsed(1) - base1, kChunk);
  ASSERT_EQ(CU(cuMemFreeAsync)(ptr, stream_), CUDA_SUCCESS);
  EXPECT_EQ(PhysicalUsed(1), base1);
  EXPECT_EQ(CU(cuMemPoolDestroy)(pool_), CUDA_ERROR_INVALID_VALUE);  // default pools stay
}

TEST_F(FakePoolTest, HighWaterMarksReset) {
  CUdeviceptr ptr = 0;
  ASSERT_EQ(CU(cuMemAllocAsync)(&ptr, 5 * kMiB, stream_), CUDA_SUCCESS);
  ASSERT_EQ(CU(cuMemFreeAsync)(ptr, stream_), CUDA_SUCCESS);
  EXPECT_GE(Attribute(pool_, CU_MEMPOOL_ATTR_USED_MEM_HIGH), 5 * kMiB);
  cuuint64_t zero = 0, one = 1;
  ASSERT_EQ(CU(cuMemPoolSetAttribute)(pool_, CU_MEMPOOL_ATTR_USED_MEM_HIGH, &zero), CUDA_SUCCESS);
  EXPECT_EQ(Attribute(pool_, CU_MEMPOOL_ATTR_USED_MEM_HIGH), 0u);
  EXPECT_EQ(CU(cuMemPoolSetAttribute)(pool_, CU_MEMPOOL_ATTR_USED_MEM_HIGH, &one),
            CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(CU(cuMemPoolSetAttribute)(pool_, CU_MEMPOOL_ATTR_USED_MEM_CURRENT, &zero),
            CUDA_ERROR_INVALID_VALUE);
}

TEST_F(FakePoolTest, PerThreadStreamVariants) {
  CUdeviceptr ptr = 0;
  ASSERT_EQ(CU(cuMemAllocAsync_ptsz)(&ptr, kMiB, CU_STREAM_PER_THREAD), CUDA_SUCCESS);
  EXPECT_EQ(Used(), kMiB);
  ASSERT_EQ(CU(cuMemFreeAsync_ptsz)(ptr, CU_STREAM_PER_THREAD), CUDA_SUCCESS);
  ASSERT_EQ(CU(cuMemAllocFromPoolAsync_ptsz)(&ptr, kMiB, pool_, nullptr), CUDA_SUCCESS);
  ASSERT_EQ(CU(cuMemFreeAsync_ptsz)(ptr, nullptr), CUDA_SUCCESS);
  ASSERT_EQ(CU(cuStreamSynchronize_ptsz)(CU_STREAM_PER_THREAD), CUDA_SUCCESS);
  EXPECT_EQ(Reserved(), 0u);
}

TEST_F(FakePoolTest, CapturedAllocationsBecomeGraphNodes) {
  ASSERT_EQ(CU(cuStreamBeginCapture_v2)(stream_, CU_STREAM_CAPTURE_MODE_GLOBAL), CUDA_SUCCESS);
  CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
  ASSERT_EQ(CU(cuStreamIsCapturing)(stream_, &status), CUDA_SUCCESS);
  EXPECT_EQ(status, CU_STREAM_CAPTURE_STATUS_ACTIVE);
  EXPECT_EQ(CU(cuStreamBeginCapture_v2)(stream_, CU_STREAM_CAPTURE_MODE_GLOBAL),
            CUDA_ERROR_ILLEGAL_STATE);

  CUgraph capturing = nullptr;
  cuuint64_t id = 0;
  size_t dependencies = 7;
  ASSERT_EQ(CU(cuStreamGetCaptureInfo_v3)(stream_, &status, &id, &capturing, nullptr, nullptr,
                                          &dependencies),
            CUDA_SUCCESS);
  EXPECT_EQ(status, CU_STREAM_CAPTURE_STATUS_ACTIVE);
  EXPECT_NE(id, 0u);
  EXPECT_NE(capturing, nullptr);
  EXPECT_EQ(dependencies, 0u);

  CUdeviceptr ptr = 0;
  ASSERT_EQ(CU(cuMemAllocAsync)(&ptr, 8 * kMiB, stream_), CUDA_SUCCESS);
  EXPECT_NE(ptr, 0u);
  EXPECT_EQ(PhysicalUsed(0), base_);  // nothing allocated yet
  EXPECT_EQ(Reserved(), 0u);
  ASSERT_EQ(CU(cuMemFreeAsync)(ptr, stream_), CUDA_SUCCESS);
  EXPECT_EQ(CU(cuStreamSynchronize)(stream_), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);

  CUgraph graph = nullptr;
  ASSERT_EQ(CU(cuStreamEndCapture)(stream_, &graph), CUDA_SUCCESS);
  EXPECT_EQ(graph, capturing);
  ASSERT_EQ(CU(cuStreamIsCapturing)(stream_, &status), CUDA_SUCCESS);
  EXPECT_EQ(status, CU_STREAM_CAPTURE_STATUS_NONE);
  ASSERT_EQ(CU(cuStreamGetCaptureInfo_v3_ptsz)(stream_, &status, nullptr, nullptr, nullptr, nullptr,
                                               nullptr),
            CUDA_SUCCESS);
  EXPECT_EQ(status, CU_STREAM_CAPTURE_STATUS_NONE);
  CUgraphNode nodes[2] = {};
  size_t count = 2;
  ASSERT_EQ(CU(cuGraphGetNodes)(graph, nodes, &count), CUDA_SUCCESS);
  ASSERT_EQ(count, 2u);
  CUgraphNodeType type;
  ASSERT_EQ(CU(cuGraphNodeGetType)(nodes[0], &type), CUDA_SUCCESS);
  EXPECT_EQ(type, CU_GRAPH_NODE_TYPE_MEM_ALLOC);
  ASSERT_EQ(CU(cuGraphNodeGetType)(nodes[1], &type), CUDA_SUCCESS);
  EXPECT_EQ(type, CU_GRAPH_NODE_TYPE_MEM_FREE);
  CUDA_MEM_ALLOC_NODE_PARAMS params{};
  ASSERT_EQ(CU(cuGraphMemAllocNodeGetParams)(nodes[0], &params), CUDA_SUCCESS);
  EXPECT_EQ(params.bytesize, 8 * kMiB);
  EXPECT_EQ(params.dptr, ptr);
  EXPECT_EQ(CU(cuGraphDestroy)(graph), CUDA_SUCCESS);

  EXPECT_EQ(CU(cuStreamBeginCapture_v2)(nullptr, CU_STREAM_CAPTURE_MODE_GLOBAL),
            CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
  EXPECT_EQ(CU(cuStreamEndCapture)(stream_, &graph), CUDA_ERROR_ILLEGAL_STATE);
}

}  // namespace
}  // namespace fake_driver_test
