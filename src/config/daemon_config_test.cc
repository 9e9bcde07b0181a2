#include "config/daemon_config.h"

#include <gtest/gtest.h>

#include "task/task_levels.h"

#include <cstdlib>
#include <fstream>
#include <map>
#include <string>
#include <vector>

namespace gpuslice::config {
namespace {

StatusOr<DaemonConfig> Parse(const std::string& yaml) { return ParseDaemonConfig(yaml, "c.yaml"); }

// The error for `yaml`, which must not parse.
std::string ErrorOf(const std::string& yaml) {
  StatusOr<DaemonConfig> c = Parse(yaml);
  EXPECT_FALSE(c.ok()) << yaml;
  return c.ok() ? "" : c.status().message();
}

TEST(DaemonConfigTest, VersionAloneGivesTheDefaults) {
  StatusOr<DaemonConfig> c = Parse("version: 1\n");
  ASSERT_TRUE(c.ok()) << c.status().message();
  const DaemonConfig d;
  EXPECT_EQ(c->socket.path, d.socket.path);
  EXPECT_EQ(c->metrics.address, "127.0.0.1:9400");
  EXPECT_TRUE(c->metrics.enabled);
  EXPECT_FALSE(c->defaults.memory_bytes.has_value());
  EXPECT_EQ(c->timeslices.be_period_us, d.timeslices.be_period_us);
  EXPECT_EQ(c->reap_interval_ms, 200u);
}

TEST(DaemonConfigTest, ReadsEveryKey) {
  StatusOr<DaemonConfig> c = Parse(R"(version: 1
state_dir: /var/run/gs
socket: {path: /tmp/gs.sock, group: gpu}
metrics:
  enabled: false
  address: "[::]:9500"
  allow_remote: true
defaults:
  memory: 4GiB
  compute: 30
  priority: lc
timeslices:
  best_effort: {period_us: 20000, min_slice_us: 2000, slice_beside_lc_us: 70, period_with_lc_us: 800,
                min_slice_with_lc_us: 100, shares: turns, turns: exclusive, idle_after_ms: 2500}
  latency_critical: {slice_us: 1000000, shared_slice_us: 3000}
reap_interval_ms: 50
log_level: debug
)");
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->state_dir, "/var/run/gs");
  EXPECT_EQ(c->socket.path, "/tmp/gs.sock");
  EXPECT_EQ(c->socket.group, "gpu");
  EXPECT_FALSE(c->metrics.enabled);
  EXPECT_EQ(c->metrics.address, "[::]:9500");
  EXPECT_TRUE(c->metrics.allow_remote);
  EXPECT_EQ(c->defaults.memory_bytes, 4ull << 30);
  EXPECT_EQ(c->defaults.compute_pct, 30u);
  EXPECT_EQ(c->defaults.priority, core::Priority::kLatencyCritical);
  EXPECT_EQ(c->timeslices.be_period_us, 20000u);
  EXPECT_EQ(c->timeslices.be_shares, policy::ShareMode::kTurns);
  EXPECT_EQ(c->timeslices.be_turns, policy::TurnStyle::kExclusive);
  EXPECT_EQ(c->be_idle_after_ms, 2500u);
  EXPECT_EQ(c->timeslices.be_min_slice_us, 2000u);
  EXPECT_EQ(c->timeslices.be_period_with_lc_us, 800u);
  EXPECT_EQ(c->timeslices.be_min_slice_with_lc_us, 100u);
  EXPECT_EQ(c->timeslices.lc_slice_us, 1000000u);
  EXPECT_EQ(c->timeslices.be_slice_beside_lc_us, 70u);
  EXPECT_EQ(c->timeslices.lc_shared_slice_us, 3000u);
  EXPECT_EQ(c->reap_interval_ms, 50u);
  EXPECT_EQ(c->log_level, "debug");
}

TEST(DaemonConfigTest, EmptySectionsKeepDefaults) {
  StatusOr<DaemonConfig> c = Parse("version: 1\nsocket:\nmetrics:\ndefaults:\n  memory:\n");
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->socket.path, DaemonConfig().socket.path);
  EXPECT_FALSE(c->defaults.memory_bytes.has_value());
}

