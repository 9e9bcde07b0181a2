// recording_process_actions.h — a ProcessActions for tests: records which
// pids were stopped, continued and killed, in order, and signals nothing.
//
// Test-only; not thread-safe unless the caller serialises (CapThrottle's
// tests drive its cycle from the test's own thread).
#ifndef GPUSLICE_AUDIT_RECORDING_PROCESS_ACTIONS_H_
#define GPUSLICE_AUDIT_RECORDING_PROCESS_ACTIONS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "audit/memory_audit.h"

namespace gpuslice::audit {

class RecordingProcessActions final : public ProcessActions {
 public:
  bool Stop(uint32_t pid) override {
    stopped.push_back(pid);
    log.push_back("stop " + std::to_string(pid));
    return true;
  }
  bool Continue(uint32_t pid) override {
    continued.push_back(pid);
    log.push_back("cont " + std::to_string(pid));
    return true;
  }
  bool Kill(uint32_t pid) override {
    killed.push_back(pid);
    log.push_back("kill " + std::to_string(pid));
    return true;
  }
  std::vector<uint32_t> stopped, continued, killed;
  std::vector<std::string> log;  // every call, in order
};

}  // namespace gpuslice::audit

#endif  // GPUSLICE_AUDIT_RECORDING_PROCESS_ACTIONS_H_
