// Tests of graph memory accounting: reservation in the device's graph pool
// at launch, live allocations until freed, trim, and kernel-node launches.
#include "fake_driver_test_util.h"

namespace fake_driver_test {
namespace {

class FakeGraphTest : public FakeCudaTest {
 protected:
  void SetUp() override {
    FakeCudaTest::SetUp();
    ASSERT_EQ(CU(cuStreamCreate)(&stream_, 0), CUDA_SUCCESS);
    ASSERT_EQ(CU(cuGraphCreate)(&graph_, 0), CUDA_SUCCESS);
    base_ = PhysicalUsed(0);
  }
  void TearDown() override {
    EXPECT_EQ(CU(cuGraphDestroy)(graph_), CUDA_SUCCESS);
    EXPECT_EQ(CU(cuStreamDestroy_v2)(stream_), CUDA_SUCCESS);
    FakeCudaTest::TearDown();
  }

  CUgraphNode AddAlloc(uint64_t bytes, CUdeviceptr* dptr, int device = 0) {
    CUDA_MEM_ALLOC_NODE_PARAMS params{};
    params.poolProps.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
    params.poolProps.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    params.poolProps.location.id = device;
    params.bytesize = bytes;
    CUgraphNode node = nullptr;
    EXPECT_EQ(CU(cuGraphAddMemAllocNode)(&node, graph_, nullptr, 0, &params), CUDA_SUCCESS);
    *dptr = params.dptr;
    return node;
  }

  cuuint64_t GraphMem(CUgraphMem_attribute attr, int device = 0) {
    cuuint64_t value = ~cuuint64_t{0};
    EXPECT_EQ(CU(cuDeviceGetGraphMemAttribute)(device, attr, &value), CUDA_SUCCESS);
    return value;
  }

