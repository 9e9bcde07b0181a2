// Reclaiming gone pods' vGPUs: the two liveness sources (cgroup trees of
// v1 and v2 in both kubelet drivers' layouts, matching rules), judging a
// container's processes from the host, and whole reclaim passes with fakes.
#include "k8s/reclaimer.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <unistd.h>

#include <filesystem>

#include "core/memory_ledger.h"
#include "core/vgpu_store.h"
#include "k8s/cdi.h"
#include "k8s/host_process_probe.h"
#include "k8s/pod_liveness.h"
#include "test_util.h"

namespace gpuslice::k8s {
namespace {

using testing::TempDir;
namespace fs = std::filesystem;

const std::string kUidA = "0a1b2c3d-0000-4000-8000-00000000000a";
const std::string kUidB = "0a1b2c3d-0000-4000-8000-00000000000b";
const std::string kUidC = "0a1b2c3d-0000-4000-8000-00000000000c";

std::string Underscored(std::string uid) {
  for (char& c : uid) {
    if (c == '-') c = '_';
  }
  return uid;
}

std::set<std::string> Uids(const std::vector<LivePod>& pods) {
  std::set<std::string> out;
  for (const LivePod& p : pods) out.insert(p.uid);
  return out;
}

TEST(CgroupLiveness, ReadsEveryKubeletLayout) {
  TempDir v2;
  fs::create_directories(v2 / ("kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" + Underscored(kUidA) +
                               ".slice/cri-containerd-abc.scope"));
  fs::create_directories(v2 / ("kubepods.slice/kubepods-pod" + Underscored(kUidB) + ".slice"));  // Guaranteed QoS
  fs::create_directories(v2 / "system.slice/kubelet.service");
  auto pods = NewCgroupLiveness(v2.path())->List();
  ASSERT_TRUE(pods.ok()) << pods.status().message();
  EXPECT_EQ(Uids(*pods), (std::set<std::string>{kUidA, kUidB}));

  TempDir cgroupfs;  // v2 with the cgroupfs driver
  fs::create_directories(cgroupfs / ("kubepods/besteffort/pod" + kUidC + "/0123456789ab"));
  pods = NewCgroupLiveness(cgroupfs.path())->List();
  ASSERT_TRUE(pods.ok());
  EXPECT_EQ(Uids(*pods), std::set<std::string>{kUidC});

  TempDir v1;  // one tree per controller
  fs::create_directories(v1 / ("memory/kubepods/burstable/pod" + kUidA));
  fs::create_directories(v1 / ("cpu,cpuacct/kubepods/pod" + kUidB));
  pods = NewCgroupLiveness(v1.path())->List();
  ASSERT_TRUE(pods.ok());
  EXPECT_EQ(Uids(*pods), (std::set<std::string>{kUidA, kUidB}));

  TempDir empty;
  fs::create_directories(empty / "system.slice");
  auto none = NewCgroupLiveness(empty.path())->List();
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.status().message().find("no kubepods cgroup"), std::string::npos);
  EXPECT_FALSE(NewCgroupLiveness(empty / "absent")->List().ok());
}

TEST(PodResourcesLiveness, AnUnreachableKubeletIsAnErrorNotAnEmptyNode) {
  auto pods = NewPodResourcesLiveness("/nonexistent/kubelet.sock")->List();
  ASSERT_FALSE(pods.ok());
  EXPECT_NE(pods.status().message().find("--pod-liveness=cgroup"), std::string::npos);
}

TEST(IsAlive, MatchingRules) {
  Assignment a;
  a.pod_uid = kUidA;
  a.namespace_name = "ml";
  a.pod = "train-0";
  a.device_ids[Resource::kVcore] = {"GPU-x-vcore-1", "GPU-x-vcore-2"};
  EXPECT_TRUE(IsAlive(a, {{"", "", kUidA, {}}}));  // cgroups, by UID
  EXPECT_FALSE(IsAlive(a, {{"", "", kUidB, {}}}));
  EXPECT_TRUE(IsAlive(a, {{"ml", "train-0", "", {"GPU-x-vcore-2"}}}));   // pod-resources, same devices
  EXPECT_FALSE(IsAlive(a, {{"ml", "train-0", "", {"GPU-x-vcore-9"}}}));  // a same-named replacement
  EXPECT_TRUE(IsAlive(a, {{"ml", "train-0", "", {}}}));                  // no device detail: by name
  EXPECT_FALSE(IsAlive(a, {{"other", "train-0", "", {}}}));
  EXPECT_FALSE(IsAlive(a, {}));
}

// A fake /proc with processes in the given pid namespaces.
void FakeProc(const std::string& root, const std::vector<std::pair<int, uint64_t>>& processes) {
  for (const auto& [pid, ns] : processes) {
    fs::create_directories(root + "/" + std::to_string(pid) + "/ns");
    fs::create_symlink("pid:[" + std::to_string(ns) + "]", root + "/" + std::to_string(pid) + "/ns/pid");
  }
  fs::create_directories(root + "/self");  // not a pid: ignored
}

TEST(HostProcessProbe, AForeignNamespaceLivesAsLongAsOneOfItsProcesses) {
  TempDir proc;
  FakeProc(proc.path(), {{100, 4026532001}, {101, 4026532001}, {200, 4026532002}});
  HostProcessProbe probe(proc.path());
  EXPECT_FALSE(probe.IsGone({7, 1, 4026532001}));  // no snapshot yet: cannot tell
  probe.Refresh();
  EXPECT_FALSE(probe.IsGone({7, 1, 4026532001}));
  EXPECT_TRUE(probe.IsGone({7, 1, 4026532999}));
  // Our own namespace is judged by pid and start time, as the core does.
  port::ProcessIdentity self = probe.Self();
  EXPECT_FALSE(probe.IsGone(self));
  EXPECT_EQ(probe.Self().pid, static_cast<uint32_t>(getpid()));
}

class ReclaimerTest : public ::testing::Test {
 protected:
  class ScriptedLiveness final : public PodLiveness {
   public:
    StatusOr<std::vector<LivePod>> List() override {
      if (!error.empty()) return Status::Error(error);
      return pods;
    }
    std::vector<LivePod> pods;
    std::string error;
  };

