#include "config/daemon_config.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <map>
#include <set>
#include <sstream>
#include <utility>
#include <vector>

#include "config/config_checks.h"
#include "config/quote.h"
#include "config/yaml_document.h"
#include "task/task_levels.h"
#include "core/byte_size.h"

namespace gpuslice::config {
namespace {

std::string Kind(const YAML::Node& v) {
  if (v.IsMap()) return "a mapping";
  if (v.IsSequence()) return "a list";
  if (v.IsNull()) return "empty";
  return Quote(v.Scalar());
}

// Walks the document, filling a DaemonConfig and remembering each key's line
// so that problems found afterwards (ranges, cross-field rules) can point at
// it. Every error is FILE:LINE: KEY: REASON; FIX.
class Reader {
 public:
  using Handler = std::function<Status(const YAML::Node& value, const std::string& key)>;
  struct Field {
    const char* name;
    Handler handle;
  };

  explicit Reader(const std::string& file) : file_(file) {}

  std::string Where(const YAML::Mark& mark) const {
    return mark.is_null() ? file_ : file_ + ":" + std::to_string(mark.line + 1);
  }
  std::string WhereKey(const std::string& key) const {
    const auto it = lines_.find(key);
    return it == lines_.end() ? file_ : file_ + ":" + std::to_string(it->second);
  }
  bool Seen(const std::string& key) const { return lines_.count(key) != 0; }

  Status Error(const YAML::Node& at, const std::string& key, const std::string& message) const {
    return Status::Error(Where(at.Mark()) + ": " + key + ": " + message);
  }

  // A mapping whose keys must all be among `fields`, each at most once. A
  // null node (an empty section, `socket:`) keeps the defaults.
  Status Map(const YAML::Node& node, const std::string& path, const std::vector<Field>& fields) {
    if (node.IsNull()) return Status::Ok();
    if (!node.IsMap()) {
      return Error(node, path,
                   "is " + Kind(node) + ", not a mapping; write its keys (" + Names(fields) + ") indented below it");
    }
    std::set<std::string> seen;
    for (auto it = node.begin(); it != node.end(); ++it) {
      // Copies, not references: yaml-cpp's operator-> returns a proxy that
      // dies at the end of the expression (ASan found `const Node& k =
      // it->first` reading a dead stack slot).
      const YAML::Node k = it->first;
      const YAML::Node v = it->second;
      const std::string where = path.empty() ? "(top level)" : path;
      if (!k.IsScalar()) return Error(k, where, "has a key that is not a plain name; use one of " + Names(fields));
      const std::string name = k.Scalar();
      // Keys are echoed in messages; an odd one is quoted to keep them one line.
      const bool plain = !name.empty() && name.size() <= 64 &&
                         name.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-") ==
                             std::string::npos;
      const std::string shown = plain ? name : Quote(name);
      const std::string key = path.empty() ? shown : path + "." + shown;
      const Field* field = nullptr;
      for (const Field& f : fields) {
        if (name == f.name) field = &f;
      }
      if (field == nullptr) {
        return Error(k, key,
                     "unknown key; the keys " + (path.empty() ? "at the top level" : "under " + path) + " are " +
                         Names(fields) + " (docs/configuration.md)");
      }
      if (!seen.insert(name).second) return Error(k, key, "appears twice; keep one");
      lines_[key] = k.Mark().line + 1;
      if (Status s = field->handle(v, key); !s.ok()) return s;
    }
    return Status::Ok();
  }

  Status String(const YAML::Node& v, const std::string& key, std::string* out) const {
    if (v.IsNull()) {
      *out = "";
      return Status::Ok();
    }
    if (!v.IsScalar()) return Error(v, key, "is " + Kind(v) + "; want a string");
    *out = v.Scalar();
    return Status::Ok();
  }