TEST(DaemonConfigTest, ErrorsNameFileLineKeyAndFix) {
  // Each bad document, and the exact error it must give.
  const std::map<std::string, std::string> cases = {
      {"version: 1\nmetrics:\n  adress: 127.0.0.1:1\n",
       "c.yaml:3: metrics.adress: unknown key; the keys under metrics are enabled, address, allow_remote "
       "(docs/configuration.md)"},
      {"version: 1\nsockets: {}\n",
       "c.yaml:2: sockets: unknown key; the keys at the top level are version, state_dir, socket, metrics, "
       "defaults, timeslices, audit, health, memory_pressure, levels, reap_interval_ms, log_level "
       "(docs/configuration.md)"},
      {"version: 1\nmetrics:\n  address: 0.0.0.0:9400\n",
       "c.yaml:3: metrics.address: \"0.0.0.0:9400\" is not a loopback address; set metrics.allow_remote: true "
       "to serve other hosts, or use 127.0.0.1:PORT"},
      {"version: 1\ndefaults:\n  compute: 0\n",
       "c.yaml:3: defaults.compute: 0 is out of range; want a percentage 1..100"},
      {"version: 1\ndefaults:\n  compute: ten\n",
       "c.yaml:3: defaults.compute: \"ten\" is not a whole number; write digits only, e.g. 1000"},
      {"version: 1\ndefaults:\n  compute: 99999999999\n",
       "c.yaml:3: defaults.compute: \"99999999999\" is too large; want at most 4294967295"},
      {"version: 1\ndefaults:\n  priority: urgent\n",
       "c.yaml:3: defaults.priority: \"urgent\" is not a priority; want best_effort (be) or latency_critical (lc)"},
      {"version: 1\nmetrics:\n  enabled: yes\n",
       "c.yaml:3: metrics.enabled: \"yes\" is not a boolean; write true or false"},
      {"version: 1\nlog_level: loud\n",
       "c.yaml:2: log_level: \"loud\" is not a log level; want one of trace, debug, info, warn, error, critical, "
       "off"},
      {"version: 1\nreap_interval_ms: 1\n", "c.yaml:2: reap_interval_ms: 1 is out of range; want 10..60000"},
      {"version: 1\nsocket:\n  path: relative.sock\n",
       "c.yaml:3: socket.path: \"relative.sock\" is not an absolute path; write it from /, e.g. "
       "/run/gpuslice/gpuslice.sock"},
      {"version: 1\nsocket: /run/x.sock\n",
       "c.yaml:2: socket: is \"/run/x.sock\", not a mapping; write its keys (path, group) indented below it"},
      {"version: 2\n", "c.yaml:1: version: 2 is not a version this gpuslice reads; write version: 1"},
      {"socket: {}\n", "c.yaml:1: version: missing; add `version: 1` at the top of the file"},
      {"version: 1\nlog_level: info\nlog_level: debug\n", "c.yaml:3: log_level: appears twice; keep one"},
      {"version: 1\ntimeslices:\n  best_effort:\n    period_us: 100\n",
       "c.yaml:4: timeslices.best_effort.min_slice_us: 1000 is longer than period_us (100); make min_slice_us at "
       "most period_us"},
      {"version: 1\ntimeslices:\n  best_effort:\n    shares: fair\n",
       "c.yaml:4: timeslices.best_effort.shares: \"fair\" is not a way to share; want slices (the default) or turns"},
      {"version: 1\ntimeslices:\n  best_effort:\n    turns: polite\n",
       "c.yaml:4: timeslices.best_effort.turns: \"polite\" is not a way to take GPU turns; want backfill (the default) "
       "or exclusive"},
      {"version: 1\naudit:\n  action: shoot\n",
       "c.yaml:3: audit.action: \"shoot\" is not an audit action; want report, deny, kill or off"},
      {"version: 1\naudit:\n  over_cap: deny\n",
       "c.yaml:3: audit.over_cap: \"deny\" is not an action on a vGPU over its cap; want report, throttle, kill or "
       "off"},
      {"version: 1\naudit:\n  over_cap_margin_pct: 100\n",
       "c.yaml:3: audit.over_cap_margin_pct: 100 is out of range; want 1..99 percent of a GPU (0 would act on an "
       "honest library's 29-31% under a 30% cap, and a cap plus 100 is never reached; to stop the audit, set "
       "audit.over_cap: off)"},
      {"version: 1\naudit:\n  over_cap_window_s: 90\n",
       "c.yaml:3: audit.over_cap_window_s: 90 is out of range; want 1..60 seconds (the audit keeps a minute of "
       "samples; under 30, an honest job that queues seconds of work per synchronisation may read over its cap)"},
      {"version: 1\naudit:\n  over_cap_margin_pct: 0\n",
       "c.yaml:3: audit.over_cap_margin_pct: 0 is out of range; want 1..99 percent of a GPU (0 would act on an "
       "honest library's 29-31% under a 30% cap, and a cap plus 100 is never reached; to stop the audit, set "
       "audit.over_cap: off)"},
      {"version: 1\ntimeslices:\n  latency_critical:\n    slice_us: 0\n",
       "c.yaml:4: timeslices.latency_critical.slice_us: 0 is out of range; want 1..10000000 microseconds"},
  };
  for (const auto& [yaml, want] : cases) EXPECT_EQ(ErrorOf(yaml), want) << yaml;
}

