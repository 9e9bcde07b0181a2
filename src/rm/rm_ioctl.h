// rm_ioctl.h — the seam between gpuslice's RM control layer and the kernel.
//
// Everything in src/rm talks to the NVIDIA kernel driver through an RmIoctl:
// in the library it is SystemRmIoctl (the ioctl that libcuda itself would
// have called, captured when its import was patched, ioctl_hook.h); in tests
// it is the fake RM device (tests/rm/fake_rm_device.h), which models the few
// escapes gpuslice uses and records every control it receives.
//
// Implementations must be callable from any thread, concurrently, and must
// not allocate: Ioctl is called from inside libcuda's own ioctls.
#ifndef GPUSLICE_RM_RM_IOCTL_H_
#define GPUSLICE_RM_RM_IOCTL_H_

namespace gpuslice::rm {

class RmIoctl {
 public:
  virtual ~RmIoctl() = default;
  // ioctl(2): returns 0 or -1 with errno set.
  virtual int Ioctl(int fd, unsigned long request, void* arg) = 0;
};

// Calls a plain ioctl function (libc's, or whatever libcuda's import resolved
// to); constexpr-constructible so a global needs no initialiser at load time.
class SystemRmIoctl final : public RmIoctl {
 public:
  using Fn = int (*)(int, unsigned long, ...);
  constexpr explicit SystemRmIoctl(Fn fn) : fn_(fn) {}
  int Ioctl(int fd, unsigned long request, void* arg) override { return fn_(fd, request, arg); }

 private:
  Fn fn_;
};

}  // namespace gpuslice::rm

#endif  // GPUSLICE_RM_RM_IOCTL_H_
