// cap_throttle.h — holds processes to a duty cycle from outside them: in
// every period each target's processes run for `duty` of it and are stopped
// (SIGSTOP) for the rest, then continued (SIGCONT). The actuator of the
// compute-cap audit (cap_audit.h), for a capped vGPU whose own library does
// not hold its cap.
//
// A stopped process launches nothing, so once the work it queued has run,
// its GPU time follows its duty. Work queued deeper than a period is not
// held back (the audit says so); the GPU's own slices still bound what it
// takes from a busy neighbour.
//
// A tenant can send its own processes SIGCONT from a process of its own
// that is not on the GPU. A stopped process found running at the end of its
// stop window with no SIGSTOP pending (a SIGCONT discards one), in
// kTamperPeriods periods in a row, is handed to the audit (TakeTampered),
// which kills it. One that has not yet taken its SIGSTOP (not scheduled
// since: a CPU-throttled container; or inside a long system call) still has
// it pending, and is not tampering.
//
// A process must never stay stopped by gpuslice's own failure. The
// destructor continues every target; and the stopped pids, each with its
// start time (so a reused pid is never signalled), are written to
// `leftovers_path` whenever the targets change, for ContinueLeftovers to
// continue what a daemon that died mid-period left stopped.
//
// Thread-safe: Set and Clear from any thread; the throttle's own thread
// signals. Allocates in Set/Clear only.
#ifndef GPUSLICE_DAEMON_CAP_THROTTLE_H_
#define GPUSLICE_DAEMON_CAP_THROTTLE_H_

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "audit/memory_audit.h"
#include "port/mutex.h"

namespace gpuslice::daemon {

// A process's start time (/proc/PID/stat field 22, clock ticks since boot),
// or nullopt when it is gone: with its pid, the process's identity.
std::optional<uint64_t> ProcessStartTicks(uint32_t pid);

// The processes a file of "PID START_TICKS" lines names that are still those
// processes (`start_ticks` of each pid as written; a pid reused since is
// another's), by pid. A missing file names none.
std::map<uint32_t, uint64_t> SameProcessesIn(const std::string& path,
                                             const std::function<std::optional<uint64_t>(uint32_t)>& start_ticks);
// Whether a process is stopped by a signal (state T or t), has a SIGSTOP
// pending, or is gone: anything but running after a SIGCONT.
bool ProcessStoppedOrGone(uint32_t pid);

class CapThrottle {
 public:
  struct Target {
    std::vector<uint32_t> pids;
    double duty = 1.0;  // the fraction of each period they run, (0, 1]
  };
  using StartTicks = std::function<std::optional<uint64_t>(uint32_t pid)>;
  using StoppedOrGone = std::function<bool(uint32_t pid)>;
  static constexpr int kTamperPeriods = 5;

  // `run_thread` false: nothing cycles until the caller calls Cycle (tests).
  CapThrottle(audit::ProcessActions* actions, std::string leftovers_path, uint64_t period_ns = 100'000'000,
              bool run_thread = true, StartTicks start_ticks = ProcessStartTicks,
              StoppedOrGone stopped_or_gone = ProcessStoppedOrGone);
  ~CapThrottle();
  CapThrottle(const CapThrottle&) = delete;
  CapThrottle& operator=(const CapThrottle&) = delete;

  // Starts or changes the throttle named `key` (a duty of 1 or more runs its
  // processes unstopped); a pid it no longer names is continued.
  void Set(const std::string& key, Target target);
  // Ends it; its processes are continued.
  void Clear(const std::string& key);
  std::map<std::string, Target> targets() const;
  // Processes continued by someone else while stopped, in kTamperPeriods
  // periods in a row, since the last call.
  std::vector<uint32_t> TakeTampered();

  // One period: continue every target's processes, then stop each one's at
  // its duty's end. `wait_until(offset_ns)` waits until that far into the
  // period and returns false when the throttle is ending (the period is cut
  // short, everything continued).
  void Cycle(const std::function<bool(uint64_t offset_ns)>& wait_until);

  // Continues every process a throttle left stopped in `path` (one that is
  // still the same process), then removes the file. Returns how many.
  static int ContinueLeftovers(const std::string& path, audit::ProcessActions* actions,
                               const StartTicks& start_ticks = ProcessStartTicks);

 private:
  void Loop();
  void ContinueAll(const std::vector<uint32_t>& pids);
  void WriteLeftoversLocked() REQUIRES(mu_);

  audit::ProcessActions* const actions_;
  const std::string leftovers_path_;
  const uint64_t period_ns_;
  const StartTicks start_ticks_;
  const StoppedOrGone stopped_or_gone_;
  mutable port::Mutex mu_;
  port::CondVar cv_;
  std::map<std::string, Target> targets_ GUARDED_BY(mu_);
  bool stopping_ GUARDED_BY(mu_) = false;
  std::vector<uint32_t> tampered_ GUARDED_BY(mu_);
  // What this period stopped: Cycle's caller's only (the thread, or a test).
  std::vector<uint32_t> stopped_;
  std::map<uint32_t, int> running_when_stopped_;  // pid -> periods in a row (Cycle's caller's)
  std::thread thread_;
};

}  // namespace gpuslice::daemon

#endif  // GPUSLICE_DAEMON_CAP_THROTTLE_H_