TEST(DaemonConfigTest, TheAuditSectionSetsActionsGraceAndAllowance) {
  auto c = ParseDaemonConfig(
      "version: 1\naudit:\n  action: deny\n  unmanaged: off\n  raised_slice: report\n  hidden_groups: kill\n"
      "  over_cap: kill\n  over_cap_margin_pct: 5\n"
      "  grace_ms: 500\n"
      "  context_allowance: 512MiB\n",
      "c.yaml");
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->audit.action, audit::AuditAction::kDeny);
  EXPECT_FALSE(c->audit.unmanaged.has_value());
  EXPECT_EQ(c->audit.raised_slice, audit::AuditAction::kReport);
  EXPECT_EQ(c->audit.hidden_groups, audit::AuditAction::kKill);
  EXPECT_EQ(c->audit.over_cap, audit::CapAction::kKill);
  EXPECT_EQ(c->audit.over_cap_margin_pct, 5u);
  EXPECT_EQ(c->audit.grace_ms, 500u);
  EXPECT_EQ(c->audit.context_allowance_bytes, 512ull << 20);
  auto d = ParseDaemonConfig("version: 1\n", "c.yaml");
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->audit.action, audit::AuditAction::kKill) << "kill after a grace, by default";
  EXPECT_EQ(d->audit.unmanaged, audit::AuditAction::kReport);
  EXPECT_EQ(d->audit.raised_slice, audit::AuditAction::kKill);
  EXPECT_EQ(d->audit.hidden_groups, audit::AuditAction::kReport);
  EXPECT_EQ(d->audit.over_cap, audit::CapAction::kThrottle);
  EXPECT_EQ(d->audit.over_cap_margin_pct, 10u);
  EXPECT_EQ(d->audit.over_cap_window_s, 30u);
}

TEST(DaemonConfigTest, TheHealthSectionSetsTheXidQuietPeriod) {
  auto c = ParseDaemonConfig("version: 1\nhealth:\n  xid_quiet_period_s: 900\n", "c.yaml");
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->health.xid_quiet_period_s, 900u);
  auto d = ParseDaemonConfig("version: 1\n", "c.yaml");
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->health.xid_quiet_period_s, 0u) << "no automatic recovery by default, as NVIDIA's device plugin";
  EXPECT_NE(ErrorOf("version: 1\nhealth:\n  quiet: 5\n").find("health.quiet: unknown key"), std::string::npos);
}

TEST(DaemonConfigTest, TheMemoryPressureSectionTurnsOvercommitOnAndChecksItsRanges) {
  auto c = ParseDaemonConfig(
      "version: 1\nmemory_pressure:\n  wait_ms: 20000\n  min_run_after_resume_s: 60\n"
      "  max_suspends_per_minute: 2\n  resume_headroom: 1GiB\n",
      "c.yaml");
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->memory_pressure.wait_ms, 20000u);
  EXPECT_EQ(c->memory_pressure.min_run_after_resume_s, 60u);
  EXPECT_EQ(c->memory_pressure.max_suspends_per_minute, 2u);
  EXPECT_EQ(c->memory_pressure.resume_headroom_bytes, 1ull << 30);
  auto d = ParseDaemonConfig("version: 1\n", "c.yaml");
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->memory_pressure.wait_ms, 0u) << "off unless asked for";
  EXPECT_EQ(ErrorOf("version: 1\nmemory_pressure:\n  wait_ms: 700000\n"),
            "c.yaml:3: memory_pressure.wait_ms: 700000 is over 600000 (10 minutes); an allocation must not wait "
            "longer");
  EXPECT_NE(ErrorOf("version: 1\nmemory_pressure:\n  max_suspends_per_minute: 0\n").find("memory_pressure.wait_ms: 0"),
            std::string::npos);
}

