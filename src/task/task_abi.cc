#include "task/task_abi.h"

#include <dlfcn.h>

#include <cstdio>

#include "gpuslice/gpuslice.h"

namespace gpuslice::task {

namespace {

using VoidFn = int (*)(void);
using HintFn = int (*)(unsigned int);
using TaskRecordFn = int (*)(const char*, unsigned long long, int);

template <typename Fn>
Fn Find(const char* name) {
  return reinterpret_cast<Fn>(dlsym(RTLD_DEFAULT, name));
}

class Library final : public TaskAbi {
 public:
  // All five or none: a library with some of them missing is not ours.
  Library()
      : span_begin_(Find<VoidFn>("gpuslice_span_begin")),
        span_end_(Find<VoidFn>("gpuslice_span_end")),
        hint_begin_(Find<VoidFn>("gpuslice_hint_begin")),
        hint_end_(Find<VoidFn>("gpuslice_hint_end")),
        hint_(Find<HintFn>("gpuslice_hint")),
        task_record_(Find<TaskRecordFn>("gpuslice_task_record")),
        loaded_(span_begin_ && span_end_ && hint_begin_ && hint_end_ && hint_) {}

  bool Loaded() const override { return loaded_; }
  int SpanBegin() override { return loaded_ ? span_begin_() : GPUSLICE_NOT_IN_VGPU; }
  int SpanEnd() override { return loaded_ ? span_end_() : GPUSLICE_NOT_IN_VGPU; }
  int HintBegin() override { return loaded_ ? hint_begin_() : GPUSLICE_NOT_IN_VGPU; }
  int HintEnd() override { return loaded_ ? hint_end_() : GPUSLICE_NOT_IN_VGPU; }
  int Hint(unsigned int usec) override { return loaded_ ? hint_(usec) : GPUSLICE_NOT_IN_VGPU; }
  int TaskRecord(const char* level, uint64_t latency_ns, int flags) override {
    if (!loaded_) return GPUSLICE_NOT_IN_VGPU;
    return task_record_ ? task_record_(level, latency_ns, flags) : kNoTaskRecord;
  }

 private:
  const VoidFn span_begin_, span_end_, hint_begin_, hint_end_;
  const HintFn hint_;
  const TaskRecordFn task_record_;  // optional: a library of an older gpuslice lacks it
  const bool loaded_;
};

}  // namespace

TaskAbi* LibraryAbi() {
  static Library* abi = new Library();  // never destroyed: workers may outlive statics
  return abi;
}

void Notices::Say(std::atomic<bool>& said, const char* message) {
  if (said.load(std::memory_order_relaxed) || said.exchange(true)) return;
  sink_(message);
}

void Notices::NoteLoaded(bool loaded) {
  if (loaded) return;
  Say(said_not_loaded_,
      "gpuslice: the gpuslice library is not loaded, so tasks run without its scheduling; "
      "start the program with `gpuslice run --priority lc -- ...` to give its latency-critical "
      "tasks priority on the GPU");
}

void Notices::NoteStatus(int status) {
  if (status == GPUSLICE_NOT_IN_VGPU) {
    Say(said_not_in_vgpu_,
        "gpuslice: this process is in no vGPU, so tasks run without gpuslice's scheduling; "
        "start it with `gpuslice run --priority lc -- ...`");
  } else if (status == kNoTaskRecord) {
    Say(said_no_task_record_,
        "gpuslice: the gpuslice library loaded here is older than the task API's metrics, so `gpuslice top` "
        "and /metrics do not show this process's tasks (metrics() does); run it with this gpuslice");
  } else if (status == GPUSLICE_NOT_LATENCY_CRITICAL) {
    Say(said_not_lc_,
        "gpuslice: this process's vGPU is best-effort, so latency-critical tasks are timed but "
        "hold no other work back; run it with `gpuslice run --priority lc`");
  }
}

Notices* ProcessNotices() {
  static Notices* notices = new Notices([](const std::string& line) {
    std::fprintf(stderr, "%s\n", line.c_str());
  });
  return notices;
}

}  // namespace gpuslice::task