  Status Uint(const YAML::Node& v, const std::string& key, uint64_t max, uint64_t* out) const {
    if (!v.IsScalar()) return Error(v, key, "is " + Kind(v) + "; want a whole number");
    const std::string& text = v.Scalar();
    const bool digits = !text.empty() && text.find_first_not_of("0123456789") == std::string::npos;
    if (!digits) return Error(v, key, Quote(text) + " is not a whole number; write digits only, e.g. 1000");
    uint64_t value = 0;
    const std::errc ec = std::from_chars(text.data(), text.data() + text.size(), value).ec;
    if (ec != std::errc() || value > max) {
      return Error(v, key, Quote(text) + " is too large; want at most " + std::to_string(max));
    }
    *out = value;
    return Status::Ok();
  }

  Status Uint32(const YAML::Node& v, const std::string& key, uint32_t* out) const {
    uint64_t value = 0;
    if (Status s = Uint(v, key, std::numeric_limits<uint32_t>::max(), &value); !s.ok()) return s;
    *out = static_cast<uint32_t>(value);
    return Status::Ok();
  }

  Status Bool(const YAML::Node& v, const std::string& key, bool* out) const {
    const std::string text = v.IsScalar() ? v.Scalar() : "";
    if (text == "true" || text == "True" || text == "TRUE") {
      *out = true;
    } else if (text == "false" || text == "False" || text == "FALSE") {
      *out = false;
    } else {
      return Error(v, key, (v.IsScalar() ? Quote(text) : Kind(v)) + " is not a boolean; write true or false");
    }
    return Status::Ok();
  }

 private:
  static std::string Names(const std::vector<Field>& fields) {
    std::string out;
    for (const Field& f : fields) out += (out.empty() ? "" : ", ") + std::string(f.name);
    return out;
  }

