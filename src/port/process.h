// process.h — who a process is, and whether it is gone, behind an interface so
// that accounting tests can script deaths without killing anything.
//
// A pid alone is not an identity: pids are reused. A process is identified by
// (pid, start time in clock ticks since boot, pid-namespace inode). A reaper
// judges only processes of its own pid namespace; a pid from another
// namespace means nothing here.
//
// Thread-safe. IsGone() reads /proc, so it makes syscalls: slow paths only.
#ifndef GPUSLICE_PORT_PROCESS_H_
#define GPUSLICE_PORT_PROCESS_H_

#include <sys/types.h>

#include <cstdint>

namespace gpuslice::port {

struct ProcessIdentity {
  uint32_t pid = 0;
  uint64_t start_time = 0;
  uint64_t pid_namespace = 0;
};

class ProcessProbe {
 public:
  virtual ~ProcessProbe() = default;
  virtual ProcessIdentity Self() const = 0;
  // True only when the process is certainly gone (or its pid now belongs to a
  // newer process). Unknown, or another namespace, answers false.
  virtual bool IsGone(const ProcessIdentity& who) const = 0;
  // True only when no live process has `pid` in pid namespace
  // `pid_namespace` (0: the caller's own), known without its start time. A
  // reused pid reads as alive, so this errs towards "not gone". Used to judge
  // a ledger slot's interrupted reclaim (memory_ledger.h). The default knows
  // nothing and answers false.
  virtual bool PidIsGone(uint32_t pid, uint64_t pid_namespace) const {
    (void)pid;
    (void)pid_namespace;
    return false;
  }
};

// The real /proc-backed probe. Never destroyed (it is used from atexit paths).
const ProcessProbe& SystemProcessProbe();

// Reads /proc/<pid>/stat field 22; 0 when the process does not exist or has
// exited (a zombie, unless threads of it still run past its main thread's end).
uint64_t ProcessStartTime(pid_t pid);

}  // namespace gpuslice::port

#endif  // GPUSLICE_PORT_PROCESS_H_
