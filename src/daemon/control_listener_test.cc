#include "daemon/control_listener.h"

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <optional>
#include <vector>

#include "gpuslice/control.grpc.pb.h"
#include "port/mutex.h"

namespace gpuslice::daemon {
namespace {

namespace pb = control::v1;

// Answers GetStatus, recording who the listener says called.
class RecordingService final : public pb::Control::Service {
 public:
  explicit RecordingService(const ControlListener* listener) : listener_(listener) {}
  grpc::Status GetStatus(grpc::ServerContext* context, const pb::GetStatusRequest*, pb::GetStatusResponse*) override {
    port::MutexLock lock(&mu_);
    callers_.push_back(listener_->CallerOf(*context));
    return grpc::Status::OK;
  }
  std::vector<std::optional<ControlListener::Caller>> callers() {
    port::MutexLock lock(&mu_);
    return callers_;
  }

 private:
  const ControlListener* const listener_;
  port::Mutex mu_;
  std::vector<std::optional<ControlListener::Caller>> callers_ GUARDED_BY(mu_);
};

class ControlListenerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/gs-listen-XXXXXX";
    dir_ = mkdtemp(tmpl);
    path_ = dir_ + "/control.sock";
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string dir_, path_;
};

TEST_F(ControlListenerTest, EachCallNamesTheKernelsCallerAcrossReusedConnections) {
  auto listener = ControlListener::Listen(path_);
  ASSERT_TRUE(listener.ok()) << listener.status().message();
  EXPECT_EQ(std::filesystem::status(path_).permissions(),
            std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);
  RecordingService service(listener.value().get());
  grpc::ServerBuilder builder;
  builder.RegisterService(&service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  ASSERT_NE(server, nullptr);
  listener.value()->Start(server.get());
  // One channel after another: each closed connection frees a descriptor
  // number that the next may get.
  constexpr int kChannels = 3;
  for (int i = 0; i < kChannels; ++i) {
    auto stub = pb::Control::NewStub(grpc::CreateChannel("unix:" + path_, grpc::InsecureChannelCredentials()));
    for (int call = 0; call < 2; ++call) {
      grpc::ClientContext context;
      pb::GetStatusResponse response;
      ASSERT_TRUE(stub->GetStatus(&context, pb::GetStatusRequest(), &response).ok());
    }
  }
  const auto callers = service.callers();
  ASSERT_EQ(callers.size(), 2u * kChannels);
  for (const auto& caller : callers) {
    ASSERT_TRUE(caller.has_value());
    EXPECT_EQ(caller->uid, geteuid());
    EXPECT_EQ(caller->gid, getegid());
    EXPECT_EQ(caller->pid, getpid());
  }
  EXPECT_EQ(listener.value()->accepted(), static_cast<uint64_t>(kChannels));
  listener.value()->Stop();
  server->Shutdown();
}

TEST_F(ControlListenerTest, ACallThatDidNotComeThroughTheListenerHasNoCaller) {
  auto listener = ControlListener::Listen(path_);
  ASSERT_TRUE(listener.ok());
  RecordingService service(listener.value().get());
  grpc::ServerBuilder builder;
  builder.RegisterService(&service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  ASSERT_NE(server, nullptr);
  // In-process: its peer is not a descriptor the listener accepted.
  auto stub = pb::Control::NewStub(server->InProcessChannel(grpc::ChannelArguments()));
  grpc::ClientContext context;
  pb::GetStatusResponse response;
  ASSERT_TRUE(stub->GetStatus(&context, pb::GetStatusRequest(), &response).ok());
  ASSERT_EQ(service.callers().size(), 1u);
  EXPECT_FALSE(service.callers()[0].has_value());
  server->Shutdown();
}

TEST_F(ControlListenerTest, APathThatCannotBeBoundSaysSo) {
  auto listener = ControlListener::Listen(dir_ + "/missing/control.sock");
  ASSERT_FALSE(listener.ok());
  EXPECT_NE(listener.status().message().find("cannot listen on"), std::string::npos) << listener.status().message();
}

}  // namespace
}  // namespace gpuslice::daemon
