#include "core/board_roster.h"

#include <cinttypes>
#include <cstdio>
#include <cstdlib>

namespace gpuslice::core {
namespace {

constexpr char kHex[] = "0123456789abcdef";

bool ParseHex16(const std::string& text, std::array<uint8_t, 16>* out) {
  if (text.size() != 32) return false;
  for (size_t i = 0; i < 32; ++i) {
    const char c = text[i];
    const int v = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
    if (v < 0) return false;
    (*out)[i / 2] = static_cast<uint8_t>(i % 2 == 0 ? v << 4 : (*out)[i / 2] | v);
  }
  return true;
}

bool ParseUnsigned(const std::string& text, int base, uint64_t max, uint64_t* out) {
  if (text.empty() || text.size() > 20) return false;
  char* end = nullptr;
  const unsigned long long v = strtoull(text.c_str(), &end, base);
  if (*end != '\0' || text[0] == '-' || text[0] == '+' || v > max) return false;
  *out = v;
  return true;
}

// `text` split at spaces (runs of them count as one).
std::vector<std::string> Fields(const std::string& text) {
  std::vector<std::string> out;
  size_t i = 0;
  while (i < text.size()) {
    while (i < text.size() && text[i] == ' ') ++i;
    const size_t start = i;
    while (i < text.size() && text[i] != ' ') ++i;
    if (i > start) out.push_back(text.substr(start, i - start));
  }
  return out;
}

uint64_t Mix(uint64_t id) { return id * 0x9e3779b97f4a7c15ull >> 32; }

}  // namespace

std::string FormatRoster(const std::vector<RosterEntry>& entries) {
  std::string out = std::string(kRosterHeader) + "\n";
  for (const RosterEntry& e : entries) {
    for (uint8_t b : e.gpu) {
      out += kHex[b >> 4];
      out += kHex[b & 15];
    }
    char line[96];
    snprintf(line, sizeof line, " %016" PRIx64 " %u %u %u ", e.vgpu_id, e.level, e.weight, e.cap_pct);
    out += line;
    out += e.name + "\n";
  }
  return out;
}

StatusOr<std::vector<RosterEntry>> ParseRoster(const std::string& text) {
  std::vector<std::string> lines;
  for (size_t start = 0; start < text.size();) {
    const size_t end = text.find('\n', start);
    lines.push_back(text.substr(start, end == std::string::npos ? std::string::npos : end - start));
    start = end == std::string::npos ? text.size() : end + 1;
  }
  if (lines.empty() || lines[0] != kRosterHeader) {
    return Status::Error("the roster does not begin with \"" + std::string(kRosterHeader) +
                         "\"; it is written by the node's manager (the daemon or `gpuslice run`), which rewrites it at "
                         "the next create, resize or removal of a vGPU");
  }
  std::vector<RosterEntry> entries;
  for (size_t k = 1; k < lines.size(); ++k) {
    const std::vector<std::string> f = Fields(lines[k]);
    RosterEntry e;
    uint64_t v[4];
    const bool ok = f.size() == 6 && ParseHex16(f[0], &e.gpu) && f[1].size() == 16 &&
                    ParseUnsigned(f[1], 16, UINT64_MAX, &v[0]) && v[0] != 0 &&
                    ParseUnsigned(f[2], 10, UINT32_MAX, &v[1]) && ParseUnsigned(f[3], 10, 100, &v[2]) &&
                    ParseUnsigned(f[4], 10, 100, &v[3]);
    if (!ok) {
      return Status::Error("roster line " + std::to_string(k + 1) + " (\"" + lines[k] +
                           "\") is not \"GPU-UUID-HEX VGPU-ID-HEX LEVEL WEIGHT CAP NAME\"; the node's manager "
                           "rewrites the roster at the next create, resize or removal of a vGPU");
    }
    e.vgpu_id = v[0];
    e.level = static_cast<uint32_t>(v[1]);
    e.weight = static_cast<uint32_t>(v[2]);
    e.cap_pct = static_cast<uint32_t>(v[3]);
    e.name = f[5];
    entries.push_back(std::move(e));
  }
  return entries;
}

void BoardTrust::Reset(const std::vector<std::pair<uint64_t, TrustedMember>>& members) {
  const int next = 1 - current_.load(std::memory_order_relaxed);
  Slot* table = tables_[next];
  for (int i = 0; i < kSlots; ++i) table[i].id.store(0, std::memory_order_relaxed);
  int count = 0;
  for (const auto& [id, what] : members) {
    if (id == 0 || count == kCapacity) continue;
    uint64_t i = Mix(id) % kSlots;
    while (table[i].id.load(std::memory_order_relaxed) != 0 && table[i].id.load(std::memory_order_relaxed) != id) {
      i = (i + 1) % kSlots;
    }
    if (table[i].id.load(std::memory_order_relaxed) == 0) ++count;
    table[i].what.store(static_cast<uint64_t>(what.level) << 32 | (what.weight & 0xffff) << 16 | (what.cap_pct & 0xffff),
                        std::memory_order_relaxed);
    table[i].id.store(id, std::memory_order_relaxed);
  }
  sizes_[next].store(count, std::memory_order_relaxed);
  current_.store(next, std::memory_order_release);
}

bool BoardTrust::Find(uint64_t vgpu_id, TrustedMember* out) const {
  if (vgpu_id == 0) return false;
  const Slot* table = tables_[current_.load(std::memory_order_acquire)];
  for (uint64_t i = Mix(vgpu_id) % kSlots, probes = 0; probes < kSlots; i = (i + 1) % kSlots, ++probes) {
    const uint64_t id = table[i].id.load(std::memory_order_relaxed);
    if (id == 0) return false;
    if (id != vgpu_id) continue;
    const uint64_t what = table[i].what.load(std::memory_order_relaxed);
    out->level = static_cast<uint32_t>(what >> 32);
    out->weight = static_cast<uint32_t>(what >> 16 & 0xffff);
    out->cap_pct = static_cast<uint32_t>(what & 0xffff);
    return true;
  }
  return false;
}

}  // namespace gpuslice::core
