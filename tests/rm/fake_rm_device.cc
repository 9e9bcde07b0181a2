#include "fake_rm_device.h"

#include <sys/eventfd.h>

#include <cerrno>
#include <cstring>

namespace gpuslice::rm {

int FakeRmDevice::OpenControl() {
  const int fd = eventfd(0, EFD_CLOEXEC);
  if (fd >= 0) {
    std::lock_guard<std::mutex> lock(mu_);
    fds_.insert(fd);
  }
  return fd;
}

bool FakeRmDevice::Owns(int fd) const {
  std::lock_guard<std::mutex> lock(mu_);
  return fds_.count(fd) != 0;
}

int FakeRmDevice::Ioctl(int fd, unsigned long request, void* arg) {
  if (!Owns(fd) || IoctlType(request) != kIoctlMagic || arg == nullptr) {
    errno = ENOTTY;
    return -1;
  }
  const uint32_t nr = IoctlNr(request), size = IoctlSize(request);
  if (nr == kEscRmAlloc && size == sizeof(Nvos64)) {
    auto* a = static_cast<Nvos64*>(arg);
    a->status = Alloc(fd, a->hRoot, a->hObjectParent, &a->hObjectNew, a->hClass, a->pAllocParms, a->paramsSize);
  } else if (nr == kEscRmAlloc && size == sizeof(Nvos21)) {
    auto* a = static_cast<Nvos21*>(arg);
    a->status = Alloc(fd, a->hRoot, a->hObjectParent, &a->hObjectNew, a->hClass, a->pAllocParms, a->paramsSize);
  } else if (nr == kEscRmFree && size == sizeof(Nvos00)) {
    auto* a = static_cast<Nvos00*>(arg);
    a->status = Free(fd, a->hRoot, a->hObjectOld);
  } else if (nr == kEscRmControl && size == sizeof(Nvos54)) {
    auto* c = static_cast<Nvos54*>(arg);
    c->status = Control(fd, c);
  } else {
    errno = EINVAL;
    return -1;
  }
  return 0;
}

uint32_t FakeRmDevice::Alloc(int fd, NvHandle root, NvHandle /*parent*/, NvHandle* object, uint32_t klass,
                             uint64_t params, uint32_t params_size) {
  std::lock_guard<std::mutex> lock(mu_);
  if (klass == kClassRootClient) {
    NvHandle h = *object != 0 ? *object : next_client_++;
    if (clients_.count(h) != 0) return 0x34;  // NV_ERR_INVALID_OBJECT_NEW
    clients_[h] = fd;
    *object = h;
    return kNvOk;
  }
  auto c = clients_.find(root);
  if (c == clients_.end() || c->second != fd) return kNvErrInvalidClient;
  if (*object == 0 || objects_.count({root, *object}) != 0) return 0x34;
  Object o{klass, 0, 0};
  if (klass == kClassChannelGroup) {
    // RM knows the class's parameter struct; libcuda passes paramsSize 0.
    (void)params_size;
    if (params == 0) return kNvErrInvalidArgument;
    o.engine_type = reinterpret_cast<const uint32_t*>(params)[kChannelGroupEngineTypeWord];
    o.timeslice_us = o.engine_type == kEngineTypeGraphics ? kDefaultComputeSliceUs : kDefaultCopySliceUs;
  }
  objects_[{root, *object}] = o;
  return kNvOk;
}

uint32_t FakeRmDevice::Free(int fd, NvHandle root, NvHandle object) {
  std::lock_guard<std::mutex> lock(mu_);
  auto c = clients_.find(root);
  if (c == clients_.end() || c->second != fd) return kNvErrInvalidClient;
  if (object == root) {
    for (auto it = objects_.begin(); it != objects_.end();) {
      it = it->first.first == root ? objects_.erase(it) : std::next(it);
    }
    clients_.erase(c);
    return kNvOk;
  }
  return objects_.erase({root, object}) != 0 ? kNvOk : kNvErrInvalidObjectHandle;
}

uint32_t FakeRmDevice::Control(int fd, Nvos54* c) {
  std::lock_guard<std::mutex> lock(mu_);
  auto client = clients_.find(c->hClient);
  // The real driver accepts controls only on the descriptor that made the client.
  if (client == clients_.end() || client->second != fd) return kNvErrInvalidClient;
  auto o = objects_.find({c->hClient, c->hObject});
  if (o == objects_.end() || o->second.klass != kClassChannelGroup) return kNvErrInvalidObjectHandle;
  if (c->cmd != kCtrlSetTimeslice && c->cmd != kCtrlGetTimeslice) return kNvErrNotSupported;
  uint32_t status = kNvOk;
  uint64_t value = 0;
  if (c->paramsSize != options_.params_size || c->params == 0) {
    status = kNvErrInvalidParamStruct;
  } else if (c->cmd == kCtrlGetTimeslice) {
    Object& tsg = o->second;
    if (tsg.forget_pending) {
      tsg.forget_pending = false;
      tsg.timeslice_us = tsg.engine_type == kEngineTypeGraphics ? kDefaultComputeSliceUs : kDefaultCopySliceUs;
    }
    memcpy(reinterpret_cast<void*>(c->params), &tsg.timeslice_us, sizeof(uint64_t));
  } else {
    memcpy(&value, reinterpret_cast<const void*>(c->params), sizeof value);
    if (options_.refuse_status != kNvOk) {
      status = options_.refuse_status;
    } else {
      o->second.timeslice_us = value;
      o->second.forget_pending = options_.forget_first_set && o->second.sets++ == 0;
    }
  }
  if (c->cmd == kCtrlSetTimeslice) set_calls_.push_back({fd, c->hClient, c->hObject, value, c->paramsSize, status});
  return status;
}

std::vector<FakeRmDevice::SetCall> FakeRmDevice::set_calls() const {
  std::lock_guard<std::mutex> lock(mu_);
  return set_calls_;
}

uint64_t FakeRmDevice::TimesliceOf(NvHandle client, NvHandle object) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto o = objects_.find({client, object});
  return o == objects_.end() || o->second.klass != kClassChannelGroup ? 0 : o->second.timeslice_us;
}

size_t FakeRmDevice::ObjectCount() const {
  std::lock_guard<std::mutex> lock(mu_);
  return objects_.size();
}

}  // namespace gpuslice::rm