TEST(DaemonConfigTest, BadSizesAndSyntaxAreOneLineErrors) {
  const std::string size = ErrorOf("version: 1\ndefaults:\n  memory: 4 parsecs\n");
  EXPECT_EQ(size.rfind("c.yaml:3: defaults.memory: ", 0), 0u) << size;
  const std::string syntax = ErrorOf("version: 1\nsocket: {path: [\n");
  EXPECT_EQ(syntax.rfind("c.yaml:", 0), 0u) << syntax;
  EXPECT_NE(syntax.find("YAML syntax error"), std::string::npos) << syntax;
  EXPECT_EQ(syntax.find('\n'), std::string::npos) << syntax;
  EXPECT_NE(ErrorOf("").find("version: missing"), std::string::npos);
  EXPECT_NE(ErrorOf("- a\n- b\n").find("not a mapping"), std::string::npos);
  EXPECT_EQ(ErrorOf("version: 1\n---\nversion: 1\n"),
            "c.yaml:2: the file holds more than one YAML document; keep one (remove the '---' separators)");
  // yaml-cpp 0.7's LoadAll loops forever on a stray ',' (yaml_document.h).
  EXPECT_EQ(ErrorOf("\n,*c0\n"),
            "c.yaml:2: YAML syntax error: unexpected token (a ',' outside [ ] or { }?); fix the YAML at that line");
  EXPECT_NE(ErrorOf("--- ,").find("YAML syntax error"), std::string::npos);
  EXPECT_NE(ErrorOf("version: 1\n---\n,").find("more than one YAML document"), std::string::npos);
  EXPECT_NE(ErrorOf("version: 1\n? [a]\n: 1\n").find("not a plain name"), std::string::npos);
  // Values and keys with newlines or junk still give one line.
  EXPECT_EQ(ErrorOf("version: 1\nlog_level: \"a\\nb\"\n"),
            "c.yaml:2: log_level: \"a\\nb\" is not a log level; want one of trace, debug, info, warn, error, "
            "critical, off");
  for (const std::string& bad :
       std::vector<std::string>{"version: 1\n\"we\\nird\": 1\n", "version: 1\ndefaults: {memory: \"4\\nGiB\"}\n",
                                "version: 1\nsocket: {path: \"" + std::string(5000, 'x') + "\\x01\"}\n"}) {
    const std::string e = ErrorOf(bad);
    EXPECT_EQ(e.find('\n'), std::string::npos) << e;
    EXPECT_LT(e.size(), 400u) << e;
  }
  // Deep nesting is refused by yaml-cpp's depth guard, not a stack overflow.
  EXPECT_FALSE(Parse("version: 1\nx: " + std::string(100000, '[')).ok());
}

TEST(DaemonConfigTest, LevelsAreKeptAsTheirOwnDocumentAndCheckedByTheTaskParser) {
  StatusOr<DaemonConfig> c =
      Parse("version: 1\nlevels:\n  - {name: gold, class: lc, slo_ms: 5}\n  - {name: tin, class: be}\n");
  ASSERT_TRUE(c.ok()) << c.status().message();
  auto table = task::LevelTable::Parse(c->levels_yaml, "stored");
  ASSERT_TRUE(table.ok()) << table.status().message() << "\n" << c->levels_yaml;
  EXPECT_EQ(table->Names(), "gold, lc, tin, be");
  EXPECT_EQ(table->levels()[0].slo_ns, 5'000'000u);
  EXPECT_TRUE(Parse("version: 1\n")->levels_yaml.empty()) << "no `levels:`: the default levels";
  EXPECT_EQ(ErrorOf("version: 1\nlevels:\n  - {name: be, class: be}\n"),
            "c.yaml:3: levels[0]: `be` is a built-in level; give yours another name");
  EXPECT_EQ(ErrorOf("version: 1\nlevels:\n  - {name: low, class: be}\n  - {name: hi, class: lc}\n"),
            "c.yaml:4: levels[1]: latency-critical level `hi` is listed below a best-effort one; list every "
            "`class: lc` level first (every latency-critical level is above every best-effort one)");
}

TEST(DaemonConfigTest, RemoteMetricsAllowedWhenAskedOrDisabled) {
  EXPECT_TRUE(Parse("version: 1\nmetrics: {address: '0.0.0.0:9400', allow_remote: true}\n").ok());
  EXPECT_TRUE(Parse("version: 1\nmetrics: {address: '0.0.0.0:9400', enabled: false}\n").ok());
  EXPECT_TRUE(Parse("version: 1\nmetrics: {address: 'localhost:1'}\n").ok());
}

