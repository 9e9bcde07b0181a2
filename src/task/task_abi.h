// task_abi.h — the task scheduler's way to gpuslice's C API (gpuslice.h): a
// seam, so that tests count the calls a fake receives.
//
// The real one (LibraryAbi) looks the functions up with dlsym(RTLD_DEFAULT)
// once, so an application runs with or without libgpuslice-cuda.so loaded:
// without it every call returns GPUSLICE_NOT_IN_VGPU and does nothing. A
// library from before gpuslice_task_record has the other five: TaskRecord
// then returns kNoTaskRecord.
//
// Notices says, once per kind, what the statuses mean for the application
// (no library; no vGPU; a best-effort vGPU, where spans hold nothing).
//
// Every function may be called from any thread; none blocks or allocates
// except Notices' first report of each kind.
#ifndef GPUSLICE_TASK_TASK_ABI_H_
#define GPUSLICE_TASK_TASK_ABI_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>

namespace gpuslice::task {

class TaskAbi {
 public:
  virtual ~TaskAbi() = default;
  virtual bool Loaded() const = 0;  // gpuslice's library is in the process
  virtual int SpanBegin() = 0;
  virtual int SpanEnd() = 0;
  virtual int HintBegin() = 0;
  virtual int HintEnd() = 0;
  virtual int Hint(unsigned int usec) = 0;
  // One finished task of `level` into the vGPU's metrics (gpuslice.h's
  // gpuslice_task_record; flags GPUSLICE_TASK_FAILED, GPUSLICE_TASK_SLO_MISS).
  virtual int TaskRecord(const char* level, uint64_t latency_ns, int flags) = 0;
};

// TaskRecord's status when the library has no gpuslice_task_record.
inline constexpr int kNoTaskRecord = 100;

// The C API found with dlsym(RTLD_DEFAULT); process-wide, never destroyed.
TaskAbi* LibraryAbi();

// Warnings about what gpuslice's statuses mean, each kind said once.
class Notices {
 public:
  using Sink = std::function<void(const std::string&)>;
  explicit Notices(Sink sink) : sink_(std::move(sink)) {}

  void NoteLoaded(bool loaded);  // false: "not loaded"
  void NoteStatus(int status);   // GPUSLICE_NOT_IN_VGPU, GPUSLICE_NOT_LATENCY_CRITICAL, kNoTaskRecord

 private:
  void Say(std::atomic<bool>& said, const char* message);

  Sink sink_;
  std::atomic<bool> said_not_loaded_{false};
  std::atomic<bool> said_not_in_vgpu_{false};
  std::atomic<bool> said_not_lc_{false};
  std::atomic<bool> said_no_task_record_{false};
};

// The process's notices, to stderr; never destroyed. Every Scheduler shares
// them, so a process says each thing once.
Notices* ProcessNotices();

}  // namespace gpuslice::task

#endif  // GPUSLICE_TASK_TASK_ABI_H_
