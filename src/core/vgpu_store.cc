#include "core/vgpu_store.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "core/byte_size.h"
#include "core/memory_ledger.h"
#include "core/pacing_board.h"
#include "core/shared_word.h"
#include "core/state_handout.h"
#include "port/fd_passing.h"
#include "port/file_lock.h"
#include "port/sealed_memfd.h"
#include "port/unique_fd.h"

namespace gpuslice::core {
namespace {

std::string Errno(const std::string& what) { return what + ": " + strerror(errno); }

Status WriteFile(const std::string& path, const void* data, size_t size, mode_t mode) {
  const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) return Status::Error(Errno("cannot create " + path));
  const char* p = static_cast<const char*>(data);
  size_t left = size;
  while (left > 0) {
    const ssize_t n = write(fd, p, left);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const Status s = Status::Error(Errno("cannot write " + path));
      close(fd);
      return s;
    }
    p += n;
    left -= static_cast<size_t>(n);
  }
  if (fchmod(fd, mode) != 0 || close(fd) != 0) return Status::Error(Errno("cannot finish " + path));
  return Status::Ok();
}

// Whether `path` holds a board to replace: one this process can read that
// is not a whole board of this version (a node upgraded while it existed,
// or one a tenant truncated), which every library refuses and runs unpaced.
// One it cannot read is left as it is, as before (its processes may).
bool StaleBoard(const std::string& path) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  const bool current = IsCurrentBoard(fd);
  close(fd);
  return !current;
}

// Each GPU's pacing board (pacing_board.h), created complete under a
// temporary name and linked into place, so it appears initialised or not at
// all, and concurrent creators cannot clobber a board in use. A stale board
// is replaced the same way (callers hold the store's lock): processes that
// mapped it keep it until they exit, and new ones pace on the new one. A
// replacement that fails leaves the join alone: its libraries say why they
// run unpaced.
Status EnsureBoard(const std::string& boards, const uint8_t uuid[16]) {
  const std::string path = boards + "/" + BoardFileName(uuid);
  struct stat st;
  const bool exists = stat(path.c_str(), &st) == 0;
  if (exists && !StaleBoard(path)) return Status::Ok();
  auto board = std::make_unique<Board>();
  InitBoard(board.get());
  const std::string tmp = path + ".new-" + std::to_string(getpid());
  unlink(tmp.c_str());
  Status s = WriteFile(tmp, board.get(), sizeof(Board), 0600);
  if (exists) {
    if (s.ok()) (void)rename(tmp.c_str(), path.c_str());
    s = Status::Ok();
  } else if (s.ok() && link(tmp.c_str(), path.c_str()) != 0 && errno != EEXIST) {
    s = Status::Error(Errno("cannot create pacing board " + path));
  }
  unlink(tmp.c_str());
  return s;
}

// <root>/boards holds one board per GPU; every vGPU directory links to it as
// `boards`, where the library looks (a container mounts it there).
Status EnsureBoards(const std::string& root, const std::string& vgpu_dir, const Limits& limits) {
  const std::string boards = root + "/boards";
  if (mkdir(boards.c_str(), 0700) != 0 && errno != EEXIST) {
    return Status::Error(Errno("cannot create " + boards));
  }
  for (uint32_t i = 0; i < limits.device_count && i < kMaxDevices; ++i) {
    if (Status s = EnsureBoard(boards, limits.devices[i].uuid); !s.ok()) return s;
  }
  const std::string link_path = vgpu_dir + "/boards";
  if (symlink("../../boards", link_path.c_str()) != 0 && errno != EEXIST) {
    return Status::Error(Errno("cannot link " + link_path));
  }
  return Status::Ok();
}

bool SameDevices(const Limits& existing, const VgpuSpec& spec) {
  if (existing.device_count != spec.devices.size()) return false;
  for (size_t i = 0; i < spec.devices.size(); ++i) {
    const DeviceLimit& d = existing.devices[i];
    if (memcmp(d.uuid, spec.devices[i].uuid.data(), 16) != 0) return false;
    if (LoadAcquire(d.memory_limit_bytes) != spec.devices[i].memory_limit_bytes) return false;
  }
  return true;
}

}  // namespace

