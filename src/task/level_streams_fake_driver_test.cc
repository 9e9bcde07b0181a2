// The C++ scheduler's level streams against the fake CUDA driver
// (tests/fake_driver), through the real LibraryStreamDriver: libcuda found
// by its soname once loaded, a stream made in the task's current context,
// with its level's priority as the driver keeps it.
#include <cuda.h>
#include <dlfcn.h>
#include <gtest/gtest.h>

#include "gpuslice/scheduler.h"

namespace {

template <typename F>
F* Cuda(const char* name) {
  static void* cuda = dlopen(FAKE_CUDA_PATH, RTLD_NOW | RTLD_LOCAL);  // as the CUDA runtime loads it
  EXPECT_NE(cuda, nullptr) << dlerror();
  return reinterpret_cast<F*>(dlsym(cuda, name));
}

TEST(LevelStreamsFakeDriverTest, ATaskLaunchesOnAStreamOfItsLevelsPriority) {
  ASSERT_EQ(Cuda<decltype(cuInit)>("cuInit")(0), CUDA_SUCCESS);
  CUcontext context = nullptr;
  ASSERT_EQ(Cuda<decltype(cuDevicePrimaryCtxRetain)>("cuDevicePrimaryCtxRetain")(&context, 0), CUDA_SUCCESS);

  gpuslice::SchedulerOptions options;
  options.cuda_streams = true;
  gpuslice::Scheduler sched(options);
  auto in_task = [context] {
    EXPECT_EQ(gpuslice::current_task_stream(), nullptr) << "no current context on the worker yet";
    Cuda<decltype(cuCtxSetCurrent)>("cuCtxSetCurrent")(context);
    auto stream = static_cast<CUstream>(gpuslice::current_task_stream());
    int priority = 99;
    EXPECT_NE(stream, nullptr);
    EXPECT_EQ(Cuda<decltype(cuStreamGetPriority)>("cuStreamGetPriority")(stream, &priority), CUDA_SUCCESS);
    Cuda<decltype(cuCtxSetCurrent)>("cuCtxSetCurrent")(nullptr);
    return priority;
  };
  EXPECT_EQ(sched.submit(sched.latency_critical("critical"), in_task).get(), -3);
  EXPECT_EQ(sched.submit(sched.latency_critical("high"), in_task).get(), -2);
  EXPECT_EQ(sched.submit(sched.best_effort("low"), in_task).get(), 0);
  EXPECT_EQ(gpuslice::current_task_stream(), nullptr) << "outside a task";
}

}  // namespace
