// allocation_table.h — what this process has allocated, so a free knows what
// to uncharge.
//
// A fixed-capacity open-addressing hash map from an allocation's key (device
// pointer, VMM handle, array handle, pool…) to its charged size and ledger
// device slot. The storage is one anonymous mapping made once at start-up, so
// inserts and erases never allocate, lock or make a syscall.
//
// Concurrency: lock-free. A key is claimed with a CAS on the key word; the
// value is published with a release store (after the aux word). Keys are
// unique while live (the driver does not hand out a pointer or handle twice
// before it is freed), and a key is erased only after its insert has
// returned, so an erase never races the insert of the same key. Counters in
// the aux word change by CAS (AdjustCounter). Erased entries become
// tombstones that later inserts reuse.
//
// Capacity: 2^20 entries (24 MiB of address space, touched only as used). A
// full table makes Insert return false; every caller then refuses the
// allocation (frees what it made, uncharges, returns
// CUDA_ERROR_OUT_OF_MEMORY) rather than lose track of memory. Tests make
// the table smaller (Init's argument) to reach that path.
#ifndef GPUSLICE_INTERPOSER_ALLOCATION_TABLE_H_
#define GPUSLICE_INTERPOSER_ALLOCATION_TABLE_H_

#include <atomic>
#include <cstdint>

namespace gpuslice::interposer {

struct AllocationRecord {
  uint64_t bytes = 0;     // what was charged to the ledger
  uint32_t device = 0;    // ledger device slot
  uint32_t kind = 0;      // AllocationKind
  uint64_t aux = 0;       // per kind, below
};

enum class AllocationKind : uint32_t {
  kDevice = 1,  // aux = the owning CUcontext (so does kManaged, kArray, kMipmappedArray)
  kManaged,
  kVmmHandle,   // aux = references << 32 | mappings (hooks_memory.cc)
  kVmmMapping,  // key = mapped address; bytes = mapping size (nothing charged), aux = handle
  kArray,
  kMipmappedArray,
  kGraphExec,   // bytes = what the graph's memory nodes allocate per launch
  kMallocHeap,  // key = aux = the context; bytes = its malloc heap grown past the default
  // Markers, nothing charged: this process exported the kDevice pointer or
  // kVmmHandle handle that is the key (charge.h, "Memory exported").
  // aux = the legacy IPC handle's hash, when one was made (charge.h).
  kExportedPointer,
  kExportedHandle,
  kIpcOpened,  // key = the pointer cuIpcOpenMemHandle returned; aux = its handle's hash; nothing charged
};

class AllocationTable {
 public:
  static constexpr uint32_t kCapacityLog2 = 20;

  // Maps the storage: 2^capacity_log2 entries (at most kCapacityLog2).
  // Returns false (and the table stays unusable) on failure.
  bool Init(uint32_t capacity_log2 = kCapacityLog2);

  bool Insert(uint64_t key, AllocationKind kind, const AllocationRecord& record);
  // Removes and returns the record; false when the key is unknown to us.
  bool Erase(uint64_t key, AllocationKind kind, AllocationRecord* record);
  bool Find(uint64_t key, AllocationKind kind, AllocationRecord* record) const;
  // Adds `delta` (+1 or -1) to the 32-bit counter `field` (0: low half, 1:
  // high half) of the record's aux word, atomically, and returns the new aux
  // word in *aux. False, changing nothing, when the key is unknown or the
  // counter would go below zero.
  bool AdjustCounter(uint64_t key, AllocationKind kind, int field, int delta, uint64_t* aux);
  // Erases every record of `kind` whose aux word is `aux`, passing each to
  // erased(key, record, arg). Scans the whole table: a slow path (a
  // context's teardown).
  void EraseAll(AllocationKind kind, uint64_t aux, void (*erased)(uint64_t, const AllocationRecord&, void*), void* arg);
  // Forgets everything: a forked child must not free its parent's memory.
  void Clear();

 private:
  struct Entry {
    std::atomic<uint64_t> key;    // 0 empty, kTombstone erased, else (key mixed with kind)
    std::atomic<uint64_t> value;  // bytes << 16 | device << 8 | kind
    std::atomic<uint64_t> aux;
  };
  static constexpr uint64_t kTombstone = ~0ull;
  static constexpr uint32_t kMaxProbe = 4096;

  static uint64_t TaggedKey(uint64_t key, AllocationKind kind);
  Entry* FindEntry(uint64_t key, AllocationKind kind) const;
  uint32_t Probes() const { return mask_ < kMaxProbe ? static_cast<uint32_t>(mask_ + 1) : kMaxProbe; }
  Entry* entries_ = nullptr;
  uint64_t mask_ = 0;  // capacity - 1
};

}  // namespace gpuslice::interposer

#endif  // GPUSLICE_INTERPOSER_ALLOCATION_TABLE_H_
