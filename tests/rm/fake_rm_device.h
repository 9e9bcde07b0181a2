// fake_rm_device.h — a fake NVIDIA RM control device, for CI.
//
// Models the part of /dev/nvidiactl that gpuslice's RM layer (src/rm) uses:
// clients and objects allocated with NV_ESC_RM_ALLOC (NVOS64 or NVOS21) and
// freed with NV_ESC_RM_FREE, and NV_ESC_RM_CONTROL's SET/GET_TIMESLICE on
// channel groups. Like the real driver, it rejects a control issued on a
// descriptor other than the one that allocated the client, and checks the
// control's parameter size against the one it was "built" with. It records
// every SET_TIMESLICE it receives.
//
// Used two ways: directly, as the rm::RmIoctl of unit tests; and inside real
// test processes through libfake_rm.so (fake_rm_preload.cc), whose exported
// ioctl serves the descriptors it opened, so the fake CUDA driver's ioctls
// reach it exactly as libcuda's reach the kernel.
//
// Thread-safe (one mutex); allocates. Test code only.
#ifndef GPUSLICE_TESTS_RM_FAKE_RM_DEVICE_H_
#define GPUSLICE_TESTS_RM_FAKE_RM_DEVICE_H_

#include <cstdint>
#include <map>
#include <mutex>
#include <set>
#include <utility>
#include <vector>

#include "rm/rm_abi.h"
#include "rm/rm_ioctl.h"

namespace gpuslice::rm {

class FakeRmDevice final : public RmIoctl {
 public:
  struct Options {
    uint32_t params_size = kTimesliceParamsSize;  // what SET/GET_TIMESLICE accept
    uint32_t refuse_status = kNvOk;               // non-zero: SET_TIMESLICE answers this
    // A channel group loses the first slice set on it: it is back at the
    // default by the next GET. On an H100 (driver 580) a slice set right
    // after a channel group was made read back as the default soon after,
    // and the GPU ran the default (docs/gpu-facts.md).
    bool forget_first_set = false;
  };
  struct SetCall {
    int fd;
    NvHandle client;
    NvHandle object;
    uint64_t timeslice_us;
    uint32_t params_size;
    uint32_t status;
  };
  static constexpr uint64_t kDefaultComputeSliceUs = 2048;  // gpu-facts.md: defaults read on an H200
  static constexpr uint64_t kDefaultCopySliceUs = 1024;

  FakeRmDevice() : FakeRmDevice(Options{}) {}
  explicit FakeRmDevice(Options options) : options_(options) {}

  // A new descriptor standing for an open /dev/nvidiactl (a real fd, an
  // eventfd, so it cannot collide with another file's number).
  int OpenControl();
  bool Owns(int fd) const;

  int Ioctl(int fd, unsigned long request, void* arg) override;

  std::vector<SetCall> set_calls() const;
  // The object's timeslice, or 0 if there is no such channel group.
  uint64_t TimesliceOf(NvHandle client, NvHandle object) const;
  size_t ObjectCount() const;

 private:
  struct Object {
    uint32_t klass;
    uint32_t engine_type;
    uint64_t timeslice_us;
    uint32_t sets = 0;
    bool forget_pending = false;
  };
  uint32_t Alloc(int fd, NvHandle root, NvHandle parent, NvHandle* object, uint32_t klass, uint64_t params,
                 uint32_t params_size);
  uint32_t Free(int fd, NvHandle root, NvHandle object);
  uint32_t Control(int fd, Nvos54* c);

  Options options_;
  mutable std::mutex mu_;
  std::set<int> fds_;
  std::map<NvHandle, int> clients_;  // client -> fd that allocated it
  std::map<std::pair<NvHandle, NvHandle>, Object> objects_;
  std::vector<SetCall> set_calls_;
  NvHandle next_client_ = 0xc1d00001;
};

}  // namespace gpuslice::rm

#endif  // GPUSLICE_TESTS_RM_FAKE_RM_DEVICE_H_