  ReclaimerTest()
      : resources_(Topology(), "node-a"),
        store_(dir_ / "state/k8s/assignments"),
        provisioner_(NewStoreProvisioner(dir_ / "state")),
        probe_(dir_ / "proc") {}

  static NodeTopology Topology() {
    NodeTopology t;
    t.gpus.push_back({0, "GPU-face0000-0000-0000-0000-000000000000", "", 4ull << 30, ""});
    return t;
  }

  // A vGPU for a pod, recorded `age_s` seconds ago, with one process of pid
  // namespace `ns` that was killed without detaching (0: no process).
  void Add(const std::string& name, const std::string& uid, int64_t age_s, uint64_t ns) {
    Assignment a;
    a.vgpu = name;
    a.pod_uid = uid;
    a.namespace_name = "ml";
    a.pod = "pod-" + uid.substr(uid.size() - 1);
    a.container = "main";
    a.gpus = {0};
    a.uuids = {"GPU-face0000-0000-0000-0000-000000000000"};
    a.vcore_per_gpu = 10;
    a.vmemory_units_per_gpu = 1;
    a.created_unix_s = now_ - age_s;
    core::VgpuSpec spec;
    spec.name = name;
    spec.devices.resize(1);
    ASSERT_TRUE(provisioner_->Provision(spec).ok());
    ASSERT_TRUE(store_.Save(a).ok());
    resources_.Put(a);
    if (ns != 0) Charge(name, ns);
  }

  void Charge(const std::string& name, uint64_t ns) {
    auto handle = core::VgpuHandle::Open(dir_ / ("state/vgpus/" + name), port::MappedFile::Access::kReadOnly);
    ASSERT_TRUE(handle.ok());
    core::MemoryLedger ledger(&handle->limits(), &handle->ledger());
    ASSERT_TRUE(ledger.Attach({7, 1, ns}, probe_).ok());
    ASSERT_TRUE(ledger.TryCharge(0, 1 << 20));
    // No Detach: the process was killed.
  }

  Reclaimer MakeReclaimer() {
    return Reclaimer(&resources_, &store_, provisioner_.get(), &liveness_, &probe_, dir_ / "state", dir_ / "cdi",
                     std::chrono::seconds(60), [this] { return now_; });
  }

  std::set<std::string> Vgpus() const {
    auto list = provisioner_->List();
    return {list.begin(), list.end()};
  }