  const std::string& file_;
  std::map<std::string, int> lines_;
};

Status ParsePriority(const Reader& r, const YAML::Node& v, const std::string& key, core::Priority* out) {
  std::string text;
  if (Status s = r.String(v, key, &text); !s.ok()) return s;
  if (text == "best_effort" || text == "be") {
    *out = core::Priority::kBestEffort;
  } else if (text == "latency_critical" || text == "lc") {
    *out = core::Priority::kLatencyCritical;
  } else {
    return r.Error(v, key, Quote(text) + " is not a priority; want best_effort (be) or latency_critical (lc)");
  }
  return Status::Ok();
}

// An action key: one of `parse`'s names, or "off" (none). `what` ends the
// error, naming the names.
template <typename Action, typename Parse>
Status ParseOptionalAction(const Reader& r, const YAML::Node& v, const std::string& key, Parse parse, const char* what,
                           std::optional<Action>* out) {
  std::string text;
  if (Status s = r.String(v, key, &text); !s.ok()) return s;
  if (text == "off") {
    out->reset();
    return Status::Ok();
  }
  auto action = parse(text);
  if (!action.ok()) return r.Error(v, key, Quote(text) + what);
  *out = action.value();
  return Status::Ok();
}

Status ParseAuditAction(const Reader& r, const YAML::Node& v, const std::string& key,
                        std::optional<audit::AuditAction>* out) {
  return ParseOptionalAction(r, v, key, audit::ParseAuditAction,
                             " is not an audit action; want report, deny, kill or off", out);
}

Status ParseCapAction(const Reader& r, const YAML::Node& v, const std::string& key,
                      std::optional<audit::CapAction>* out) {
  return ParseOptionalAction(r, v, key, audit::ParseCapAction,
                             " is not an action on a vGPU over its cap; want report, throttle, kill or off", out);
}

// One of two names, `names[0]` the default, into `*out` as Enum(0) or
// Enum(1); `what` names what they are, for the error.
template <typename Enum>
Status ParseOneOfTwo(const Reader& r, const YAML::Node& v, const std::string& key, const char* const (&names)[2],
                     const char* what, Enum* out) {
  std::string text;
  if (Status s = r.String(v, key, &text); !s.ok()) return s;
  if (text != names[0] && text != names[1]) {
    return r.Error(v, key, Quote(text) + " is not " + what + "; want " + names[0] + " (the default) or " + names[1]);
  }
  *out = static_cast<Enum>(text == names[1] ? 1 : 0);
  return Status::Ok();
}

constexpr const char* kShareModes[2] = {"slices", "turns"};        // policy::ShareMode's order
constexpr const char* kTurnStyles[2] = {"backfill", "exclusive"};  // policy::TurnStyle's order

// `levels:` is kept as its own YAML document and checked by the task API's
// parser, which `gpuslice run/set` and the daemon resolve names with.
Status ParseLevels(const Reader& r, const YAML::Node& v, const std::string& key, std::string* out) {
  YAML::Node doc;
  doc["levels"] = v;
  YAML::Emitter emitter;
  emitter << doc;
  // The parser's errors start "<origin>: levels[i]: ..."; the reader adds
  // the file, line and key itself.
  constexpr char kOrigin[] = "@";
  auto table = task::LevelTable::Parse(emitter.c_str(), kOrigin);
  if (!table.ok()) {
    std::string why = table.status().message();
    if (why.rfind(std::string(kOrigin) + ": ", 0) == 0) why = why.substr(3);
    // "levels[i]: ...": point at entry i's line.
    size_t i = 0;
    if (sscanf(why.c_str(), "levels[%zu]: ", &i) == 1 && v.IsSequence() && i < v.size()) {
      const size_t colon = why.find(": ");
      return r.Error(v[i], key + "[" + std::to_string(i) + "]", why.substr(colon + 2));
    }
    return r.Error(v, key, why);
  }
  *out = std::string(emitter.c_str()) + "\n";
  return Status::Ok();
}

Status ParseMemory(const Reader& r, const YAML::Node& v, const std::string& key, std::optional<uint64_t>* out) {
  if (v.IsNull()) {
    out->reset();  // explicitly the whole GPU
    return Status::Ok();
  }
  // ParseByteSize echoes its input; keep odd input out of the message.
  const bool printable = v.IsScalar() && v.Scalar().size() <= 64 &&
                         std::all_of(v.Scalar().begin(), v.Scalar().end(), [](char c) { return c > ' ' && c != 0x7f; });
  if (!printable) {
    return r.Error(v, key, (v.IsScalar() ? Quote(v.Scalar()) : Kind(v)) + " is not a size; write one such as 4GiB");
  }
  StatusOr<uint64_t> bytes = core::ParseByteSize(v.Scalar());
  if (!bytes.ok()) return r.Error(v, key, bytes.status().message());
  *out = *bytes;
  return Status::Ok();
}

StatusOr<DaemonConfig> ParseDocument(const YAML::Node& root, const std::string& file) {
  DaemonConfig c;
  Reader r(file);
  using F = Reader::Field;
  using N = const YAML::Node&;
  using K = const std::string&;
  uint64_t version = 0;
  policy::TimeslicePolicyConfig& t = c.timeslices;
  auto slice = [&r](uint64_t* field) {
    return [&r, field](N v, K k) { return r.Uint(v, k, std::numeric_limits<uint64_t>::max(), field); };
  };

  const std::vector<F> socket = {
      {"path", [&](N v, K k) { return r.String(v, k, &c.socket.path); }},
      {"group", [&](N v, K k) { return r.String(v, k, &c.socket.group); }},
  };
  const std::vector<F> metrics = {
      {"enabled", [&](N v, K k) { return r.Bool(v, k, &c.metrics.enabled); }},
      {"address", [&](N v, K k) { return r.String(v, k, &c.metrics.address); }},
      {"allow_remote", [&](N v, K k) { return r.Bool(v, k, &c.metrics.allow_remote); }},
  };
  const std::vector<F> defaults = {
      {"memory", [&](N v, K k) { return ParseMemory(r, v, k, &c.defaults.memory_bytes); }},
      {"compute", [&](N v, K k) { return r.Uint32(v, k, &c.defaults.compute_pct); }},
      {"priority", [&](N v, K k) { return ParsePriority(r, v, k, &c.defaults.priority); }},
  };
  const std::vector<F> best_effort = {
      {"period_us", slice(&t.be_period_us)},
      {"min_slice_us", slice(&t.be_min_slice_us)},
      {"slice_beside_lc_us", slice(&t.be_slice_beside_lc_us)},
      {"period_with_lc_us", slice(&t.be_period_with_lc_us)},
      {"min_slice_with_lc_us", slice(&t.be_min_slice_with_lc_us)},
      {"shares", [&](N v, K k) { return ParseOneOfTwo(r, v, k, kShareModes, "a way to share", &t.be_shares); }},
      {"turns", [&](N v, K k) { return ParseOneOfTwo(r, v, k, kTurnStyles, "a way to take GPU turns", &t.be_turns); }},
      {"idle_after_ms", [&](N v, K k) { return r.Uint32(v, k, &c.be_idle_after_ms); }},
  };
  const std::vector<F> latency_critical = {
      {"slice_us", slice(&t.lc_slice_us)},
      {"shared_slice_us", slice(&t.lc_shared_slice_us)},
  };
  const std::vector<F> timeslices = {
      {"best_effort", [&](N v, K k) { return r.Map(v, k, best_effort); }},
      {"latency_critical", [&](N v, K k) { return r.Map(v, k, latency_critical); }},
  };
  std::optional<uint64_t> allowance = c.audit.context_allowance_bytes;
  const std::vector<F> audit = {
      {"action", [&](N v, K k) { return ParseAuditAction(r, v, k, &c.audit.action); }},
      {"unmanaged", [&](N v, K k) { return ParseAuditAction(r, v, k, &c.audit.unmanaged); }},
      {"raised_slice", [&](N v, K k) { return ParseAuditAction(r, v, k, &c.audit.raised_slice); }},
      {"hidden_groups", [&](N v, K k) { return ParseAuditAction(r, v, k, &c.audit.hidden_groups); }},
      {"over_cap", [&](N v, K k) { return ParseCapAction(r, v, k, &c.audit.over_cap); }},
      {"over_cap_margin_pct", [&](N v, K k) { return r.Uint32(v, k, &c.audit.over_cap_margin_pct); }},
      {"over_cap_window_s", [&](N v, K k) { return r.Uint32(v, k, &c.audit.over_cap_window_s); }},
      {"grace_ms", [&](N v, K k) { return r.Uint32(v, k, &c.audit.grace_ms); }},
      {"context_allowance", [&](N v, K k) { return ParseMemory(r, v, k, &allowance); }},
  };
  std::optional<uint64_t> headroom = c.memory_pressure.resume_headroom_bytes;
  const std::vector<F> memory_pressure = {
      {"wait_ms", [&](N v, K k) { return r.Uint32(v, k, &c.memory_pressure.wait_ms); }},
      {"min_run_after_resume_s", [&](N v, K k) { return r.Uint32(v, k, &c.memory_pressure.min_run_after_resume_s); }},
      {"max_suspends_per_minute", [&](N v, K k) { return r.Uint32(v, k, &c.memory_pressure.max_suspends_per_minute); }},
      {"resume_headroom", [&](N v, K k) { return ParseMemory(r, v, k, &headroom); }},
      {"max_overcommit_pct", [&](N v, K k) { return r.Uint32(v, k, &c.memory_pressure.max_overcommit_pct); }},
  };
  const std::vector<F> health = {
      {"xid_quiet_period_s", [&](N v, K k) { return r.Uint32(v, k, &c.health.xid_quiet_period_s); }},
  };
  const std::vector<F> top = {
      {"version", [&](N v, K k) { return r.Uint(v, k, std::numeric_limits<uint64_t>::max(), &version); }},
      {"state_dir", [&](N v, K k) { return r.String(v, k, &c.state_dir); }},
      {"socket", [&](N v, K k) { return r.Map(v, k, socket); }},
      {"metrics", [&](N v, K k) { return r.Map(v, k, metrics); }},
      {"defaults", [&](N v, K k) { return r.Map(v, k, defaults); }},
      {"timeslices", [&](N v, K k) { return r.Map(v, k, timeslices); }},
      {"audit", [&](N v, K k) { return r.Map(v, k, audit); }},
      {"health", [&](N v, K k) { return r.Map(v, k, health); }},
      {"memory_pressure", [&](N v, K k) { return r.Map(v, k, memory_pressure); }},
      {"levels", [&](N v, K k) { return ParseLevels(r, v, k, &c.levels_yaml); }},
      {"reap_interval_ms", [&](N v, K k) { return r.Uint32(v, k, &c.reap_interval_ms); }},
      {"log_level", [&](N v, K k) { return r.String(v, k, &c.log_level); }},
  };
  if (!root.IsMap()) {
    return Status::Error(r.Where(root.Mark()) + ": the file is not a mapping of keys; start it with `version: " +
                         std::to_string(kConfigVersion) + "` (docs/configuration.md)");
  }
  if (Status s = r.Map(root, "", top); !s.ok()) return s;
  c.audit.context_allowance_bytes = allowance.value_or(0);
  c.memory_pressure.resume_headroom_bytes = headroom.value_or(0);
  if (!r.Seen("version")) {
    return Status::Error(file + ":1: version: missing; add `version: " + std::to_string(kConfigVersion) +
                         "` at the top of the file");
  }
  if (version != kConfigVersion) {
    return Status::Error(r.WhereKey("version") + ": version: " + std::to_string(version) +
                         " is not a version this gpuslice reads; write version: " + std::to_string(kConfigVersion));
  }
  // Ranges and cross-field rules, reported at the first problem's line.
  for (const ConfigProblem& p : CheckDaemonConfig(c)) {
    for (const std::string& key : p.keys) {
      if (r.Seen(key)) return Status::Error(r.WhereKey(key) + ": " + p.keys.front() + ": " + p.message);
    }
  }
  // A rule broken only by defaults cannot happen; keep the file name anyway.
  if (Status s = ValidateDaemonConfig(c, file); !s.ok()) return s;
  return c;
}

}  // namespace

StatusOr<DaemonConfig> ParseDaemonConfig(std::string_view yaml, const std::string& file_name) {
  StatusOr<YAML::Node> root = LoadSingleDocument(yaml, file_name);
  if (!root.ok()) return root.status();
  if (root->IsNull()) {
    return Status::Error(file_name + ":1: version: missing; the file is empty, start it with `version: " +
                         std::to_string(kConfigVersion) + "` (docs/configuration.md)");
  }
  try {
    return ParseDocument(root.value(), file_name);
  } catch (const std::exception& e) {
    // yaml-cpp reports some malformed nodes only when they are read.
    return Status::Error(file_name + ": cannot read the configuration: " + OneLine(e.what()));
  }
}

StatusOr<DaemonConfig> LoadDaemonConfig(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return Status::Error(path +
                         ": cannot open the configuration file; create it (see "
                         "deploy/gpuslice/config.example.yaml) or pass --config PATH");
  }
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) return Status::Error(path + ": cannot read the configuration file; check its permissions");
  return ParseDaemonConfig(text.str(), path);
}

