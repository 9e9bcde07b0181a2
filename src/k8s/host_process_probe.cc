#include "k8s/host_process_probe.h"

#include <dirent.h>
#include <unistd.h>

#include <cctype>
#include <charconv>
#include <cstring>

namespace gpuslice::k8s {

void HostProcessProbe::Refresh() {
  live_namespaces_.clear();
  refreshed_ = false;
  DIR* d = opendir(proc_root_.c_str());
  if (d == nullptr) return;
  while (dirent* e = readdir(d)) {
    if (!isdigit(static_cast<unsigned char>(e->d_name[0]))) continue;
    const std::string link = proc_root_ + "/" + e->d_name + "/ns/pid";
    char target[128];
    const ssize_t n = readlink(link.c_str(), target, sizeof target - 1);
    if (n <= 0) continue;
    target[n] = '\0';
    // "pid:[4026531836]"
    const char* open = strchr(target, '[');
    if (open == nullptr) continue;
    uint64_t inode = 0;
    const auto [end, ec] = std::from_chars(open + 1, target + n, inode);
    if (ec == std::errc() && *end == ']') live_namespaces_.insert(inode);
  }
  closedir(d);
  refreshed_ = !live_namespaces_.empty();
}

port::ProcessIdentity HostProcessProbe::Self() const { return port::SystemProcessProbe().Self(); }

bool HostProcessProbe::IsGone(const port::ProcessIdentity& who) const {
  if (who.pid_namespace == 0 || who.pid_namespace == Self().pid_namespace) {
    return port::SystemProcessProbe().IsGone(who);
  }
  // Without a usable snapshot nothing can be told: say "not gone".
  return refreshed_ && live_namespaces_.count(who.pid_namespace) == 0;
}

}  // namespace gpuslice::k8s
