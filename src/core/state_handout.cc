#include "core/state_handout.h"

#include <sys/stat.h>

#include <cstring>

#include "core/pacing_board.h"
#include "core/vgpu_layout.h"
#include "port/fd_passing.h"
#include "port/sealed_memfd.h"

namespace gpuslice::core {

int HandedState::BoardFd(const uint8_t uuid[16]) const {
  for (const HandedBoard& b : boards) {
    if (memcmp(b.uuid.data(), uuid, 16) == 0) return b.fd.get();
  }
  return -1;
}

std::string StateSocketPath(const std::string& vgpu_dir) { return vgpu_dir + "/" + kStateSocketName; }

bool HandsOutState(const std::string& vgpu_dir) {
  struct stat st;
  return lstat(StateSocketPath(vgpu_dir).c_str(), &st) == 0 && S_ISSOCK(st.st_mode);
}

std::string UuidHex(const GpuUuid& uuid) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string s;
  for (uint8_t b : uuid) {
    s += kHex[b >> 4];
    s += kHex[b & 15];
  }
  return s;
}

bool ParseUuidHex(const std::string& text, GpuUuid* uuid) {
  if (text.size() != 32) return false;
  auto nibble = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
  };
  for (size_t i = 0; i < 16; ++i) {
    const int hi = nibble(text[2 * i]), lo = nibble(text[2 * i + 1]);
    if (hi < 0 || lo < 0) return false;
    (*uuid)[i] = static_cast<uint8_t>(hi << 4 | lo);
  }
  return true;
}

std::string FormatHandout(const std::vector<GpuUuid>& boards) {
  std::string text = std::string(kHandoutHeader) + "\nledger\n";
  for (const GpuUuid& u : boards) text += "board " + UuidHex(u) + "\n";
  return text;
}

StatusOr<std::vector<GpuUuid>> ParseHandout(const std::string& text) {
  std::vector<std::string> lines;
  size_t start = 0;
  while (start < text.size()) {
    const size_t end = text.find('\n', start);
    if (end == std::string::npos) return Status::Error("the handout's last line is cut short");
    lines.push_back(text.substr(start, end - start));
    start = end + 1;
  }
  if (lines.empty() || lines[0] != kHandoutHeader) {
    return Status::Error("the handout is not '" + std::string(kHandoutHeader) + "' (" +
                         (lines.empty() ? std::string("empty") : lines[0]) +
                         "); the daemon is another version of gpuslice than this library");
  }
  if (lines.size() < 2 || lines[1] != "ledger") return Status::Error("the handout has no ledger");
  std::vector<GpuUuid> boards;
  for (size_t i = 2; i < lines.size(); ++i) {
    GpuUuid u{};
    if (lines[i].compare(0, 6, "board ") != 0 || !ParseUuidHex(lines[i].substr(6), &u)) {
      return Status::Error("the handout has a line it cannot read: '" + lines[i] + "'");
    }
    boards.push_back(u);
  }
  return boards;
}

StatusOr<HandedState> FetchState(const std::string& vgpu_dir, int timeout_ms) {
  const std::string path = StateSocketPath(vgpu_dir);
  auto failed = [&](const std::string& why) {
    return Status::Error("the vGPU's state socket " + path + " did not hand out its shared state (" + why +
                         "); is the state keeper running? `gpuslice daemon` starts it, and a restart of the daemon "
                         "brings it back");
  };
  auto conn = port::ConnectUnix(path);
  if (!conn.ok()) return failed(conn.status().message());
  port::UniqueFd socket(conn.value());
  std::string text;
  std::vector<int> raw;
  if (Status s = port::ReceiveWithFds(socket.get(), timeout_ms, &text, &raw); !s.ok()) return failed(s.message());
  std::vector<port::UniqueFd> fds;
  for (int fd : raw) fds.emplace_back(fd);
  auto boards = ParseHandout(text);
  if (!boards.ok()) return failed(boards.status().message());
  if (fds.size() != 1 + boards->size()) {
    return failed(std::to_string(fds.size()) + " descriptors for " + std::to_string(1 + boards->size()) + " regions");
  }
  if (Status s = port::CheckSealed(fds[0].get(), sizeof(Ledger), "the ledger from " + path); !s.ok()) return s;
  HandedState state;
  state.ledger = std::move(fds[0]);
  for (size_t i = 0; i < boards->size(); ++i) {
    const std::string what = "the pacing board " + UuidHex(boards.value()[i]) + " from " + path;
    if (Status s = port::CheckSealed(fds[i + 1].get(), sizeof(Board), what); !s.ok()) return s;
    state.boards.push_back(HandedBoard{boards.value()[i], std::move(fds[i + 1])});
  }
  return state;
}

Status SendState(int conn, int ledger_fd, const std::vector<std::pair<GpuUuid, int>>& boards) {
  std::vector<GpuUuid> uuids;
  std::vector<int> fds{ledger_fd};
  for (const auto& [uuid, fd] : boards) {
    uuids.push_back(uuid);
    fds.push_back(fd);
  }
  return port::SendWithFds(conn, FormatHandout(uuids), fds);
}

}  // namespace gpuslice::core
