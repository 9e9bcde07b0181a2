#include "node/vgpu_owner.h"

#include <pwd.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <string>

#include "port/replace_file.h"

namespace gpuslice::node {

std::optional<uid_t> LoadOwner(const std::string& vgpu_dir) {
  std::ifstream in(vgpu_dir + "/" + kOwnerFile);
  std::string text;
  if (!in || !std::getline(in, text) || text.empty() || text.size() > 10) return std::nullopt;
  for (char c : text) {
    if (c < '0' || c > '9') return std::nullopt;
  }
  const unsigned long uid = std::strtoul(text.c_str(), nullptr, 10);
  if (uid >= static_cast<unsigned long>(static_cast<uid_t>(-1))) return std::nullopt;
  return static_cast<uid_t>(uid);
}

Status StoreOwner(const std::string& vgpu_dir, uid_t owner) {
  return port::ReplaceFile(vgpu_dir + "/" + kOwnerFile, std::to_string(owner) + "\n", 0444);
}

bool MayChange(std::optional<uid_t> caller, std::optional<uid_t> owner, uid_t operator_uid) {
  if (!caller || *caller == 0 || *caller == operator_uid) return true;
  return owner && *owner == *caller;
}

GroupGrant GrantInGroupMode(std::optional<uid_t> owner) {
  const uid_t keep = static_cast<uid_t>(-1);
  if (!owner) return {keep, 0660};
  if (*owner == geteuid()) return {keep, 0600};
  if (geteuid() == 0) return {*owner, 0600};
  return {keep, 0660};
}

std::string DescribeUid(uid_t uid) {
  passwd entry;
  passwd* found = nullptr;
  char buf[4096];
  if (getpwuid_r(uid, &entry, buf, sizeof buf, &found) == 0 && found != nullptr) {
    return "uid " + std::to_string(uid) + " (" + found->pw_name + ")";
  }
  return "uid " + std::to_string(uid);
}

}  // namespace gpuslice::node
