// Tests of modules, functions and the kernel-launch counter.
#include "fake_driver_test_util.h"

namespace fake_driver_test {
namespace {

class FakeLaunchTest : public FakeCudaTest {
 protected:
  void SetUp() override {
    FakeCudaTest::SetUp();
    static const char kImage[] = "not really a cubin";
    ASSERT_EQ(CU(cuModuleLoadData)(&module_, kImage), CUDA_SUCCESS);
    ASSERT_EQ(CU(cuModuleGetFunction)(&function_, module_, "kernel"), CUDA_SUCCESS);
  }
  void TearDown() override {
    EXPECT_EQ(CU(cuModuleUnload)(module_), CUDA_SUCCESS);
    FakeCudaTest::TearDown();
  }

  CUmodule module_ = nullptr;
  CUfunction function_ = nullptr;
};

TEST_F(FakeLaunchTest, EveryLaunchFormCounts) {
  const uint64_t before = LaunchCount();
  ASSERT_EQ(CU(cuLaunchKernel)(function_, 1, 1, 1, 32, 1, 1, 0, nullptr, nullptr, nullptr),
            CUDA_SUCCESS);
  ASSERT_EQ(CU(cuLaunchKernel_ptsz)(function_, 1, 1, 1, 32, 1, 1, 0, CU_STREAM_PER_THREAD, nullptr,
                                    nullptr),
            CUDA_SUCCESS);
  CUlaunchConfig config{};
  config.gridDimX = config.gridDimY = config.gridDimZ = 1;
  config.blockDimX = config.blockDimY = config.blockDimZ = 1;
  ASSERT_EQ(CU(cuLaunchKernelEx)(&config, function_, nullptr, nullptr), CUDA_SUCCESS);
  ASSERT_EQ(CU(cuLaunchKernelEx_ptsz)(&config, function_, nullptr, nullptr), CUDA_SUCCESS);
  ASSERT_EQ(CU(cuLaunchCooperativeKernel)(function_, 1, 1, 1, 1, 1, 1, 0, nullptr, nullptr),
            CUDA_SUCCESS);
  ASSERT_EQ(CU(cuLaunchCooperativeKernel_ptsz)(function_, 1, 1, 1, 1, 1, 1, 0, nullptr, nullptr),
            CUDA_SUCCESS);
  EXPECT_EQ(LaunchCount(), before + 6);
}

TEST_F(FakeLaunchTest, FunctionsAreStablePerName) {
  CUfunction again = nullptr, other = nullptr;
  ASSERT_EQ(CU(cuModuleGetFunction)(&again, module_, "kernel"), CUDA_SUCCESS);
  ASSERT_EQ(CU(cuModuleGetFunction)(&other, module_, "other"), CUDA_SUCCESS);
  EXPECT_EQ(again, function_);
  EXPECT_NE(other, function_);
}

TEST_F(FakeLaunchTest, BadHandlesAreRejectedAndNotCounted) {
  const uint64_t before = LaunchCount();
  EXPECT_EQ(CU(cuLaunchKernel)(nullptr, 1, 1, 1, 1, 1, 1, 0, nullptr, nullptr, nullptr),
            CUDA_ERROR_INVALID_HANDLE);
  EXPECT_EQ(CU(cuLaunchKernel)(function_, 1, 1, 1, 1, 1, 1, 0, reinterpret_cast<CUstream>(0x1234),
                               nullptr, nullptr),
            CUDA_ERROR_INVALID_HANDLE);
  EXPECT_EQ(LaunchCount(), before);
}

TEST_F(FakeLaunchTest, CapturedLaunchesRunWithTheGraph) {
  CUstream stream = nullptr;
  ASSERT_EQ(CU(cuStreamCreate)(&stream, 0), CUDA_SUCCESS);
  ASSERT_EQ(CU(cuStreamBeginCapture_v2)(stream, CU_STREAM_CAPTURE_MODE_GLOBAL), CUDA_SUCCESS);
  const uint64_t before = LaunchCount();
  ASSERT_EQ(CU(cuLaunchKernel)(function_, 1, 1, 1, 1, 1, 1, 0, stream, nullptr, nullptr),
            CUDA_SUCCESS);
  EXPECT_EQ(LaunchCount(), before);
  CUgraph graph = nullptr;
  ASSERT_EQ(CU(cuStreamEndCapture)(stream, &graph), CUDA_SUCCESS);
  CUgraphExec exec = nullptr;
  ASSERT_EQ(CU(cuGraphInstantiateWithFlags)(&exec, graph, 0), CUDA_SUCCESS);
  ASSERT_EQ(CU(cuGraphLaunch)(exec, stream), CUDA_SUCCESS);
  EXPECT_EQ(LaunchCount(), before + 1);
  ASSERT_EQ(CU(cuGraphExecDestroy)(exec), CUDA_SUCCESS);
  ASSERT_EQ(CU(cuGraphDestroy)(graph), CUDA_SUCCESS);
  ASSERT_EQ(CU(cuStreamDestroy_v2)(stream), CUDA_SUCCESS);
}

}  // namespace
}  // namespace fake_driver_test
