// fake_rm_preload.cc — libfake_rm.so: the fake RM device (fake_rm_device.h)
// inside a real test process.
//
// LD_PRELOADed by the integration tests. It exports `ioctl`, so every
// library's dynamic ioctl import (the fake CUDA driver's among them) binds
// to it: ioctls on descriptors it opened (fake_rm_open) are served by the
// fake device; all others go to libc unchanged. gpuslice's own patching of
// the driver's ioctl import then sits in front of it, as in front of libc's
// on a real machine.
//
// Environment, read once:
//   FAKE_RM_PARAMS_SIZE   parameter size SET/GET_TIMESLICE accept (default 8)
//   FAKE_RM_REFUSE        RM status SET_TIMESLICE answers (default 0: accept)
//   FAKE_RM_FORGET_FIRST_SET  1: each channel group loses its first slice
//                         (Options::forget_first_set)
//   FAKE_RM_LOG           file to which each SET_TIMESLICE and GET_TIMESLICE
//                         appends one line: "set|get PID OBJECT US STATUS NS"
//                         (object and status in hex; US the value set or
//                         read; NS = CLOCK_MONOTONIC when the driver took it)
//   FAKE_RM_SHARED_DIR    the GPU's side of the channel groups, shared by
//                         every process that has it: each group's slice is a
//                         file there (tsg-PID-FD-CLIENT-OBJECT), and each
//                         control descriptor a marker (ctl-PID-FD). Another
//                         process (the daemon's slice audit) then reaches a
//                         process's groups as on a real machine: pidfd_getfd
//                         of its descriptor gives one that fstat calls
//                         NVIDIA's control device (195:255), and whose
//                         controls read and set those files.
//
// fake_rm_raw_ioctl() serves an ioctl on one of this process's descriptors
// without passing through the exported `ioctl`: what a tenant's raw system
// call does, which gpuslice's hook does not see.
#include <dlfcn.h>
#include <fcntl.h>
#include <sys/eventfd.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <utility>

#include "fake_rm_device.h"

