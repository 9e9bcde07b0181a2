#include "node/state_recovery.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

#include "port/replace_file.h"
#include "port/sealed_memfd.h"

namespace gpuslice::node {
namespace {

constexpr char kRecordHeader[] = "gpuslice-state-record 1";

std::string ReadAll(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

}  // namespace

StatusOr<MemoryId> IdentityOf(int fd) {
  struct stat st;
  if (fstat(fd, &st) != 0) return Status::Error(std::string("fstat: ") + strerror(errno));
  return MemoryId{static_cast<uint64_t>(st.st_dev), static_cast<uint64_t>(st.st_ino)};
}

std::string FormatStateRecord(const StateRecord& record) {
  std::string out = std::string(kRecordHeader) + "\n";
  out += "ledger " + std::to_string(record.ledger.dev) + " " + std::to_string(record.ledger.ino) + "\n";
  for (const auto& [uuid, id] : record.boards) {
    out += "board " + core::UuidHex(uuid) + " " + std::to_string(id.dev) + " " + std::to_string(id.ino) + "\n";
  }
  return out;
}

StatusOr<StateRecord> ParseStateRecord(const std::string& text) {
  std::istringstream in(text);
  std::string line;
  if (!std::getline(in, line) || line != kRecordHeader) {
    return Status::Error("not a state record (first line is not \"" + std::string(kRecordHeader) + "\")");
  }
  StateRecord record;
  bool has_ledger = false;
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    std::string kind, uuid_hex;
    MemoryId id;
    fields >> kind;
    if (kind == "board") fields >> uuid_hex;
    if (!(fields >> id.dev >> id.ino) || (kind != "ledger" && kind != "board")) {
      return Status::Error("bad state record line: \"" + line + "\"");
    }
    if (kind == "ledger") {
      record.ledger = id;
      has_ledger = true;
      continue;
    }
    core::GpuUuid uuid{};
    if (!core::ParseUuidHex(uuid_hex, &uuid)) return Status::Error("bad GPU in state record line: \"" + line + "\"");
    record.boards.emplace_back(uuid, id);
  }
  if (!has_ledger) return Status::Error("state record names no ledger");
  return record;
}

Status WriteStateRecord(const std::string& vgpu_dir, const StateRecord& record) {
  return port::ReplaceFile(vgpu_dir + "/" + kStateRecordFileName, FormatStateRecord(record), 0444);
}

StatusOr<StateRecord> ReadStateRecord(const std::string& vgpu_dir) {
  const std::string path = vgpu_dir + "/" + kStateRecordFileName;
  if (access(path.c_str(), F_OK) != 0) return Status::Error("no " + path + " (made before state records)");
  auto record = ParseStateRecord(ReadAll(path));
  if (!record.ok()) return Status::Error(path + ": " + record.status().message());
  return record;
}

StatusOr<port::UniqueFd> OpenMappedMemory(const std::string& proc_root, const MemoryId& id, size_t size,
                                          const std::string& what) {
  return std::move(OpenMappedMemories(proc_root, {WantedMemory{id, size, what}}).front());
}

std::vector<StatusOr<port::UniqueFd>> OpenMappedMemories(const std::string& proc_root,
                                                         const std::vector<WantedMemory>& wanted) {
  std::vector<StatusOr<port::UniqueFd>> out;
  DIR* proc = wanted.empty() ? nullptr : opendir(proc_root.c_str());
  if (proc == nullptr) {
    const std::string why = "cannot read " + proc_root + ": " + strerror(errno);
    for (size_t i = 0; i < wanted.size(); ++i) out.emplace_back(Status::Error(why));
    return out;
  }
  std::vector<port::UniqueFd> found(wanted.size());
  std::vector<bool> seen(wanted.size(), false);
  std::vector<std::string> refused(wanted.size());
  size_t left = wanted.size();
  dirent* e = nullptr;
  while (left > 0 && (e = readdir(proc)) != nullptr) {
    if (!isdigit(static_cast<unsigned char>(e->d_name[0]))) continue;
    const std::string pid_dir = proc_root + "/" + e->d_name;
    std::istringstream maps(ReadAll(pid_dir + "/maps"));
    std::string line;
    while (left > 0 && std::getline(maps, line)) {
      // start-end perms offset major:minor inode path
      uint64_t start = 0, end = 0, offset = 0, ino = 0;
      unsigned major_dev = 0, minor_dev = 0;
      char perms[8] = {};
      if (sscanf(line.c_str(), "%" SCNx64 "-%" SCNx64 " %7s %" SCNx64 " %x:%x %" SCNu64, &start, &end, perms, &offset,
                 &major_dev, &minor_dev, &ino) != 7) {
        continue;
      }
      const MemoryId mapped{static_cast<uint64_t>(makedev(major_dev, minor_dev)), ino};
      for (size_t i = 0; i < wanted.size(); ++i) {
        if (found[i].valid() || !(wanted[i].id == mapped)) continue;
        seen[i] = true;
        char range[64];
        snprintf(range, sizeof range, "%" PRIx64 "-%" PRIx64, start, end);
        const int fd = open((pid_dir + "/map_files/" + range).c_str(), O_RDWR | O_CLOEXEC);
        if (fd < 0) {
          refused[i] = std::string(strerror(errno));
          continue;
        }
        port::UniqueFd memory(fd);
        // The very inode (a process may have replaced its mapping meanwhile),
        // still sealed and of the layout's size.
        auto opened = IdentityOf(memory.get());
        if (!opened.ok() || !(opened.value() == mapped) ||
            !port::CheckSealed(memory.get(), wanted[i].size, wanted[i].what).ok()) {
          continue;
        }
        found[i] = std::move(memory);
        --left;
      }
    }
  }
  closedir(proc);
  for (size_t i = 0; i < wanted.size(); ++i) {
    if (found[i].valid()) {
      out.emplace_back(std::move(found[i]));
    } else if (!seen[i]) {
      out.emplace_back(Status::Error("no running process maps the " + wanted[i].what));
    } else {
      out.emplace_back(Status::Error("cannot open the " + wanted[i].what + " through " + proc_root +
                                     "/<pid>/map_files" +
                                     (refused[i].empty() ? "" : " (" + refused[i] + "; it needs CAP_SYS_ADMIN)")));
    }
  }
  return out;
}

}  // namespace gpuslice::node
