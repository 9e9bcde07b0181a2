#include "node/policy_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <sstream>
#include <utility>
#include <vector>

namespace gpuslice::node {
namespace {

// Every constant, by the name the daemon config gives it.
std::vector<std::pair<const char*, uint64_t policy::TimeslicePolicyConfig::*>> Fields() {
  using C = policy::TimeslicePolicyConfig;
  return {{"be_period_us", &C::be_period_us},
          {"be_min_slice_us", &C::be_min_slice_us},
          {"be_slice_beside_lc_us", &C::be_slice_beside_lc_us},
          {"be_period_with_lc_us", &C::be_period_with_lc_us},
          {"be_min_slice_with_lc_us", &C::be_min_slice_with_lc_us},
          {"lc_slice_us", &C::lc_slice_us},
          {"lc_shared_slice_us", &C::lc_shared_slice_us}};
}

// The share mode and the turn style, by their names (policy::ShareModeName,
// policy::TurnStyleName).
constexpr char kSharesKey[] = "be_shares";
constexpr char kTurnsKey[] = "be_turns";

std::string PathOf(const std::string& root) { return root + "/" + kPolicyFileName; }
std::string LevelsPathOf(const std::string& root) { return root + "/" + kLevelsFileName; }

// Temporary file + rename: a reader sees the old file or the new one whole.
Status WriteWhole(const std::string& path, const std::string& text) {
  const std::string tmp = path + ".tmp." + std::to_string(getpid());
  const int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    return Status::Error("cannot write " + tmp + ": " + strerror(errno) + "; make the state directory writable");
  }
  fchmod(fd, 0644);  // whatever the umask
  const bool written = write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  close(fd);
  if (!written || rename(tmp.c_str(), path.c_str()) != 0) {
    const std::string why = strerror(errno);
    unlink(tmp.c_str());
    return Status::Error("cannot write " + path + ": " + why + "; make the state directory writable");
  }
  return Status::Ok();
}

}  // namespace

Status StorePolicyConfig(const std::string& state_root, const policy::TimeslicePolicyConfig& config) {
  std::string text;
  for (const auto& [key, field] : Fields()) text += std::string(key) + " " + std::to_string(config.*field) + "\n";
  text += std::string(kSharesKey) + " " + policy::ShareModeName(config.be_shares) + "\n";
  text += std::string(kTurnsKey) + " " + policy::TurnStyleName(config.be_turns) + "\n";
  return WriteWhole(PathOf(state_root), text);
}

StatusOr<policy::TimeslicePolicyConfig> LoadPolicyConfig(const std::string& state_root) {
  policy::TimeslicePolicyConfig config;
  const std::string path = PathOf(state_root);
  std::ifstream in(path);
  if (!in) {
    if (errno == ENOENT) return config;  // no daemon ever ran here
    return Status::Error("cannot read " + path + ": " + strerror(errno) +
                         "; run gpuslice as the user who owns the state directory");
  }
  const auto fields = Fields();
  std::string line;
  int line_no = 0;
  while (std::getline(in, line)) {
    ++line_no;
    if (line.empty()) continue;
    std::istringstream words(line);
    std::string key, value, rest;
    bool known = false;
    if (words >> key >> value && !(words >> rest)) {
      if (key == kSharesKey && (value == "slices" || value == "turns")) {
        config.be_shares = value == "turns" ? policy::ShareMode::kTurns : policy::ShareMode::kSlices;
        known = true;
      }
      if (key == kTurnsKey && (value == "backfill" || value == "exclusive")) {
        config.be_turns = value == "exclusive" ? policy::TurnStyle::kExclusive : policy::TurnStyle::kBackfill;
        known = true;
      }
      uint64_t number = 0;
      const char* end = value.data() + value.size();
      const auto parsed = std::from_chars(value.data(), end, number);
      const bool is_number = parsed.ec == std::errc() && parsed.ptr == end;
      for (const auto& [name, field] : fields) {
        if (key == name && is_number) {
          config.*field = number;
          known = true;
        }
      }
    }
    if (!known) {
      return Status::Error(path + ":" + std::to_string(line_no) + ": '" + line.substr(0, 64) +
                           "' is not a policy setting; restart the daemon to rewrite the file, or delete it to use "
                           "the defaults");
    }
  }
  return config;
}

Status StoreLevels(const std::string& state_root, const std::string& levels_yaml) {
  const std::string path = LevelsPathOf(state_root);
  if (levels_yaml.empty()) {
    if (unlink(path.c_str()) != 0 && errno != ENOENT) {
      return Status::Error("cannot remove " + path + ": " + strerror(errno) + "; make the state directory writable");
    }
    return Status::Ok();
  }
  return WriteWhole(path, levels_yaml);
}

StatusOr<task::LevelTable> LoadLevels(const std::string& state_root) {
  const std::string path = LevelsPathOf(state_root);
  if (access(path.c_str(), F_OK) != 0 && errno == ENOENT) return task::LevelTable::Defaults();
  auto table = task::LevelTable::Load(path);
  if (!table.ok()) {
    return Status::Error(table.status().message() +
                         " (the daemon stores its config's `levels:` there; restart it to rewrite the file, or "
                         "delete the file to use the default levels)");
  }
  return table;
}

Status StoreMemoryWait(const std::string& state_root, uint32_t wait_ms) {
  const std::string path = state_root + "/" + kMemoryWaitFileName;
  if (wait_ms == 0) {
    if (unlink(path.c_str()) != 0 && errno != ENOENT) {
      return Status::Error("cannot remove " + path + ": " + strerror(errno) + "; make the state directory writable");
    }
    return Status::Ok();
  }
  return WriteWhole(path, std::to_string(wait_ms) + "\n");
}

StatusOr<uint32_t> LoadMemoryWait(const std::string& state_root) {
  const std::string path = state_root + "/" + kMemoryWaitFileName;
  std::ifstream in(path);
  if (!in) return uint32_t{0};
  uint64_t ms = 0;
  std::string rest;
  if (!(in >> ms) || (in >> rest) || ms > UINT32_MAX) {
    return Status::Error(path +
                         " does not hold a number of milliseconds (the daemon stores its config's "
                         "memory_pressure.wait_ms there); restart the daemon to rewrite it, or delete it");
  }
  return static_cast<uint32_t>(ms);
}

}  // namespace gpuslice::node
