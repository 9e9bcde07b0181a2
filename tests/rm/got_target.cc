// A shared object that calls ioctl through its dynamic import, like libcuda;
// got_patch_test.cc rewrites that import.
#include <sys/ioctl.h>

extern "C" __attribute__((visibility("default"))) int got_target_call(int fd, unsigned long request, void* arg) {
  return ioctl(fd, request, arg);
}