  CUstream stream_ = nullptr;
  CUgraph graph_ = nullptr;
  uint64_t base_ = 0;
};

TEST_F(FakeGraphTest, UnfreedAllocationStaysLiveAfterLaunch) {
  CUdeviceptr dptr = 0;
  CUgraphNode node = AddAlloc(3 * kMiB, &dptr);
  EXPECT_NE(dptr, 0u);
  CUDA_MEM_ALLOC_NODE_PARAMS params{};
  ASSERT_EQ(CU(cuGraphMemAllocNodeGetParams)(node, &params), CUDA_SUCCESS);
  EXPECT_EQ(params.bytesize, 3 * kMiB);
  EXPECT_EQ(params.dptr, dptr);

  CUgraphExec exec = nullptr;
  ASSERT_EQ(CU(cuGraphInstantiateWithFlags)(&exec, graph_, 0), CUDA_SUCCESS);
  EXPECT_EQ(PhysicalUsed(0), base_);  // nothing until launch
  ASSERT_EQ(CU(cuGraphLaunch)(exec, stream_), CUDA_SUCCESS);
  EXPECT_EQ(GraphMem(CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT), 3 * kMiB);
  EXPECT_EQ(GraphMem(CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT), 4 * kMiB);  // 2 MiB steps
  EXPECT_EQ(PhysicalUsed(0) - base_, 4 * kMiB);
  CUdeviceptr base = 0;
  size_t size = 0;
  ASSERT_EQ(CU(cuMemGetAddressRange_v2)(&base, &size, dptr + 1), CUDA_SUCCESS);
  EXPECT_EQ(base, dptr);

  // Its allocation is still live: relaunching is an error.
  EXPECT_EQ(CU(cuGraphLaunch)(exec, stream_), CUDA_ERROR_INVALID_VALUE);
  ASSERT_EQ(CU(cuMemFreeAsync)(dptr, stream_), CUDA_SUCCESS);
  EXPECT_EQ(GraphMem(CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT), 0u);
  EXPECT_EQ(GraphMem(CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT), 4 * kMiB);  // until trimmed
  EXPECT_EQ(PhysicalUsed(0) - base_, 4 * kMiB);

  ASSERT_EQ(CU(cuGraphLaunch)(exec, stream_), CUDA_SUCCESS);  // reuses the reservation
  EXPECT_EQ(PhysicalUsed(0) - base_, 4 * kMiB);
  ASSERT_EQ(CU(cuMemFree_v2)(dptr), CUDA_SUCCESS);
  ASSERT_EQ(CU(cuDeviceGraphMemTrim)(0), CUDA_SUCCESS);
  EXPECT_EQ(GraphMem(CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT), 0u);
  EXPECT_EQ(GraphMem(CU_GRAPH_MEM_ATTR_RESERVED_MEM_HIGH), 4 * kMiB);
  EXPECT_EQ(PhysicalUsed(0), base_);
  ASSERT_EQ(CU(cuGraphExecDestroy)(exec), CUDA_SUCCESS);
}

TEST_F(FakeGraphTest, AllocationFreedInGraphReturnsToThePool) {
  CUdeviceptr dptr = 0;
  AddAlloc(5 * kMiB, &dptr);
  CUgraphNode free_node = nullptr;
  ASSERT_EQ(CU(cuGraphAddMemFreeNode)(&free_node, graph_, nullptr, 0, dptr), CUDA_SUCCESS);
  EXPECT_EQ(CU(cuGraphAddMemFreeNode)(&free_node, graph_, nullptr, 0, dptr + 512),
            CUDA_ERROR_INVALID_VALUE);
  CUgraphExec exec = nullptr;
  ASSERT_EQ(CU(cuGraphInstantiateWithFlags)(&exec, graph_, 0), CUDA_SUCCESS);
  ASSERT_EQ(CU(cuGraphLaunch)(exec, stream_), CUDA_SUCCESS);
  EXPECT_EQ(GraphMem(CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT), 0u);
  EXPECT_EQ(GraphMem(CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT), 6 * kMiB);
  EXPECT_EQ(PhysicalUsed(0) - base_, 6 * kMiB);
  ASSERT_EQ(CU(cuGraphLaunch)(exec, stream_), CUDA_SUCCESS);  // free to relaunch
  EXPECT_EQ(PhysicalUsed(0) - base_, 6 * kMiB);
  EXPECT_EQ(CU(cuMemFree_v2)(dptr), CUDA_ERROR_INVALID_VALUE);  // not live
  ASSERT_EQ(CU(cuGraphExecDestroy)(exec), CUDA_SUCCESS);
  ASSERT_EQ(CU(cuDeviceGraphMemTrim)(0), CUDA_SUCCESS);
  EXPECT_EQ(PhysicalUsed(0), base_);
}

TEST_F(FakeGraphTest, LaunchFailsWhenThePoolCannotGrow) {
  size_t free = 0, total = 0;
  ASSERT_EQ(CU(cuMemGetInfo_v2)(&free, &total), CUDA_SUCCESS);
  CUdeviceptr dptr = 0;
  AddAlloc(free + 1, &dptr);  // adding the node takes nothing
  CUgraphExec exec = nullptr;
  ASSERT_EQ(CU(cuGraphInstantiateWithFlags)(&exec, graph_, 0), CUDA_SUCCESS);
  EXPECT_EQ(CU(cuGraphLaunch)(exec, stream_), CUDA_ERROR_OUT_OF_MEMORY);
  EXPECT_EQ(CU(cuGraphUpload)(exec, stream_), CUDA_ERROR_OUT_OF_MEMORY);
  EXPECT_EQ(PhysicalUsed(0), base_);
  EXPECT_EQ(GraphMem(CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT), 0u);
  ASSERT_EQ(CU(cuGraphExecDestroy)(exec), CUDA_SUCCESS);
}

TEST_F(FakeGraphTest, OneExecutableAtATimeAndAutoFree) {
  CUdeviceptr dptr = 0;
  AddAlloc(kMiB, &dptr);
  CUgraphExec exec = nullptr, second = nullptr;
  ASSERT_EQ(CU(cuGraphInstantiateWithFlags)(&exec, graph_,
                                            CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH),
            CUDA_SUCCESS);
  EXPECT_EQ(CU(cuGraphInstantiateWithFlags)(&second, graph_, 0), CUDA_ERROR_INVALID_VALUE);
  ASSERT_EQ(CU(cuGraphUpload)(exec, stream_), CUDA_SUCCESS);
  EXPECT_EQ(GraphMem(CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT), 2 * kMiB);
  EXPECT_EQ(GraphMem(CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT), 0u);
  ASSERT_EQ(CU(cuGraphLaunch_ptsz)(exec, stream_), CUDA_SUCCESS);
  ASSERT_EQ(CU(cuGraphLaunch_ptsz)(exec, stream_), CUDA_SUCCESS);  // frees the first
  EXPECT_EQ(GraphMem(CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT), kMiB);
  // The allocation outlives its executable.
  ASSERT_EQ(CU(cuGraphExecDestroy)(exec), CUDA_SUCCESS);
  EXPECT_EQ(GraphMem(CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT), kMiB);
  ASSERT_EQ(CU(cuMemFreeAsync)(dptr, stream_), CUDA_SUCCESS);
  ASSERT_EQ(CU(cuGraphInstantiateWithFlags)(&second, graph_, 0), CUDA_SUCCESS);
  ASSERT_EQ(CU(cuGraphExecDestroy)(second), CUDA_SUCCESS);
}

TEST_F(FakeGraphTest, KernelNodesCountAsLaunches) {
  CUmodule module = nullptr;
  CUfunction function = nullptr;
  const char image[] = "fake";
  ASSERT_EQ(CU(cuModuleLoadData)(&module, image), CUDA_SUCCESS);
  ASSERT_EQ(CU(cuModuleGetFunction)(&function, module, "kernel"), CUDA_SUCCESS);
  CUDA_KERNEL_NODE_PARAMS params{};
  params.func = function;
  CUgraphNode nodes[2] = {};
  ASSERT_EQ(CU(cuGraphAddKernelNode_v2)(&nodes[0], graph_, nullptr, 0, &params), CUDA_SUCCESS);
  ASSERT_EQ(CU(cuGraphAddKernelNode_v2)(&nodes[1], graph_, &nodes[0], 1, &params), CUDA_SUCCESS);
  size_t count = 0;
  ASSERT_EQ(CU(cuGraphGetNodes)(graph_, nullptr, &count), CUDA_SUCCESS);
  EXPECT_EQ(count, 2u);
  CUgraphExec exec = nullptr;
  ASSERT_EQ(CU(cuGraphInstantiateWithFlags)(&exec, graph_, 0), CUDA_SUCCESS);
  const uint64_t before = LaunchCount();
  ASSERT_EQ(CU(cuGraphLaunch)(exec, stream_), CUDA_SUCCESS);
  EXPECT_EQ(LaunchCount(), before + 2);
  ASSERT_EQ(CU(cuGraphExecDestroy)(exec), CUDA_SUCCESS);
  ASSERT_EQ(CU(cuModuleUnload)(module), CUDA_SUCCESS);
}

TEST_F(FakeGraphTest, CapturedGraphAllocatesWhenLaunched) {
  CUstream capture = nullptr;
  ASSERT_EQ(CU(cuStreamCreate)(&capture, 0), CUDA_SUCCESS);
  ASSERT_EQ(CU(cuStreamBeginCapture_v2)(capture, CU_STREAM_CAPTURE_MODE_RELAXED), CUDA_SUCCESS);
  CUdeviceptr dptr = 0;
  ASSERT_EQ(CU(cuMemAllocAsync)(&dptr, 2 * kMiB, capture), CUDA_SUCCESS);
  CUgraph captured = nullptr;
  ASSERT_EQ(CU(cuStreamEndCapture)(capture, &captured), CUDA_SUCCESS);
  EXPECT_EQ(PhysicalUsed(0), base_);

  CUgraphExec exec = nullptr;
  CUDA_GRAPH_INSTANTIATE_PARAMS params{};
  ASSERT_EQ(CU(cuGraphInstantiateWithParams)(&exec, captured, &params), CUDA_SUCCESS);
  EXPECT_EQ(params.result_out, CUDA_GRAPH_INSTANTIATE_SUCCESS);
  ASSERT_EQ(CU(cuGraphLaunch)(exec, stream_), CUDA_SUCCESS);
  EXPECT_EQ(PhysicalUsed(0) - base_, 2 * kMiB);
  int ordinal = -1;
  ASSERT_EQ(CU(cuPointerGetAttribute)(&ordinal, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, dptr),
            CUDA_SUCCESS);
  EXPECT_EQ(ordinal, 0);
  ASSERT_EQ(CU(cuMemFreeAsync)(dptr, stream_), CUDA_SUCCESS);
  ASSERT_EQ(CU(cuGraphExecDestroy)(exec), CUDA_SUCCESS);
  ASSERT_EQ(CU(cuGraphDestroy)(captured), CUDA_SUCCESS);
  ASSERT_EQ(CU(cuStreamDestroy_v2)(capture), CUDA_SUCCESS);
}

}  // namespace
}  // namespace fake_driver_test
