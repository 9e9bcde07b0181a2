#include "rm/got_patch.h"

#include <dlfcn.h>
#include <elf.h>
#include <link.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>

namespace gpuslice::rm {
namespace {

struct Relro {
  uintptr_t base = 0;
  uintptr_t begin = 0;
  uintptr_t end = 0;
  uintptr_t object_begin = ~uintptr_t{0};  // the object's mapped extent (PT_LOAD)
  uintptr_t object_end = 0;
};

int FindSegments(dl_phdr_info* info, size_t, void* data) {
  auto* r = static_cast<Relro*>(data);
  if (info->dlpi_addr != r->base) return 0;
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr)& ph = info->dlpi_phdr[i];
    const uintptr_t begin = info->dlpi_addr + ph.p_vaddr;
    if (ph.p_type == PT_GNU_RELRO) {
      r->begin = begin;
      r->end = begin + ph.p_memsz;
    } else if (ph.p_type == PT_LOAD) {
      if (begin < r->object_begin) r->object_begin = begin;
      if (begin + ph.p_memsz > r->object_end) r->object_end = begin + ph.p_memsz;
    }
  }
  return 1;
}

// Dynamic-section pointers: glibc relocates them in place on x86-64, but an
// object whose dynamic section is read-only keeps them relative.
uintptr_t Ptr(ElfW(Addr) value, uintptr_t base) { return value < base ? value + base : value; }

}  // namespace

GotPatchResult PatchImport(void* handle, const char* symbol, void* replacement, void* (*resolve)(const char*),
                           std::atomic<void*>* original_out, const void* already_hooked) {
  GotPatchResult result;
  link_map* lm = nullptr;
  if (handle == nullptr || dlinfo(handle, RTLD_DI_LINKMAP, &lm) != 0 || lm == nullptr) {
    result.error = "dlinfo(RTLD_DI_LINKMAP) failed";
    return result;
  }
  const uintptr_t base = lm->l_addr;
  const ElfW(Sym)* symtab = nullptr;
  const char* strtab = nullptr;
  uintptr_t jmprel = 0, rela = 0;
  size_t jmprel_size = 0, rela_size = 0, rela_ent = sizeof(ElfW(Rela));
  for (const ElfW(Dyn)* d = lm->l_ld; d->d_tag != DT_NULL; ++d) {
    switch (d->d_tag) {
      case DT_SYMTAB: symtab = reinterpret_cast<const ElfW(Sym)*>(Ptr(d->d_un.d_ptr, base)); break;
      case DT_STRTAB: strtab = reinterpret_cast<const char*>(Ptr(d->d_un.d_ptr, base)); break;
      case DT_JMPREL: jmprel = Ptr(d->d_un.d_ptr, base); break;
      case DT_PLTRELSZ: jmprel_size = d->d_un.d_val; break;
      case DT_RELA: rela = Ptr(d->d_un.d_ptr, base); break;
      case DT_RELASZ: rela_size = d->d_un.d_val; break;
      case DT_RELAENT: rela_ent = d->d_un.d_val; break;
      default: break;
    }
  }
  if (symtab == nullptr || strtab == nullptr || rela_ent != sizeof(ElfW(Rela))) {
    result.error = "the object has no usable dynamic symbol or relocation table";
    return result;
  }
  Relro segments;
  segments.base = base;
  dl_iterate_phdr(&FindSegments, &segments);
  const long page = sysconf(_SC_PAGESIZE);

  const struct {
    uintptr_t table;
    size_t size;
  } tables[] = {{jmprel, jmprel_size}, {rela, rela_size}};
  for (const auto& t : tables) {
    if (t.table == 0) continue;
    const auto* r = reinterpret_cast<const ElfW(Rela)*>(t.table);
    for (size_t i = 0; i < t.size / sizeof(ElfW(Rela)); ++i) {
      const uint32_t type = ELF64_R_TYPE(r[i].r_info);
      if (type != R_X86_64_JUMP_SLOT && type != R_X86_64_GLOB_DAT) continue;
      const uint32_t sym = ELF64_R_SYM(r[i].r_info);
      if (sym == 0 || strcmp(strtab + symtab[sym].st_name, symbol) != 0) continue;
      auto* slot = reinterpret_cast<void**>(base + r[i].r_offset);
      void* current = __atomic_load_n(slot, __ATOMIC_ACQUIRE);
      if (current == replacement) continue;  // patched before
      const auto at = reinterpret_cast<uintptr_t>(current);
      const bool unresolved = at >= segments.object_begin && at < segments.object_end;  // a lazy PLT stub
      void* original = unresolved && resolve != nullptr ? resolve(symbol) : current;
      if (already_hooked != nullptr && original == already_hooked) {
        ++result.patched;  // bound to the caller's other hook, which sees every call already
        continue;
      }
      if (original == nullptr || original == replacement) {
        result.error = "cannot resolve the function an unbound slot would call";
        continue;
      }
      void* expected = nullptr;
      original_out->compare_exchange_strong(expected, original, std::memory_order_acq_rel);
      const auto slot_at = reinterpret_cast<uintptr_t>(slot);
      const bool read_only = slot_at >= segments.begin && slot_at < segments.end;
      void* page_start = reinterpret_cast<void*>(slot_at & ~static_cast<uintptr_t>(page - 1));
      if (read_only && mprotect(page_start, page, PROT_READ | PROT_WRITE) != 0) {
        result.error = "mprotect of the GOT page failed";
        continue;
      }
      __atomic_store_n(slot, replacement, __ATOMIC_RELEASE);
      if (read_only) mprotect(page_start, page, PROT_READ);
      ++result.patched;
    }
  }
  return result;
}

}  // namespace gpuslice::rm