StatusOr<VgpuHandle> VgpuHandle::Open(const std::string& dir, port::MappedFile::Access limits_access) {
  struct stat st;
  if (stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    return Status::Error("no vGPU state at " + dir + "; create the vGPU with `gpuslice run` first");
  }
  auto limits = port::MappedFile::Open(dir + "/limits", sizeof(Limits), limits_access);
  if (!limits.ok()) return Status::Error(CorruptedStateMessage(dir, "limits", limits.status().message()));
  // Limits first: a vGPU of another layout version has a ledger of another
  // size, and its limits say which version it is, where the ledger's size
  // alone would only read as corruption.
  if (Status s = ValidateLimits(*static_cast<const Limits*>(limits->data()), dir); !s.ok()) return s;
  StatusOr<port::MappedFile> ledger = Status::Error("");
  struct stat file;
  if (lstat((dir + "/ledger").c_str(), &file) != 0 && HandsOutState(dir)) {
    // Made by the daemon: the ledger is a sealed memfd, which no one can
    // truncate under this mapping (state_handout.h). A socket that does not
    // answer is not corruption; say what it is.
    auto handed = FetchState(dir);
    if (!handed.ok()) return handed.status();
    ledger = port::MappedFile::FromFd(handed->ledger.get(), sizeof(Ledger), port::MappedFile::Access::kReadWrite,
                                      "the ledger of " + dir);
    if (!ledger.ok()) return ledger.status();
  } else {
    ledger = port::MappedFile::Open(dir + "/ledger", sizeof(Ledger), port::MappedFile::Access::kReadWrite);
    if (!ledger.ok()) return Status::Error(CorruptedStateMessage(dir, "ledger", ledger.status().message()));
  }
  VgpuHandle handle;
  handle.limits_ = std::move(limits.value());
  handle.ledger_ = std::move(ledger.value());
  handle.dir_ = dir;
  if (Status s = ValidateLedger(handle.ledger(), dir); !s.ok()) return s;
  return handle;
}

std::string VgpuStore::DefaultRoot() {
  if (const char* dir = getenv("GPUSLICE_STATE_DIR"); dir != nullptr && *dir != '\0') return dir;
  if (const char* xdg = getenv("XDG_RUNTIME_DIR"); xdg != nullptr && *xdg != '\0') {
    return std::string(xdg) + "/gpuslice";
  }
  return "/run/gpuslice";
}

Status VgpuStore::ValidateName(const std::string& name) {
  if (name.empty() || name.size() > kMaxNameLength) {
    return Status::Error("invalid vGPU name '" + name + "': use 1 to " + std::to_string(kMaxNameLength) +
                         " characters");
  }
  if (name[0] == '.') return Status::Error("invalid vGPU name '" + name + "': it may not start with '.'");
  for (char c : name) {
    if (!isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_' && c != '.') {
      return Status::Error("invalid vGPU name '" + name + "': use only letters, digits, '-', '_' and '.'");
    }
  }
  return Status::Ok();
}

Status VgpuStore::EnsureRoot() const {
  std::error_code ec;
  const bool existed = std::filesystem::exists(root_, ec);
  std::filesystem::create_directories(root_ + "/vgpus", ec);
  if (ec) {
    return Status::Error("cannot create state directory " + root_ + ": " + ec.message() +
                         "; set GPUSLICE_STATE_DIR to a writable directory");
  }
  // Owner-only when we make it. An existing directory keeps the mode its
  // owner gave it (the daemon opens it to its group with 0710).
  if (!existed) chmod(root_.c_str(), 0700);
  return Status::Ok();
}

