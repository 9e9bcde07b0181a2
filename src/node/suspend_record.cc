// The suspend file (suspend_record.h): "key value" lines.
#include "node/suspend_record.h"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

namespace gpuslice::node {
namespace {

bool ParseState(const std::string& word, SuspendState* out) {
  for (SuspendState s : {SuspendState::kRunning, SuspendState::kSuspending, SuspendState::kSuspended,
                         SuspendState::kResuming}) {
    if (word == SuspendStateName(s)) {
      *out = s;
      return true;
    }
  }
  return false;
}

}  // namespace

const char* SuspendStateName(SuspendState s) {
  switch (s) {
    case SuspendState::kRunning: return "running";
    case SuspendState::kSuspending: return "suspending";
    case SuspendState::kSuspended: return "suspended";
    case SuspendState::kResuming: return "resuming";
  }
  return "running";
}

std::string FormatSuspendRecord(const SuspendRecord& r) {
  std::ostringstream out;
  out << "state " << SuspendStateName(r.state) << "\n";
  out << "pids";
  for (uint32_t pid : r.pids) out << " " << pid;
  out << "\n";
  out << "bytes " << r.bytes << "\n";
  out << "since_unix_ms " << r.since_unix_ms << "\n";
  out << "suspended_seconds_total " << r.suspended_seconds_total << "\n";
  out << "bytes_moved_total " << r.bytes_moved_total << "\n";
  out << "suspends " << r.suspends << "\n";
  out << "resumes " << r.resumes << "\n";
  out << "last_suspend_seconds " << r.last_suspend_seconds << "\n";
  out << "last_resume_seconds " << r.last_resume_seconds << "\n";
  // Last: the rest of the line is the text, spaces included.
  out << "detail " << r.detail << "\n";
  if (!r.by.empty()) out << "by " << r.by << "\n";
  if (!r.migrating_from.empty()) out << "migrating_from " << r.migrating_from << "\n";
  return out.str();
}

StatusOr<SuspendRecord> ParseSuspendRecord(const std::string& text) {
  SuspendRecord r;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    std::istringstream in(line);
    std::string key;
    if (!(in >> key)) continue;
    bool ok = true;
    if (key == "state") {
      std::string word;
      ok = static_cast<bool>(in >> word) && ParseState(word, &r.state);
    } else if (key == "pids") {
      for (uint32_t pid; in >> pid;) r.pids.push_back(pid);
    } else if (key == "bytes") {
      ok = static_cast<bool>(in >> r.bytes);
    } else if (key == "since_unix_ms") {
      ok = static_cast<bool>(in >> r.since_unix_ms);
    } else if (key == "suspended_seconds_total") {
      ok = static_cast<bool>(in >> r.suspended_seconds_total);
    } else if (key == "bytes_moved_total") {
      ok = static_cast<bool>(in >> r.bytes_moved_total);
    } else if (key == "suspends") {
      ok = static_cast<bool>(in >> r.suspends);
    } else if (key == "resumes") {
      ok = static_cast<bool>(in >> r.resumes);
    } else if (key == "last_suspend_seconds") {
      ok = static_cast<bool>(in >> r.last_suspend_seconds);
    } else if (key == "last_resume_seconds") {
      ok = static_cast<bool>(in >> r.last_resume_seconds);
    } else if (key == "migrating_from") {
      ok = static_cast<bool>(in >> r.migrating_from);
    } else if (key == "by") {
      ok = static_cast<bool>(in >> r.by);
    } else if (key == "detail") {
      r.detail = line.size() > 7 ? line.substr(7) : std::string();
    }
    // Unknown keys are skipped: a newer daemon may add some.
    if (!ok) return Status::Error("bad line in suspend file: '" + line + "'");
  }
  return r;
}

StatusOr<SuspendRecord> ReadSuspendRecord(const std::string& dir) {
  std::ifstream f(dir + "/" + kSuspendFile);
  if (!f) return SuspendRecord{};
  std::stringstream ss;
  ss << f.rdbuf();
  auto r = ParseSuspendRecord(ss.str());
  if (!r.ok()) return Status::Error(dir + "/" + kSuspendFile + ": " + r.status().message());
  return r;
}

Status WriteSuspendRecord(const std::string& dir, const SuspendRecord& record) {
  const std::string path = dir + "/" + kSuspendFile;
  const std::string tmp = path + ".tmp";
  FILE* f = fopen(tmp.c_str(), "we");
  if (f == nullptr) return Status::Error("cannot write " + tmp + ": " + strerror(errno));
  const std::string text = FormatSuspendRecord(record);
  const bool wrote = fwrite(text.data(), 1, text.size(), f) == text.size();
  const bool synced = fflush(f) == 0 && fsync(fileno(f)) == 0;
  fclose(f);
  if (!wrote || !synced || rename(tmp.c_str(), path.c_str()) != 0) {
    return Status::Error("cannot write " + path + ": " + strerror(errno));
  }
  return Status::Ok();
}

}  // namespace gpuslice::node
