#include "port/process.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace gpuslice::port {
namespace {

uint64_t PidNamespaceInode() {
  struct stat st;
  if (stat("/proc/self/ns/pid", &st) != 0) return 0;
  return static_cast<uint64_t>(st.st_ino);
}

class ProcfsProbe final : public ProcessProbe {
 public:
  ProcessIdentity Self() const override {
    ProcessIdentity self;
    self.pid = static_cast<uint32_t>(getpid());
    self.start_time = ProcessStartTime(getpid());
    self.pid_namespace = PidNamespaceInode();
    return self;
  }

  bool IsGone(const ProcessIdentity& who) const override {
    if (who.pid == 0) return false;
    if (who.pid_namespace != 0 && who.pid_namespace != PidNamespaceInode()) return false;
    const uint64_t now = ProcessStartTime(static_cast<pid_t>(who.pid));
    // No such process, or the pid was reused by a process that started later.
    return now == 0 || now != who.start_time;
  }

  bool PidIsGone(uint32_t pid, uint64_t pid_namespace) const override {
    if (pid == 0) return false;
    if (pid_namespace != 0 && pid_namespace != PidNamespaceInode()) return false;
    return ProcessStartTime(static_cast<pid_t>(pid)) == 0;  // none, or a zombie
  }
};

// Whether threads of `pid` other than its main one still run: its status's
// "Threads:" counts the main thread until the whole process is gone (2 for
// a zombie main thread beside one running thread, 1 for a plain zombie).
bool OtherThreadsRun(pid_t pid) {
  char path[64];
  snprintf(path, sizeof path, "/proc/%d/status", static_cast<int>(pid));
  const int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  char buf[4096];
  const ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (n <= 0) return false;
  buf[n] = '\0';
  const char* threads = strstr(buf, "\nThreads:");
  return threads != nullptr && strtol(threads + 9, nullptr, 10) > 1;
}

}  // namespace

uint64_t ProcessStartTime(pid_t pid) {
  char path[64];
  snprintf(path, sizeof path, "/proc/%d/stat", static_cast<int>(pid));
  const int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  char buf[1024];
  const ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (n <= 0) return 0;
  buf[n] = '\0';
  // The command name (field 2) may contain spaces and parentheses: fields
  // after it are counted from the last ')'.
  const char* p = strrchr(buf, ')');
  if (p == nullptr) return 0;
  // Field 3 follows ") "; field 22 is 19 fields further on.
  for (int field = 2; field < 22 && p != nullptr; ++field) p = strchr(p + 1, ' ');
  if (p == nullptr) return 0;
  // A zombie has exited: its memory is gone and its slot may be reclaimed.
  // Unless only its main thread has (pthread_exit): the process reads as a
  // zombie while its other threads run on, with its GPU memory.
  const char* state = strrchr(buf, ')') + 2;
  if (*state == 'X' || (*state == 'Z' && !OtherThreadsRun(pid))) return 0;
  return strtoull(p + 1, nullptr, 10);
}

const ProcessProbe& SystemProcessProbe() {
  static const ProcfsProbe* probe = new ProcfsProbe();  // never destroyed
  return *probe;
}

}  // namespace gpuslice::port