StatusOr<std::string> VgpuStore::CreateOrJoin(const VgpuSpec& spec, bool spec_is_explicit, bool* created) {
  *created = false;
  if (Status s = ValidateName(spec.name); !s.ok()) return s;
  if (spec.devices.empty() || spec.devices.size() > kMaxDevices) {
    return Status::Error("a vGPU needs 1 to " + std::to_string(kMaxDevices) + " devices");
  }
  if (Status s = EnsureRoot(); !s.ok()) return s;
  auto lock = port::LockFile(root_ + "/.lock", port::LockMode::kExclusive, port::kStateLockWait);
  if (!lock.ok()) return lock.status();

  const std::string dir = DirOf(spec.name);
  struct stat st;
  if (stat(dir.c_str(), &st) == 0) {
    auto existing = VgpuHandle::Open(dir, port::MappedFile::Access::kReadOnly);
    if (!existing.ok()) return existing.status();
    if (spec_is_explicit && !SameDevices(existing->limits(), spec)) {
      const uint64_t limit = LoadAcquire(existing->limits().devices[0].memory_limit_bytes);
      return Status::Error("vGPU '" + spec.name + "' already exists with a " +
                           (limit == kUnlimited ? std::string("unlimited") : FormatByteSize(limit)) +
                           " limit on its own GPUs; join it without --memory/--gpu, or pick another --name");
    }
    // vGPUs made before pacing boards existed get theirs on the next join;
    // those that hand out their state have theirs from the keeper.
    if (!HandsOutState(dir)) {
      if (Status b = EnsureBoards(root_, dir, existing->limits()); !b.ok()) return b;
    }
    return dir;
  }

  Limits limits{};
  limits.header = {kLimitsMagic, kLayoutVersion, sizeof(Limits)};
  limits.generation = 1;
  snprintf(limits.name, sizeof limits.name, "%s", spec.name.c_str());
  limits.device_count = static_cast<uint32_t>(spec.devices.size());
  limits.memory_wait_ms = spec.memory_wait_ms;
  for (size_t i = 0; i < spec.devices.size(); ++i) {
    DeviceLimit& d = limits.devices[i];
    memcpy(d.uuid, spec.devices[i].uuid.data(), 16);
    d.memory_limit_bytes = spec.devices[i].memory_limit_bytes;
    d.compute_share_pct = spec.devices[i].compute_share_pct;
    d.compute_cap_pct = spec.devices[i].compute_cap_pct;
    d.priority = LevelWord(spec.devices[i].priority, spec.devices[i].priority_rank);
    d.flags = kDeviceFlagPresent;
  }
  auto ledger = std::make_unique<Ledger>();
  memset(ledger.get(), 0, sizeof(Ledger));
  ledger->header = {kLedgerMagic, kLayoutVersion, sizeof(Ledger)};

  const std::string tmp = root_ + "/vgpus/.new-" + spec.name + "-" + std::to_string(getpid());
  std::error_code ec;
  std::filesystem::remove_all(tmp, ec);
  if (mkdir(tmp.c_str(), 0700) != 0) return Status::Error(Errno("cannot create " + tmp));
  Status s = WriteFile(tmp + "/limits", &limits, sizeof limits, 0444);
  if (s.ok()) s = WriteFile(tmp + "/members", "", 0, 0600);
  if (s.ok() && spec.suspendable) s = WriteFile(tmp + "/" + kSuspendableMarker, "", 0, 0444);
  if (publisher_ != nullptr) {
    if (s.ok()) s = PublishSealed(spec.name, tmp, dir, *ledger, limits);
  } else {
    if (s.ok()) s = WriteFile(tmp + "/ledger", ledger.get(), sizeof(Ledger), 0600);
    if (s.ok()) s = EnsureBoards(root_, tmp, limits);
    if (s.ok() && rename(tmp.c_str(), dir.c_str()) != 0) s = Status::Error(Errno("cannot create " + dir));
  }
  if (!s.ok()) {
    std::filesystem::remove_all(tmp, ec);
    return s;
  }
  *created = true;
  return dir;
}

