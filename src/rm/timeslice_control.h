// timeslice_control.h — reads and sets a channel group's hardware timeslice
// through RM controls (NVA06C_CTRL_CMD_SET/GET_TIMESLICE) on the descriptor
// that allocated it.
//
// The parameter struct's size is checked by the driver (on GSP systems by
// the firmware, against its own build), and it has changed between driver
// versions. So the first call probes which size the running driver accepts,
// with a harmless GET, and every later call uses it. The answer is kept for
// the process's life (one driver per process).
//
// Thread-safe; no allocation; each call is one ioctl (measured 160–440 µs on
// an H200), so callers keep it off every hot path: the compute thread's
// timeslice pass (src/interposer/timeslice_applier.cc) and tests call it.
#ifndef GPUSLICE_RM_TIMESLICE_CONTROL_H_
#define GPUSLICE_RM_TIMESLICE_CONTROL_H_

#include <atomic>
#include <cstdint>

#include "rm/rm_ioctl.h"
#include "rm/tsg_registry.h"

namespace gpuslice::rm {

struct ControlResult {
  bool ok = false;
  uint32_t status = 0;  // RM status (nvstatuscodes.h) when the ioctl itself succeeded
  int error = 0;        // errno when the ioctl itself failed, else 0

  // One line for logs, e.g. "RM status 0x1b" or "ioctl: Operation not permitted".
  // Writes into `buf` (no allocation); returns buf.
  const char* Describe(char* buf, unsigned size) const;
};

class TimesliceControl {
 public:
  // Sizes tried, in order, when probing: the struct of today's headers
  // ({NvU64 timesliceUs}) first, then room for fields a newer driver may add.
  static constexpr uint32_t kCandidateSizes[] = {8, 16, 24, 32, 64};

  explicit TimesliceControl(RmIoctl* ioctl) : ioctl_(ioctl) {}

  ControlResult Set(const TsgRef& tsg, uint64_t timeslice_us);
  ControlResult Get(const TsgRef& tsg, uint64_t* timeslice_us);

  // The accepted parameter size, or 0 while unknown.
  uint32_t params_size() const { return params_size_.load(std::memory_order_acquire); }

 private:
  ControlResult Control(const TsgRef& tsg, uint32_t cmd, void* params, uint32_t size);
  // Finds the accepted size with GET on `tsg`; on failure returns why.
  ControlResult ProbeSize(const TsgRef& tsg);
  // The accepted size into *size, probed first while unknown.
  ControlResult KnownParamsSize(const TsgRef& tsg, uint32_t* size);

  RmIoctl* ioctl_;
  std::atomic<uint32_t> params_size_{0};
};

}  // namespace gpuslice::rm

#endif  // GPUSLICE_RM_TIMESLICE_CONTROL_H_
