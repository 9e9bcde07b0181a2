// Every CUDA driver entry point named in cuda.h is either hooked or forwarded
// by libgpuslice-cuda.so, and the library exports nothing else but NVML's
// memory queries, dlsym, ioctl and gpuslice_*.
#include <dlfcn.h>
#include <elf.h>
#include <gtest/gtest.h>
#include <link.h>

#include <cstring>
#include <set>
#include <string>

#include "interposer/hook_list.h"

namespace {

const char* const kDriverSymbols[] = {
#define GPUSLICE_DRIVER_SYMBOL(name) #name,
#include "driver_symbols.inc"
#undef GPUSLICE_DRIVER_SYMBOL
};

// The dynamic symbols a loaded library defines, read from its .dynsym.
std::set<std::string> DefinedDynamicSymbols(void* handle) {
  link_map* map = nullptr;
  dlinfo(handle, RTLD_DI_LINKMAP, &map);
  const ElfW(Sym)* symtab = nullptr;
  const char* strtab = nullptr;
  size_t count = 0;
  for (const ElfW(Dyn)* d = map->l_ld; d->d_tag != DT_NULL; ++d) {
    if (d->d_tag == DT_SYMTAB) symtab = reinterpret_cast<const ElfW(Sym)*>(d->d_un.d_ptr);
    if (d->d_tag == DT_STRTAB) strtab = reinterpret_cast<const char*>(d->d_un.d_ptr);
    if (d->d_tag == DT_HASH) count = reinterpret_cast<const uint32_t*>(d->d_un.d_ptr)[1];
  }
  if (count == 0) count = (reinterpret_cast<const char*>(strtab) - reinterpret_cast<const char*>(symtab)) / sizeof(ElfW(Sym));
  std::set<std::string> names;
  for (size_t i = 0; i < count; ++i) {
    if (symtab[i].st_shndx != SHN_UNDEF && symtab[i].st_name != 0) names.insert(strtab + symtab[i].st_name);
  }
  return names;
}

class ExportsTest : public ::testing::TestWithParam<const char*> {};

TEST_P(ExportsTest, EveryDriverSymbolIsHookedOrForwarded) {
  void* lib = dlopen(GetParam(), RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(lib, nullptr) << dlerror();
  const std::set<std::string> exported = DefinedDynamicSymbols(lib);
  size_t hooked = 0;
  for (const char* name : kDriverSymbols) {
    EXPECT_TRUE(exported.count(name)) << name << " is neither hooked nor forwarded";
  }
#define GPUSLICE_CHECK_HOOK(name) \
  EXPECT_TRUE(exported.count(#name)) << "hook " #name " is not exported"; \
  ++hooked;
  GPUSLICE_CUDA_HOOKS(GPUSLICE_CHECK_HOOK)
  GPUSLICE_NVML_HOOKS(GPUSLICE_CHECK_HOOK)
#undef GPUSLICE_CHECK_HOOK
  EXPECT_GT(hooked, 20u);
  for (const std::string& name : exported) {
    const bool allowed = name.rfind("cu", 0) == 0 || name.rfind("nvml", 0) == 0 || name == "dlsym" || name == "ioctl" ||
                         name.rfind("gpuslice_", 0) == 0;
    EXPECT_TRUE(allowed) << "unexpected export " << name;
  }
}

INSTANTIATE_TEST_SUITE_P(BothLoadModes, ExportsTest,
                         ::testing::Values(GPUSLICE_PRELOAD_LIBRARY, GPUSLICE_SHIM_LIBRARY));

}  // namespace