Status ApplyEnvironment(DaemonConfig& config, const std::function<const char*(const char*)>& getenv) {
  struct Var {
    const char* name;
    const char* key;
    std::string* field;
  };
  const Var vars[] = {
      {"GPUSLICE_STATE_DIR", "state_dir", &config.state_dir},
      {"GPUSLICE_SOCKET", "socket.path", &config.socket.path},
      {"GPUSLICE_SOCKET_GROUP", "socket.group", &config.socket.group},
      {"GPUSLICE_METRICS_ADDRESS", "metrics.address", &config.metrics.address},
      {"GPUSLICE_LOG", "log_level", &config.log_level},
  };
  std::map<std::string, std::string> set_by;  // key -> variable
  for (const Var& var : vars) {
    const char* value = getenv ? getenv(var.name) : ::getenv(var.name);
    if (value == nullptr || *value == '\0') continue;
    *var.field = value;
    set_by[var.key] = var.name;
  }
  for (const ConfigProblem& p : CheckDaemonConfig(config)) {
    for (const std::string& key : p.keys) {
      if (auto it = set_by.find(key); it != set_by.end()) {
        return Status::Error(it->second + " (" + p.keys.front() + "): " + p.message);
      }
    }
  }
  return Status::Ok();
}

Status ValidateDaemonConfig(const DaemonConfig& config, const std::string& origin) {
  const std::vector<ConfigProblem> problems = CheckDaemonConfig(config);
  if (problems.empty()) return Status::Ok();
  return Status::Error(origin + ": " + problems.front().keys.front() + ": " + problems.front().message);
}

}  // namespace gpuslice::config
