#include "rm/got_patch.h"

#include <dlfcn.h>
#include <gtest/gtest.h>

#include <atomic>
#include <cerrno>
#include <cstdarg>

namespace gpuslice::rm {
namespace {

using Call = int (*)(int, unsigned long, void*);
using IoctlFn = int (*)(int, unsigned long, ...);

std::atomic<void*> g_original{nullptr};
int g_calls = 0;

int Replacement(int fd, unsigned long request, ...) {
  ++g_calls;
  va_list ap;
  va_start(ap, request);
  void* arg = va_arg(ap, void*);
  va_end(ap);
  return reinterpret_cast<IoctlFn>(g_original.load())(fd, request, arg);
}

void* Resolve(const char* symbol) { return dlsym(RTLD_DEFAULT, symbol); }

class GotPatchTest : public ::testing::TestWithParam<const char*> {};

TEST_P(GotPatchTest, RedirectsTheObjectsIoctlAndForwardsToTheOriginal) {
  void* handle = dlopen(GetParam(), RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(handle, nullptr) << dlerror();
  auto call = reinterpret_cast<Call>(dlsym(handle, "got_target_call"));
  ASSERT_NE(call, nullptr);
  g_original = nullptr;
  g_calls = 0;
  GotPatchResult r = PatchImport(handle, "ioctl", reinterpret_cast<void*>(&Replacement), &Resolve, &g_original);
  ASSERT_EQ(r.error, nullptr);
  ASSERT_GE(r.patched, 1);
  EXPECT_EQ(g_original.load(), dlsym(RTLD_DEFAULT, "ioctl"));  // libc's, resolved even if the slot was lazy
  // The original really runs: an ioctl on a bad descriptor fails with EBADF.
  errno = 0;
  EXPECT_EQ(call(-1, 0x5401 /* TCGETS */, nullptr), -1);
  EXPECT_EQ(errno, EBADF);
  EXPECT_EQ(g_calls, 1);
  // Patching again changes nothing.
  EXPECT_EQ(PatchImport(handle, "ioctl", reinterpret_cast<void*>(&Replacement), &Resolve, &g_original).patched, 0);
  call(-1, 0x5401, nullptr);
  EXPECT_EQ(g_calls, 2);
  // This process's own ioctl is untouched.
  reinterpret_cast<IoctlFn>(dlsym(RTLD_DEFAULT, "ioctl"))(-1, 0x5401, nullptr);
  EXPECT_EQ(g_calls, 2);
}

INSTANTIATE_TEST_SUITE_P(BindingModes, GotPatchTest, ::testing::Values(GOT_TARGET_LAZY, GOT_TARGET_NOW));

TEST(GotPatchErrorsTest, AnObjectWithoutTheImportIsNotPatched) {
  void* handle = dlopen(GOT_TARGET_NOW, RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(handle, nullptr);
  std::atomic<void*> original{nullptr};
  GotPatchResult r = PatchImport(handle, "no_such_import", reinterpret_cast<void*>(&Replacement), &Resolve, &original);
  EXPECT_EQ(r.patched, 0);
  EXPECT_EQ(original.load(), nullptr);
  EXPECT_NE(PatchImport(nullptr, "ioctl", nullptr, &Resolve, &original).error, nullptr);
}

}  // namespace
}  // namespace gpuslice::rm