  TempDir dir_;
  int64_t now_ = 1'800'000'000;
  ResourceManager resources_;
  AssignmentStore store_;
  std::unique_ptr<VgpuProvisioner> provisioner_;
  HostProcessProbe probe_;
  ScriptedLiveness liveness_;
};

TEST_F(ReclaimerTest, RemovesOnlyGoneUnusedAndOldVgpus) {
  FakeProc(dir_ / "proc", {{1, 4026531836}, {300, 4026532050}});
  const std::string kUidD = "0a1b2c3d-0000-4000-8000-00000000000d";
  Add("k8s-gone-dead", kUidA, 3600, 4026532049);  // pod gone, its namespace gone: remove
  Add("k8s-gone-busy", kUidB, 3600, 4026532050);  // pod gone, a process still in its namespace: keep
  Add("k8s-alive", kUidC, 3600, 0);               // pod alive: keep
  Add("k8s-young", kUidD, 10, 0);                 // pod not listed yet, but younger than the grace: keep
  core::VgpuSpec orphan;
  orphan.name = "k8s-orphan-0";
  orphan.devices.resize(1);
  ASSERT_TRUE(provisioner_->Provision(orphan).ok());  // made, never recorded (crash)
  struct timeval old[2] = {{now_ - 3600, 0}, {now_ - 3600, 0}};
  ASSERT_EQ(utimes((dir_ / "state/vgpus/k8s-orphan-0").c_str(), old), 0);
  core::VgpuSpec run;
  run.name = "run-123";  // a `gpuslice run` vGPU: not ours
  run.devices.resize(1);
  ASSERT_TRUE(provisioner_->Provision(run).ok());
  liveness_.pods = {{"", "", kUidC, {}}};

  // The device plugin's CDI specs (cdi.h) go with their vGPUs.
  fs::create_directories(dir_ / "cdi");
  for (const char* name : {"k8s-gone-dead", "k8s-gone-busy", "k8s-orphan-0"}) {
    testing::WriteFile(CdiSpecPath(dir_ / "cdi", name), "{}");
  }

  Reclaimer reclaimer = MakeReclaimer();
  auto removed = reclaimer.ReclaimOnce();
  ASSERT_TRUE(removed.ok()) << removed.status().message();
  EXPECT_EQ(*removed, 2u);
  EXPECT_FALSE(fs::exists(CdiSpecPath(dir_ / "cdi", "k8s-gone-dead")));
  EXPECT_FALSE(fs::exists(CdiSpecPath(dir_ / "cdi", "k8s-orphan-0")));
  EXPECT_TRUE(fs::exists(CdiSpecPath(dir_ / "cdi", "k8s-gone-busy"))) << "its vGPU is still in use";
  EXPECT_EQ(Vgpus(), (std::set<std::string>{"k8s-alive", "k8s-gone-busy", "k8s-young", "run-123"}));
  std::set<std::string> records;
  for (const Assignment& a : store_.LoadAll(nullptr)) records.insert(a.vgpu);
  EXPECT_EQ(records, (std::set<std::string>{"k8s-alive", "k8s-gone-busy", "k8s-young"}));
  EXPECT_FALSE(resources_.FindContainer(kUidA, "main"));
  EXPECT_EQ(resources_.Usage().gpus[0].vcore_used, 30u);  // three 10-vcore containers left

  // The busy one's last process exits: the next pass removes it.
  fs::remove_all(dir_ / "proc/300");
  removed = reclaimer.ReclaimOnce();
  ASSERT_TRUE(removed.ok());
  EXPECT_EQ(*removed, 1u);
  EXPECT_EQ(Vgpus(), (std::set<std::string>{"k8s-alive", "k8s-young", "run-123"}));
}

TEST_F(ReclaimerTest, NothingIsReclaimedWhenLivenessCannotBeTold) {
  FakeProc(dir_ / "proc", {{1, 4026531836}});
  Add("k8s-gone", kUidA, 3600, 0);
  liveness_.error = "the kubelet's pod-resources API did not answer";
  Reclaimer reclaimer = MakeReclaimer();
  auto removed = reclaimer.ReclaimOnce();
  ASSERT_FALSE(removed.ok());
  EXPECT_NE(removed.status().message().find("did not answer"), std::string::npos);
  EXPECT_EQ(Vgpus(), std::set<std::string>{"k8s-gone"});
}

}  // namespace
}  // namespace gpuslice::k8s