namespace {

using gpuslice::rm::FakeRmDevice;

uint32_t EnvNumber(const char* name, uint32_t fallback) {
  const char* v = getenv(name);
  return v != nullptr && *v != '\0' ? static_cast<uint32_t>(strtoul(v, nullptr, 0)) : fallback;
}

FakeRmDevice& Device() {
  static FakeRmDevice* device = new FakeRmDevice(
      {EnvNumber("FAKE_RM_PARAMS_SIZE", gpuslice::rm::kTimesliceParamsSize), EnvNumber("FAKE_RM_REFUSE", 0),
       EnvNumber("FAKE_RM_FORGET_FIRST_SET", 0) != 0});
  return *device;
}

void LogSet(int fd, void* arg) {
  const char* path = getenv("FAKE_RM_LOG");
  if (path == nullptr) return;
  auto* c = static_cast<gpuslice::rm::Nvos54*>(arg);
  const bool set = c->cmd == gpuslice::rm::kCtrlSetTimeslice;
  if (!set && c->cmd != gpuslice::rm::kCtrlGetTimeslice) return;
  uint64_t us = 0;
  if (c->params != 0 && c->paramsSize >= sizeof us) us = *reinterpret_cast<const uint64_t*>(c->params);
  (void)fd;
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  char line[160];
  const int n = snprintf(line, sizeof line, "%s %d %x %llu %x %lld\n", set ? "set" : "get", getpid(), c->hObject,
                         static_cast<unsigned long long>(us), c->status,
                         static_cast<long long>(ts.tv_sec) * 1000000000LL + ts.tv_nsec);
  const int out = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
  if (out < 0) return;
  ssize_t w = write(out, line, static_cast<size_t>(n));
  (void)w;
  close(out);
}

// --- FAKE_RM_SHARED_DIR ---------------------------------------------------

namespace rm = gpuslice::rm;

const char* SharedDir() {
  static const char* dir = [] {
    const char* d = getenv("FAKE_RM_SHARED_DIR");
    return d != nullptr && *d != '\0' ? d : nullptr;
  }();
  return dir;
}

std::string GroupFile(int pid, int fd, rm::NvHandle client, rm::NvHandle object) {
  char name[96];
  snprintf(name, sizeof name, "/tsg-%d-%d-%x-%x", pid, fd, client, object);
  return SharedDir() + std::string(name);
}

std::string ControlMarker(int pid, int fd) {
  return SharedDir() + std::string("/ctl-") + std::to_string(pid) + "-" + std::to_string(fd);
}

void WriteSlice(const std::string& path, uint64_t us) {
  const std::string tmp = path + ".tmp";
  FILE* f = fopen(tmp.c_str(), "w");
  if (f == nullptr) return;
  fprintf(f, "%llu\n", static_cast<unsigned long long>(us));
  fclose(f);
  rename(tmp.c_str(), path.c_str());
}

bool ReadSlice(const std::string& path, uint64_t* us) {
  FILE* f = fopen(path.c_str(), "r");
  if (f == nullptr) return false;
  unsigned long long v = 0;
  const bool ok = fscanf(f, "%llu", &v) == 1;
  fclose(f);
  *us = v;
  return ok;
}

// This process's side, after the fake device served `request` on its own
// descriptor: the group files follow what it holds.
void Share(int fd, unsigned long request, void* arg) {
  if (SharedDir() == nullptr || rm::IoctlType(request) != rm::kIoctlMagic) return;
  const uint32_t nr = rm::IoctlNr(request), size = rm::IoctlSize(request);
  if (nr == rm::kEscRmAlloc && (size == sizeof(rm::Nvos64) || size == sizeof(rm::Nvos21))) {
    rm::NvHandle root, object;
    uint32_t klass, status;
    if (size == sizeof(rm::Nvos64)) {
      auto* a = static_cast<rm::Nvos64*>(arg);
      root = a->hRoot, object = a->hObjectNew, klass = a->hClass, status = a->status;
    } else {
      auto* a = static_cast<rm::Nvos21*>(arg);
      root = a->hRoot, object = a->hObjectNew, klass = a->hClass, status = a->status;
    }
    if (status == rm::kNvOk && klass == rm::kClassChannelGroup) {
      WriteSlice(GroupFile(getpid(), fd, root, object), Device().TimesliceOf(root, object));
    }
  } else if (nr == rm::kEscRmControl && size == sizeof(rm::Nvos54)) {
    auto* c = static_cast<rm::Nvos54*>(arg);
    if (c->status != rm::kNvOk || c->params == 0 || c->paramsSize < sizeof(uint64_t)) return;
    const std::string file = GroupFile(getpid(), fd, c->hClient, c->hObject);
    auto* us = reinterpret_cast<uint64_t*>(c->params);
    if (c->cmd == rm::kCtrlSetTimeslice) WriteSlice(file, *us);
    if (c->cmd == rm::kCtrlGetTimeslice) ReadSlice(file, us);  // another process may have set it
  }
}

// Another process's descriptor, taken with pidfd_getfd.
struct Remote {
  int pid;
  int fd;
};
// Only a process that took another's descriptor has any: every other
// process's close, fstat and ioctl see 0 and take no lock (a child forked
// while another thread held it must still be able to close).
std::atomic<int> g_remote_count{0};
std::mutex g_remote_mu;
std::map<int, Remote>& Remotes() {
  static auto* remotes = new std::map<int, Remote>;
  return *remotes;
}
bool RemoteOf(int fd, Remote* out) {
  if (g_remote_count.load(std::memory_order_acquire) == 0) return false;
  std::lock_guard<std::mutex> lock(g_remote_mu);
  auto it = Remotes().find(fd);
  if (it == Remotes().end()) return false;
  *out = it->second;
  return true;
}

int PidOfPidfd(int pidfd) {
  FILE* f = fopen(("/proc/self/fdinfo/" + std::to_string(pidfd)).c_str(), "r");
  if (f == nullptr) return -1;
  char line[128];
  int pid = -1;
  while (fgets(line, sizeof line, f) != nullptr) {
    if (sscanf(line, "Pid: %d", &pid) == 1) break;
  }
  fclose(f);
  return pid;
}

// SET/GET_TIMESLICE on another process's group, as RM takes them through a
// duplicate of its descriptor: the group must be that descriptor's.
int ServeRemote(const Remote& r, unsigned long request, void* arg) {
  if (rm::IoctlType(request) != rm::kIoctlMagic || rm::IoctlNr(request) != rm::kEscRmControl ||
      rm::IoctlSize(request) != sizeof(rm::Nvos54) || arg == nullptr) {
    errno = EINVAL;
    return -1;
  }
  auto* c = static_cast<rm::Nvos54*>(arg);
  const std::string file = GroupFile(r.pid, r.fd, c->hClient, c->hObject);
  uint64_t us = 0;
  if (c->cmd != rm::kCtrlSetTimeslice && c->cmd != rm::kCtrlGetTimeslice) {
    c->status = rm::kNvErrNotSupported;
  } else if (!ReadSlice(file, &us)) {
    c->status = rm::kNvErrInvalidObjectHandle;
  } else if (c->paramsSize != EnvNumber("FAKE_RM_PARAMS_SIZE", rm::kTimesliceParamsSize) || c->params == 0) {
    c->status = rm::kNvErrInvalidParamStruct;
  } else {
    c->status = rm::kNvOk;
    if (c->cmd == rm::kCtrlGetTimeslice) memcpy(reinterpret_cast<void*>(c->params), &us, sizeof us);
    if (c->cmd == rm::kCtrlSetTimeslice) {
      memcpy(&us, reinterpret_cast<const void*>(c->params), sizeof us);
      WriteSlice(file, us);
    }
  }
  LogSet(-1, arg);
  return 0;
}

}  // namespace