// The daemon's way (state_handout.h): the ledger is made as a sealed memfd,
// the socket is bound in the still-private temporary directory, the
// directory is renamed into place, and only then is the keeper given the
// socket (it watches the final path). If the keeper cannot take it, the vGPU
// is taken back out: a socket that nobody serves would refuse its processes'
// memory.
Status VgpuStore::PublishSealed(const std::string& name, const std::string& tmp, const std::string& dir,
                                const Ledger& ledger, const Limits& limits) {
  auto memfd = port::CreateSealedMemfd(("gpuslice-ledger-" + name).c_str(), &ledger, sizeof(Ledger));
  if (!memfd.ok()) return memfd.status();
  port::UniqueFd ledger_fd(memfd.value());
  auto listening = port::ListenUnix(StateSocketPath(tmp), 0600);
  if (!listening.ok()) return listening.status();
  port::UniqueFd listen_fd(listening.value());
  if (rename(tmp.c_str(), dir.c_str()) != 0) return Status::Error(Errno("cannot create " + dir));
  std::vector<GpuUuid> gpus;
  for (uint32_t i = 0; i < limits.device_count && i < kMaxDevices; ++i) {
    GpuUuid u;
    memcpy(u.data(), limits.devices[i].uuid, 16);
    gpus.push_back(u);
  }
  Status s = publisher_->Publish(name, StateSocketPath(dir), listen_fd.get(), ledger_fd.get(), gpus);
  if (!s.ok()) {
    // Back to a private name, so the caller's cleanup removes it.
    if (rename(dir.c_str(), tmp.c_str()) != 0) {
      std::error_code ec;
      std::filesystem::remove_all(dir, ec);
    }
    return Status::Error("cannot hand out vGPU '" + name + "''s shared state: " + s.message());
  }
  return Status::Ok();
}

std::string VgpuStore::RootOf(const std::string& vgpu_dir) {
  return std::filesystem::path(vgpu_dir).parent_path().parent_path().string();
}

StatusOr<int> VgpuStore::HoldMembership(const std::string& name) {
  auto lock = port::LockFile(DirOf(name) + "/members", port::LockMode::kShared, port::kStateLockWait);
  if (!lock.ok()) return lock.status();
  return lock->release();
}

StatusOr<bool> VgpuStore::RemoveIfUnused(const std::string& name, bool force) {
  auto store_lock = port::LockFile(root_ + "/.lock", port::LockMode::kExclusive, port::kStateLockWait);
  if (!store_lock.ok()) return store_lock.status();
  const std::string dir = DirOf(name);
  auto members = port::LockFile(dir + "/members", port::LockMode::kExclusive, std::chrono::milliseconds{0});
  if (!members.ok()) return false;  // someone still holds it
  auto handle = VgpuHandle::Open(dir, port::MappedFile::Access::kReadOnly);
  if (handle.ok()) {
    MemoryLedger ledger(&handle->limits(), &handle->ledger());
    ledger.ReapDeadProcesses(port::SystemProcessProbe());
    if (ledger.LiveProcessCount() > 0) return false;
  } else if (!force) {
    return false;  // processes may use it still; a flipped byte must not delete a vGPU in use
  }
  const bool sealed = HandsOutState(dir);
  const std::string trash = root_ + "/vgpus/.old-" + name + "-" + std::to_string(getpid());
  if (rename(dir.c_str(), trash.c_str()) != 0) return Status::Error(Errno("cannot remove " + dir));
  // Its socket left with the directory; the keeper lets the memory go.
  if (sealed && publisher_ != nullptr) publisher_->Withdraw(name);
  std::error_code ec;
  std::filesystem::remove_all(trash, ec);
  return true;
}

std::vector<std::string> VgpuStore::List() const {
  std::vector<std::string> names;
  DIR* d = opendir((root_ + "/vgpus").c_str());
  if (d == nullptr) return names;
  while (dirent* e = readdir(d)) {
    if (e->d_name[0] != '.') names.emplace_back(e->d_name);
  }
  closedir(d);
  std::sort(names.begin(), names.end());
  return names;
}

}  // namespace gpuslice::core
