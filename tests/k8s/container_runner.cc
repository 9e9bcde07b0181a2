#include "container_runner.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>

#include "test_util.h"

extern char** environ;

namespace gpuslice::k8s::testing {
namespace {

// What podman needs on these machines: runc (crun fails here), and explicit
// rlimits (runc is refused raising them to podman's defaults).
std::vector<std::string> PodmanRun() {
  return {"podman", "--runtime", "runc", "run", "--rm", "--ulimit", "nofile=1024:1024", "--ulimit", "nproc=4096:4096"};
}

std::string Getenv(const char* name) {
  const char* v = getenv(name);
  return v == nullptr ? "" : v;
}

void AddMounts(const std::vector<std::string>& paths, std::vector<std::string>* argv) {
  for (const std::string& p : paths) {
    argv->push_back("-v");
    argv->push_back(p + ":" + p);
  }
}

void AddEnv(const std::vector<std::string>& env, std::vector<std::string>* argv) {
  for (const std::string& e : env) {
    argv->push_back("-e");
    argv->push_back(e);
  }
}

pid_t Spawn(const std::vector<std::string>& args, const std::vector<std::string>* env, const std::string& log) {
  std::vector<std::string> a = args, e = env == nullptr ? std::vector<std::string>() : *env;
  std::vector<char*> argv, envp;
  for (auto& s : a) argv.push_back(s.data());
  argv.push_back(nullptr);
  for (auto& s : e) envp.push_back(s.data());
  envp.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0600);
  posix_spawn_file_actions_adddup2(&actions, STDOUT_FILENO, STDERR_FILENO);
  pid_t pid = -1;
  // podman is found on PATH with the test's own environment; a native
  // binary is run by path with exactly the environment asked for.
  const int rc = env == nullptr ? posix_spawnp(&pid, argv[0], &actions, nullptr, argv.data(), environ)
                                : posix_spawn(&pid, argv[0], &actions, nullptr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  return rc == 0 ? pid : -1;
}

int RunToEnd(const std::vector<std::string>& args, const std::vector<std::string>* env, std::string* output) {
  static std::atomic<int> counter{0};
  const std::string log = "/tmp/gpuslice-run-" + std::to_string(getpid()) + "-" + std::to_string(counter++) + ".log";
  const pid_t pid = Spawn(args, env, log);
  int status = 0;
  if (pid > 0) waitpid(pid, &status, 0);
  *output = ReadFile(log);
  unlink(log.c_str());
  if (pid <= 0) return -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

}  // namespace

std::string PluginImage() { return Getenv("GPUSLICE_TEST_IMAGE"); }
std::string AppImage() { return Getenv("GPUSLICE_TEST_APP_IMAGE"); }

GpusliceProcess::~GpusliceProcess() {
  if (pid_ > 0) {
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
  }
}

bool GpusliceProcess::Start(const Options& o) {
  if (PluginImage().empty()) {
    std::vector<std::string> args = {o.binary};
    args.insert(args.end(), o.args.begin(), o.args.end());
    pid_ = Spawn(args, &o.env, o.log_file);
  } else {
    std::vector<std::string> args = PodmanRun();
    args.insert(args.end(), {"--network", "host"});
    AddMounts(o.shared_paths, &args);
    AddEnv(o.env, &args);
    args.push_back(PluginImage());
    args.insert(args.end(), o.args.begin(), o.args.end());
    pid_ = Spawn(args, nullptr, o.log_file);
  }
  return pid_ > 0;
}

int GpusliceProcess::Stop() {
  if (pid_ <= 0) return -1;
  // podman passes the signal on to the container's process and exits with
  // its status.
  kill(pid_, SIGTERM);
  int status = 0;
  const bool exited = WaitFor([&] { return waitpid(pid_, &status, WNOHANG) == pid_; }, std::chrono::seconds(10));
  if (!exited) {
    kill(pid_, SIGKILL);
    waitpid(pid_, &status, 0);
  }
  pid_ = -1;
  return exited ? status : -1;
}

int RunGpuslice(const std::string& binary, const std::vector<std::string>& args,
                const std::vector<std::string>& shared_paths, std::string* output) {
  if (PluginImage().empty()) {
    std::vector<std::string> argv = {binary};
    argv.insert(argv.end(), args.begin(), args.end());
    const std::vector<std::string> env = {"PATH=/usr/bin:/bin"};
    return RunToEnd(argv, &env, output);
  }
  std::vector<std::string> argv = PodmanRun();
  argv.insert(argv.end(), {"--network", "none"});
  AddMounts(shared_paths, &argv);
  argv.push_back(PluginImage());
  argv.insert(argv.end(), args.begin(), args.end());
  return RunToEnd(argv, nullptr, output);
}

int RunWithCdiDevice(const nlohmann::json& spec, const std::string& device_name, const std::vector<std::string>& argv,
                     const std::vector<std::string>& extra_env, std::string* output) {
  std::vector<std::string> args = PodmanRun();
  args.insert(args.end(), {"--network", "none"});
  auto apply = [&](const nlohmann::json& edits) {
    if (!edits.is_object()) return;
    for (const auto& e : edits.value("env", nlohmann::json::array())) AddEnv({e.get<std::string>()}, &args);
    for (const auto& m : edits.value("mounts", nlohmann::json::array())) {
      std::string bind = m["hostPath"].get<std::string>() + ":" + m["containerPath"].get<std::string>();
      std::string options;
      for (const auto& opt : m.value("options", nlohmann::json::array())) {
        const std::string o = opt.get<std::string>();
        if (o == "ro" || o == "rw") options += (options.empty() ? "" : ",") + o;  // podman's own bind options
      }
      if (!options.empty()) bind += ":" + options;
      args.insert(args.end(), {"-v", bind});
    }
  };
  apply(spec.value("containerEdits", nlohmann::json()));
  bool found = false;
  for (const auto& d : spec["devices"]) {
    if (d["name"] == device_name) {
      apply(d["containerEdits"]);
      found = true;
    }
  }
  if (!found) {
    *output = "no device " + device_name + " in the spec";
    return -1;
  }
  AddEnv(extra_env, &args);
  args.push_back(AppImage());
  args.insert(args.end(), argv.begin(), argv.end());
  return RunToEnd(args, nullptr, output);
}

bool InOrder(const std::string& text, const std::vector<std::string>& parts) {
  size_t at = 0;
  for (const std::string& part : parts) {
    at = text.find(part, at);
    if (at == std::string::npos) return false;
    at += part.size();
  }
  return true;
}

}  // namespace gpuslice::k8s::testing
