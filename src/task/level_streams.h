// level_streams.h — one CUDA stream per task level, for the C++ scheduler's
// `cuda_streams` option (include/gpuslice/scheduler.h,
// gpuslice::current_task_stream()).
//
// Why: tasks of one process share one CUDA context, so the GPU's timeslices
// cannot part them, and kernels issued to one stream run in issue order. On
// streams of their own, latency-critical levels get higher stream priorities
// than best-effort ones, so the GPU starts a latency-critical kernel's thread
// blocks ahead of best-effort blocks still waiting for SMs (blocks already
// running finish). The Python package does the same for PyTorch
// (python/gpuslice/_streams.py), by the same rule: latency-critical levels
// in the table's order, highest first, get -N .. -1; best-effort levels 0,
// the least. A priority beyond the device's range is clamped to it.
//
// Streams are made on first use per (level, current context) and kept for
// the process's life, so a program that resets or destroys a context
// (cudaDeviceReset) must not use level streams after it: the stream kept for
// that context died with it. The driver is a seam (StreamDriver): the real one finds
// libcuda's functions with dlsym, so nothing links CUDA, and a process that
// never loaded libcuda gets no stream (its tasks use the default stream).
//
// Thread-safety: StreamFor and Synchronize may be called from any thread;
// one mutex guards the map of made streams (held while a stream is made).
#ifndef GPUSLICE_TASK_LEVEL_STREAMS_H_
#define GPUSLICE_TASK_LEVEL_STREAMS_H_

#include <map>
#include <utility>
#include <vector>

#include "port/mutex.h"
#include "task/task_levels.h"

namespace gpuslice::task {

// The CUDA driver calls LevelStreams needs; CUDA handles as void*. Each
// returns a CUresult (0: CUDA_SUCCESS).
class StreamDriver {
 public:
  virtual ~StreamDriver() = default;
  virtual int CurrentContext(void** context) = 0;
  virtual int PriorityRange(int* least, int* greatest) = 0;   // of the current context's device
  virtual int CreateStream(void** stream, int priority) = 0;  // non-blocking, in the current context
  virtual int Synchronize(void* stream) = 0;
};

// libcuda's, found with dlsym; process-wide, never destroyed.
StreamDriver* LibraryStreamDriver();

class LevelStreams {
 public:
  LevelStreams(const LevelTable& levels, StreamDriver* driver);

  // The stream priority of level `level` (an index in the table), before
  // clamping to a device's range.
  int PriorityOf(size_t level) const { return priorities_[level]; }

  // The stream of `level` in the calling thread's current context, made on
  // first use; nullptr when there is no current context or the driver
  // refuses (the task then runs on the default stream).
  void* StreamFor(size_t level) EXCLUDES(mu_);

  int Synchronize(void* stream) { return driver_->Synchronize(stream); }

 private:
  StreamDriver* const driver_;
  std::vector<int> priorities_;  // by level index
  port::Mutex mu_;
  std::map<std::pair<size_t, void*>, void*> streams_ GUARDED_BY(mu_);  // (level, context) -> stream
};

}  // namespace gpuslice::task

#endif  // GPUSLICE_TASK_LEVEL_STREAMS_H_