extern "C" __attribute__((visibility("default"))) int fake_rm_open() {
  const int fd = Device().OpenControl();
  if (fd >= 0 && SharedDir() != nullptr) WriteSlice(ControlMarker(getpid(), fd), 0);
  return fd;
}

extern "C" __attribute__((visibility("default"))) int fake_rm_raw_ioctl(int fd, unsigned long request, void* arg) {
  const int rc = Device().Ioctl(fd, request, arg);
  if (rc == 0) Share(fd, request, arg);
  if (rc == 0 && rm::IoctlNr(request) == rm::kEscRmControl) LogSet(fd, arg);
  return rc;
}

extern "C" __attribute__((visibility("default"))) int ioctl(int fd, unsigned long request, ...) {
  va_list ap;
  va_start(ap, request);
  void* arg = va_arg(ap, void*);
  va_end(ap);
  if (Device().Owns(fd)) return fake_rm_raw_ioctl(fd, request, arg);
  Remote remote;
  if (RemoteOf(fd, &remote)) return ServeRemote(remote, request, arg);
  using Fn = int (*)(int, unsigned long, ...);
  static Fn next = reinterpret_cast<Fn>(dlsym(RTLD_NEXT, "ioctl"));
  return next(fd, request, arg);
}

extern "C" __attribute__((visibility("default"))) int pidfd_getfd(int pidfd, int targetfd, unsigned int flags) {
  if (SharedDir() != nullptr) {
    const int pid = PidOfPidfd(pidfd);
    if (pid > 0 && access(ControlMarker(pid, targetfd).c_str(), F_OK) == 0) {
      const int fd = eventfd(0, EFD_CLOEXEC);
      if (fd >= 0) {
        std::lock_guard<std::mutex> lock(g_remote_mu);
        Remotes()[fd] = {pid, targetfd};
        g_remote_count.store(static_cast<int>(Remotes().size()), std::memory_order_release);
      }
      return fd;
    }
  }
  return static_cast<int>(syscall(SYS_pidfd_getfd, pidfd, targetfd, flags));
}

extern "C" __attribute__((visibility("default"))) int fstat(int fd, struct stat* st) {
  Remote remote;
  if (RemoteOf(fd, &remote)) {
    memset(st, 0, sizeof *st);
    st->st_mode = S_IFCHR | 0666;
    st->st_rdev = makedev(195, 255);
    return 0;
  }
  using Fn = int (*)(int, struct stat*);
  static Fn next = reinterpret_cast<Fn>(dlsym(RTLD_NEXT, "fstat"));
  return next(fd, st);
}

extern "C" __attribute__((visibility("default"))) int close(int fd) {
  if (g_remote_count.load(std::memory_order_acquire) != 0) {
    std::lock_guard<std::mutex> lock(g_remote_mu);
    Remotes().erase(fd);
    g_remote_count.store(static_cast<int>(Remotes().size()), std::memory_order_release);
  }
  using Fn = int (*)(int);
  static Fn next = reinterpret_cast<Fn>(dlsym(RTLD_NEXT, "close"));
  return next(fd);
}
