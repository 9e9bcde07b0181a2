// cap_action.h — what the daemon does to a vGPU found over its compute cap
// (daemon/cap_audit.h says how it is found): audit.over_cap in the daemon's
// configuration.
//
// Pure; any thread.
#ifndef GPUSLICE_AUDIT_CAP_ACTION_H_
#define GPUSLICE_AUDIT_CAP_ACTION_H_

#include <string>

#include "core/status.h"

namespace gpuslice::audit {

enum class CapAction {
  kReport,    // a log line and a count
  kThrottle,  // its processes held to a duty cycle from outside (daemon/cap_throttle.h)
  kKill,      // its processes on that GPU killed
};

inline StatusOr<CapAction> ParseCapAction(const std::string& text) {
  if (text == "report") return CapAction::kReport;
  if (text == "throttle") return CapAction::kThrottle;
  if (text == "kill") return CapAction::kKill;
  return Status::Error("'" + text +
                       "' is not an action on a vGPU over its compute cap; write report, throttle or kill");
}

inline const char* CapActionName(CapAction action) {
  switch (action) {
    case CapAction::kReport:
      return "report";
    case CapAction::kThrottle:
      return "throttle";
    case CapAction::kKill:
      return "kill";
  }
  return "?";
}

}  // namespace gpuslice::audit

#endif  // GPUSLICE_AUDIT_CAP_ACTION_H_
