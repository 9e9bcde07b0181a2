#include "task/level_streams.h"

#include <dlfcn.h>

#include <algorithm>
#include <atomic>

namespace gpuslice::task {
namespace {

// CUDA's own values (cuda.h), declared here so that the task library builds
// without CUDA's headers: CU_STREAM_NON_BLOCKING, and a status for "no such
// function" (CUDA_ERROR_NOT_FOUND).
constexpr unsigned kStreamNonBlocking = 0x1;
constexpr int kNotFound = 500;

using CtxGetCurrentFn = int (*)(void**);
using PriorityRangeFn = int (*)(int*, int*);
using CreateWithPriorityFn = int (*)(void**, unsigned, int);
using SynchronizeFn = int (*)(void*);

// libcuda's function `name`: from the global scope (an application linked
// against libcuda, or gpuslice's library preloaded), else from a libcuda the
// CUDA runtime loaded privately. Never loads libcuda itself.
void* FindCuda(const char* name) {
  if (void* fn = dlsym(RTLD_DEFAULT, name)) return fn;
  void* cuda = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
  if (cuda == nullptr) return nullptr;
  void* fn = dlsym(cuda, name);
  dlclose(cuda);  // our reference only: whoever loaded libcuda keeps it
  return fn;
}

// One libcuda function, found at its first call that finds it: libcuda may
// be loaded after the scheduler was made.
template <typename F>
class CudaFunction {
 public:
  explicit CudaFunction(const char* name) : name_(name) {}
  template <typename... Args>
  int operator()(Args... args) {
    void* fn = found_.load(std::memory_order_acquire);
    if (fn == nullptr && (fn = FindCuda(name_)) != nullptr) found_.store(fn, std::memory_order_release);
    return fn != nullptr ? reinterpret_cast<F>(fn)(args...) : kNotFound;
  }

 private:
  const char* const name_;
  std::atomic<void*> found_{nullptr};
};

class Library final : public StreamDriver {
 public:
  int CurrentContext(void** context) override { return ctx_get_current_(context); }
  int PriorityRange(int* least, int* greatest) override { return priority_range_(least, greatest); }
  int CreateStream(void** stream, int priority) override {
    return create_with_priority_(stream, kStreamNonBlocking, priority);
  }
  int Synchronize(void* stream) override { return synchronize_(stream); }

 private:
  CudaFunction<CtxGetCurrentFn> ctx_get_current_{"cuCtxGetCurrent"};
  CudaFunction<PriorityRangeFn> priority_range_{"cuCtxGetStreamPriorityRange"};
  CudaFunction<CreateWithPriorityFn> create_with_priority_{"cuStreamCreateWithPriority"};
  CudaFunction<SynchronizeFn> synchronize_{"cuStreamSynchronize"};
};

}  // namespace

StreamDriver* LibraryStreamDriver() {
  static StreamDriver* driver = new Library();  // never destroyed: workers may outlive statics
  return driver;
}

LevelStreams::LevelStreams(const LevelTable& levels, StreamDriver* driver) : driver_(driver) {
  const std::vector<Level>& all = levels.levels();  // highest first
  const int lc =
      static_cast<int>(std::count_if(all.begin(), all.end(), [](const Level& l) { return l.latency_critical; }));
  int rank = 0;
  for (const Level& level : all) priorities_.push_back(level.latency_critical ? -(lc - rank++) : 0);
}

void* LevelStreams::StreamFor(size_t level) {
  void* context = nullptr;
  if (driver_->CurrentContext(&context) != 0 || context == nullptr) return nullptr;
  port::MutexLock lock(&mu_);
  auto [it, made] = streams_.try_emplace({level, context}, nullptr);
  if (!made) return it->second;
  int least = 0, greatest = 0;
  int priority = priorities_[level];
  // CUDA's greatest priority is the numerically least.
  if (driver_->PriorityRange(&least, &greatest) == 0 && greatest <= least) {
    priority = std::clamp(priority, greatest, least);
  }
  void* stream = nullptr;
  if (driver_->CreateStream(&stream, priority) != 0) stream = nullptr;
  it->second = stream;  // a refusal is kept too: tasks of that level use the default stream
  return stream;
}

}  // namespace gpuslice::task