TEST(DaemonConfigTest, ExampleFileParsesAndMatchesTheDefaults) {
  StatusOr<DaemonConfig> c = LoadDaemonConfig(GPUSLICE_EXAMPLE_CONFIG);
  ASSERT_TRUE(c.ok()) << c.status().message();
  // The example documents the defaults; if a default changes, update
  // deploy/gpuslice/config.example.yaml and docs/configuration.md.
  const DaemonConfig d;
  EXPECT_EQ(c->state_dir, d.state_dir);
  EXPECT_EQ(c->socket.path, d.socket.path);
  EXPECT_EQ(c->socket.group, d.socket.group);
  EXPECT_EQ(c->metrics.enabled, d.metrics.enabled);
  EXPECT_EQ(c->metrics.address, d.metrics.address);
  EXPECT_EQ(c->metrics.allow_remote, d.metrics.allow_remote);
  EXPECT_EQ(c->defaults.memory_bytes, d.defaults.memory_bytes);
  EXPECT_EQ(c->defaults.compute_pct, d.defaults.compute_pct);
  EXPECT_EQ(c->defaults.priority, d.defaults.priority);
  EXPECT_EQ(c->timeslices.be_period_us, d.timeslices.be_period_us);
  EXPECT_EQ(c->timeslices.be_min_slice_us, d.timeslices.be_min_slice_us);
  EXPECT_EQ(c->timeslices.be_slice_beside_lc_us, d.timeslices.be_slice_beside_lc_us);
  EXPECT_EQ(c->timeslices.be_period_with_lc_us, d.timeslices.be_period_with_lc_us);
  EXPECT_EQ(c->timeslices.be_shares, d.timeslices.be_shares);
  EXPECT_EQ(c->timeslices.be_turns, d.timeslices.be_turns);
  EXPECT_EQ(c->timeslices.be_min_slice_with_lc_us, d.timeslices.be_min_slice_with_lc_us);
  EXPECT_EQ(c->timeslices.lc_slice_us, d.timeslices.lc_slice_us);
  EXPECT_EQ(c->timeslices.lc_shared_slice_us, d.timeslices.lc_shared_slice_us);
  EXPECT_EQ(c->audit.action, d.audit.action);
  EXPECT_EQ(c->audit.unmanaged, d.audit.unmanaged);
  EXPECT_EQ(c->audit.raised_slice, d.audit.raised_slice);
  EXPECT_EQ(c->audit.hidden_groups, d.audit.hidden_groups);
  EXPECT_EQ(c->audit.over_cap, d.audit.over_cap);
  EXPECT_EQ(c->audit.over_cap_margin_pct, d.audit.over_cap_margin_pct);
  EXPECT_EQ(c->audit.over_cap_window_s, d.audit.over_cap_window_s);
  EXPECT_EQ(c->audit.grace_ms, d.audit.grace_ms);
  EXPECT_EQ(c->audit.context_allowance_bytes, d.audit.context_allowance_bytes);
  EXPECT_EQ(c->reap_interval_ms, d.reap_interval_ms);
  EXPECT_EQ(c->log_level, d.log_level);
}

TEST(DaemonConfigTest, MissingFileNamesItAndTheFix) {
  StatusOr<DaemonConfig> c = LoadDaemonConfig("/nonexistent/gpuslice.yaml");
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().message(),
            "/nonexistent/gpuslice.yaml: cannot open the configuration file; create it (see "
            "deploy/gpuslice/config.example.yaml) or pass --config PATH");
}

TEST(DaemonConfigTest, EnvironmentOverridesFileAndNamesTheVariable) {
  DaemonConfig c;
  std::map<std::string, std::string> env = {
      {"GPUSLICE_METRICS_ADDRESS", "127.0.0.1:9999"}, {"GPUSLICE_SOCKET", "/tmp/x.sock"}, {"GPUSLICE_LOG", ""}};
  auto getenv = [&env](const char* name) -> const char* {
    auto it = env.find(name);
    return it == env.end() ? nullptr : it->second.c_str();
  };
  ASSERT_TRUE(ApplyEnvironment(c, getenv).ok());
  EXPECT_EQ(c.metrics.address, "127.0.0.1:9999");
  EXPECT_EQ(c.socket.path, "/tmp/x.sock");
  EXPECT_EQ(c.log_level, "info");  // empty: unchanged

  env["GPUSLICE_METRICS_ADDRESS"] = "10.0.0.1:9400";
  Status s = ApplyEnvironment(c, getenv);
  EXPECT_EQ(s.message(),
            "GPUSLICE_METRICS_ADDRESS (metrics.address): \"10.0.0.1:9400\" is not a loopback address; set "
            "metrics.allow_remote: true to serve other hosts, or use 127.0.0.1:PORT");
}

TEST(DaemonConfigTest, ValidateNamesTheOrigin) {
  DaemonConfig c;
  EXPECT_TRUE(ValidateDaemonConfig(c, "flags").ok());
  c.defaults.compute_pct = 101;
  EXPECT_EQ(ValidateDaemonConfig(c, "--compute").message(),
            "--compute: defaults.compute: 101 is out of range; want a percentage 1..100");
}

}  // namespace
}  // namespace gpuslice::config
