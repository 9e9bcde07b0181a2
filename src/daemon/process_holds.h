// process_holds.h — the one owner of which tenant processes the daemon
// holds stopped, and why. Two kinds of stop reach a process:
//   - an audit's deny (the memory audit, the slice audit): SIGSTOP until the
//     process ends or an operator continues it;
//   - the compute-cap throttle's duty cycle (cap_throttle.h): SIGSTOP and
//     SIGCONT in every period.
// Each user gets its own face of ProcessActions. A throttle's SIGCONT to a
// process an audit denied is not sent: the throttle would otherwise undo
// the deny within one period, and a tenant over its memory limit that also
// escapes its compute cap would run on. A denied pid is remembered with its
// start time, so a reused pid is a new process, never held for the old.
// The denied are also written to a file of the state directory whenever they
// change, and a daemon that starts reads them back: the leftovers of a
// throttle that died with its daemon are continued (cap_throttle.h,
// ContinueLeftovers) through the throttle's face, so a deny survives a
// daemon restart.
//
// Thread-safe: every method, from any thread (the audits' housekeeping
// thread and the throttle's own).
#ifndef GPUSLICE_DAEMON_PROCESS_HOLDS_H_
#define GPUSLICE_DAEMON_PROCESS_HOLDS_H_

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>

#include "audit/memory_audit.h"
#include "port/mutex.h"

namespace gpuslice::daemon {

class ProcessHolds {
 public:
  using StartTicks = std::function<std::optional<uint64_t>(uint32_t pid)>;
  // `start_ticks`: a process's identity with its pid (cap_throttle.h,
  // ProcessStartTicks); nullopt once it is gone. `denied_path`: where the
  // denied are kept across restarts ("" = nowhere); those in it that are
  // still the same process are denied from the start.
  ProcessHolds(audit::ProcessActions* system, StartTicks start_ticks, std::string denied_path = "");
  ProcessHolds(const ProcessHolds&) = delete;
  ProcessHolds& operator=(const ProcessHolds&) = delete;

  // For the audits: Stop denies the process (it stays stopped), Continue
  // lifts a deny, Kill kills.
  audit::ProcessActions* for_audits() { return &audits_; }
  // For the throttle: Stop and Continue pass through, except that a denied
  // process is never continued (Continue returns false).
  audit::ProcessActions* for_throttle() { return &throttle_; }

  // Whether `pid`, as the process it is now, is denied.
  bool Denied(uint32_t pid) const;

 private:
  // One user's view: an audit's (`denies`: its stops are denies) or the
  // throttle's.
  class Face final : public audit::ProcessActions {
   public:
    Face(ProcessHolds* holds, bool denies) : holds_(holds), denies_(denies) {}
    bool Stop(uint32_t pid) override;
    bool Continue(uint32_t pid) override;
    bool Kill(uint32_t pid) override { return holds_->system_->Kill(pid); }

   private:
    ProcessHolds* const holds_;
    const bool denies_;
  };

  // Writes denied_ to denied_path_ (the caller holds mu_).
  void SaveLocked() const REQUIRES(mu_);

  audit::ProcessActions* const system_;
  const StartTicks start_ticks_;
  const std::string denied_path_;
  Face audits_{this, /*denies=*/true};
  Face throttle_{this, /*denies=*/false};
  mutable port::Mutex mu_;
  // Denied pids and their start times; pids that ended are dropped as they are looked up.
  mutable std::map<uint32_t, uint64_t> denied_ GUARDED_BY(mu_);
};

}  // namespace gpuslice::daemon

#endif  // GPUSLICE_DAEMON_PROCESS_HOLDS_H_
