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
#include <dlfcn.h>
#include <fcntl.h>
#include <time.h>
#include <unistd.h>

#include <cstdarg>
#include <cstdio>
#include <cstdlib>

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

}  // namespace

extern "C" __attribute__((visibility("default"))) int fake_rm_open() { return Device().OpenControl(); }

extern "C" __attribute__((visibility("default"))) int ioctl(int fd, unsigned long request, ...) {
  va_list ap;
  va_start(ap, request);
  void* arg = va_arg(ap, void*);
  va_end(ap);
  if (Device().Owns(fd)) {
    const int rc = Device().Ioctl(fd, request, arg);
    if (rc == 0 && gpuslice::rm::IoctlNr(request) == gpuslice::rm::kEscRmControl) LogSet(fd, arg);
    return rc;
  }
  using Fn = int (*)(int, unsigned long, ...);
  static Fn next = reinterpret_cast<Fn>(dlsym(RTLD_NEXT, "ioctl"));
  return next(fd, request, arg);
}
