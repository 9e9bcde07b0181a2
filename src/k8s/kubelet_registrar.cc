#include "k8s/kubelet_registrar.h"

#include <poll.h>
#include <spdlog/spdlog.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>

#include "k8s/names.h"
#include "k8s/plugin_server.h"

namespace gpuslice::k8s {
namespace {

using Clock = std::chrono::steady_clock;
constexpr std::chrono::milliseconds kRegisterTimeout{5000};
constexpr std::chrono::milliseconds kRetryInterval{1000};

uint64_t InodeOf(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 ? st.st_ino : 0;
}

struct ResourceState {
  std::unique_ptr<PluginServer> server;
  bool registered = false;
  uint64_t kubelet_inode = 0;  // the kubelet.sock it registered with
  Clock::time_point retry_at{};
};

}  // namespace

KubeletRegistrar::KubeletRegistrar(std::string plugin_dir, std::vector<Resource> resources, ResourceManager* manager,
                                   AllocationService* allocations)
    : plugin_dir_(std::move(plugin_dir)),
      resources_(std::move(resources)),
      manager_(manager),
      allocations_(allocations) {}

void KubeletRegistrar::Run(const std::atomic<bool>& stop) {
  std::error_code ec;
  std::filesystem::create_directories(plugin_dir_, ec);
  const std::string kubelet_socket = plugin_dir_ + "/" + kKubeletSocketName;
  const int inotify = inotify_init1(IN_CLOEXEC | IN_NONBLOCK);
  int watch = -1;
  std::map<Resource, ResourceState> states;
  for (Resource r : resources_) states[r];

  while (!stop.load()) {
    if (inotify >= 0 && watch < 0) {
      watch = inotify_add_watch(inotify, plugin_dir_.c_str(),
                                IN_CREATE | IN_DELETE | IN_MOVED_TO | IN_MOVED_FROM | IN_DELETE_SELF);
    }
    const uint64_t kubelet_inode = InodeOf(kubelet_socket);
    for (auto& [resource, st] : states) {
      const std::string socket = plugin_dir_ + "/" + PluginSocketName(resource);
      if (st.server == nullptr || InodeOf(socket) != st.server->socket_inode()) {
        if (st.server != nullptr) {
          spdlog::info("{} was removed (kubelet restart?); serving it again", socket);
        }
        st.server.reset();
        auto server = PluginServer::Start(resource, socket, manager_, allocations_);
        if (!server.ok()) {
          spdlog::error("{}", server.status().message());
          continue;
        }
        st.server = std::move(*server);
        st.registered = false;
      }
      if (kubelet_inode == 0) {
        st.registered = false;
        continue;
      }
      if (st.registered && st.kubelet_inode == kubelet_inode) continue;
      if (Clock::now() < st.retry_at) continue;
      Status s = RegisterWithKubelet(kubelet_socket, resource, kRegisterTimeout);
      if (s.ok()) {
        st.registered = true;
        st.kubelet_inode = kubelet_inode;
        registrations_.fetch_add(1);
        spdlog::info("registered {} with the kubelet", ResourceName(resource));
      } else {
        st.registered = false;
        st.retry_at = Clock::now() + kRetryInterval;
        spdlog::warn("{}; retrying", s.message());
      }
    }

    // Sleep until the directory changes, a retry is due, or a second passes.
    pollfd p = {inotify, POLLIN, 0};
    const int n = poll(&p, inotify >= 0 ? 1 : 0, static_cast<int>(kRetryInterval.count()));
    if (n > 0) {
      alignas(inotify_event) char buf[4096];
      ssize_t len;
      while ((len = read(inotify, buf, sizeof buf)) > 0) {
        for (char* at = buf; at < buf + len;) {
          const auto* event = reinterpret_cast<const inotify_event*>(at);
          if ((event->mask & (IN_CREATE | IN_MOVED_TO)) && event->len > 0 &&
              strcmp(event->name, kKubeletSocketName) == 0) {
            // A new kubelet.sock is a new kubelet, even if the inode number
            // happens to be reused.
            for (auto& [resource, st] : states) st.registered = false;
          }
          if (event->mask & (IN_DELETE_SELF | IN_IGNORED)) watch = -1;
          at += sizeof(inotify_event) + event->len;
        }
      }
    }
  }
  for (auto& [resource, st] : states) st.server.reset();
  if (inotify >= 0) close(inotify);
}

}  // namespace gpuslice::k8s
