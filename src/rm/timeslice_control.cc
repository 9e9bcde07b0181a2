#include "rm/timeslice_control.h"

#include <cerrno>
#include <cstdio>
#include <cstring>

namespace gpuslice::rm {
namespace {

constexpr uint32_t kMaxParamsSize = 64;

// A status saying "wrong parameter size", as opposed to a refusal for
// another reason (permissions, a dead object), which no other size fixes.
bool IsSizeComplaint(uint32_t status) {
  return status == kNvErrInvalidParamStruct || status == kNvErrInvalidArgument;
}

}  // namespace

const char* ControlResult::Describe(char* buf, unsigned size) const {
  if (ok) snprintf(buf, size, "ok");
  else if (error != 0) snprintf(buf, size, "ioctl failed: %s", strerror(error));
  else snprintf(buf, size, "RM status 0x%x", status);
  return buf;
}

ControlResult TimesliceControl::Control(const TsgRef& tsg, uint32_t cmd, void* params, uint32_t size) {
  Nvos54 c{};
  c.hClient = tsg.client;
  c.hObject = tsg.handle;
  c.cmd = cmd;
  c.params = reinterpret_cast<uint64_t>(params);
  c.paramsSize = size;
  ControlResult r;
  int rc;
  do {
    rc = ioctl_->Ioctl(tsg.fd, IoctlRequest(kEscRmControl, sizeof c), &c);
  } while (rc != 0 && errno == EINTR);
  if (rc != 0) {
    r.error = errno;
    return r;
  }
  r.status = c.status;
  r.ok = c.status == kNvOk;
  return r;
}

ControlResult TimesliceControl::ProbeSize(const TsgRef& tsg) {
  ControlResult last;
  for (uint32_t size : kCandidateSizes) {
    alignas(8) uint8_t params[kMaxParamsSize] = {};
    last = Control(tsg, kCtrlGetTimeslice, params, size);
    if (last.ok) {
      params_size_.store(size, std::memory_order_release);
      return last;
    }
    if (last.error != 0 || !IsSizeComplaint(last.status)) return last;
  }
  return last;
}

ControlResult TimesliceControl::KnownParamsSize(const TsgRef& tsg, uint32_t* size) {
  *size = params_size();
  if (*size != 0) return ControlResult{true, 0};
  ControlResult probe = ProbeSize(tsg);
  *size = params_size();
  return probe;
}

ControlResult TimesliceControl::Get(const TsgRef& tsg, uint64_t* timeslice_us) {
  uint32_t size = 0;
  if (ControlResult known = KnownParamsSize(tsg, &size); !known.ok) return known;
  alignas(8) uint8_t params[kMaxParamsSize] = {};
  ControlResult r = Control(tsg, kCtrlGetTimeslice, params, size);
  if (r.ok) memcpy(timeslice_us, params, sizeof *timeslice_us);  // timesliceUs is the first field
  return r;
}

ControlResult TimesliceControl::Set(const TsgRef& tsg, uint64_t timeslice_us) {
  uint32_t size = 0;
  if (ControlResult known = KnownParamsSize(tsg, &size); !known.ok) return known;
  alignas(8) uint8_t params[kMaxParamsSize] = {};
  memcpy(params, &timeslice_us, sizeof timeslice_us);
  return Control(tsg, kCtrlSetTimeslice, params, size);
}

}  // namespace gpuslice::rm
