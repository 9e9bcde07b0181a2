// libexit_tail.so: a teardown that runs after every exit handler of the
// gpuslice library, as the driver's own does (libcuda frees a process's
// memory in its teardown, or the kernel does when it closes the process's
// descriptors, both after the library's last handler).
//
// Preloaded after libgpuslice-cuda.so (`gpuslice run` puts its library
// first in LD_PRELOAD), its constructor runs first, so the exit handler it
// registers runs last. With EXIT_TAIL_MS set, that handler sleeps that long,
// the process still holding whatever GPU memory it has not freed.
#include <stdlib.h>
#include <time.h>

namespace {
long g_tail_ms = 0;

void SleepAtTheEnd() {
  timespec ts{g_tail_ms / 1000, (g_tail_ms % 1000) * 1000000};
  nanosleep(&ts, nullptr);
}

__attribute__((constructor)) void RegisterFirst() {
  const char* ms = getenv("EXIT_TAIL_MS");
  if (ms == nullptr || (g_tail_ms = atol(ms)) <= 0) return;
  atexit(&SleepAtTheEnd);
}
}  // namespace
