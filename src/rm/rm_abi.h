// rm_abi.h — the few pieces of NVIDIA's Resource Manager (RM) ioctl interface
// gpuslice uses, declared here because no packaged header provides them.
//
// Every fact comes from NVIDIA's open GPU kernel modules
// (github.com/NVIDIA/open-gpu-kernel-modules), cited per item, and was
// checked on driver 580 (H200, GSP) with a probe of this project's
// (docs/gpu-facts.md):
//   - libcuda allocates each channel group (TSG) with NV_ESC_RM_ALLOC on its
//     /dev/nvidiactl descriptor, NVOS64 (48 B) parameters;
//   - NV_ESC_RM_CONTROL must be issued on the descriptor that allocated the
//     client, or RM rejects it;
//   - SET/GET_TIMESLICE work from an ordinary process.
//
// Plain declarations: no code, no allocation. Included by src/rm, and by
// the test fakes and cuda_app that speak the same ioctls.
#ifndef GPUSLICE_RM_RM_ABI_H_
#define GPUSLICE_RM_RM_ABI_H_

#include <cstdint>

namespace gpuslice::rm {

using NvHandle = uint32_t;

// src/nvidia/arch/nvalloc/unix/include/nv_escape.h. The ioctl request is
// _IOWR('F', escape, sizeof(parameters)) (nv-ioctl-numbers.h: NV_IOCTL_MAGIC 'F').
inline constexpr uint32_t kIoctlMagic = 'F';
inline constexpr uint32_t kEscRmFree = 0x29;
inline constexpr uint32_t kEscRmControl = 0x2A;
inline constexpr uint32_t kEscRmAlloc = 0x2B;

// src/common/sdk/nvidia/inc/nvos.h.
// NVOS00_PARAMETERS (NV_ESC_RM_FREE).
struct Nvos00 {
  NvHandle hRoot;
  NvHandle hObjectParent;
  NvHandle hObjectOld;
  uint32_t status;
};
// NVOS21_PARAMETERS (NV_ESC_RM_ALLOC, older form).
struct Nvos21 {
  NvHandle hRoot;
  NvHandle hObjectParent;
  NvHandle hObjectNew;
  uint32_t hClass;
  uint64_t pAllocParms;  // NvP64
  uint32_t paramsSize;
  uint32_t status;
};
// NVOS64_PARAMETERS (NV_ESC_RM_ALLOC with access rights; what driver 580's
// libcuda uses).
struct Nvos64 {
  NvHandle hRoot;
  NvHandle hObjectParent;
  NvHandle hObjectNew;
  uint32_t hClass;
  uint64_t pAllocParms;  // NvP64
  uint64_t pRightsRequested;
  uint32_t paramsSize;
  uint32_t flags;
  uint32_t status;
  uint32_t pad;  // the struct is 8-byte aligned (its NvP64 members)
};
// NVOS54_PARAMETERS (NV_ESC_RM_CONTROL).
struct Nvos54 {
  NvHandle hClient;
  NvHandle hObject;
  uint32_t cmd;
  uint32_t flags;
  uint64_t params;  // NvP64
  uint32_t paramsSize;
  uint32_t status;
};
static_assert(sizeof(Nvos00) == 16);
static_assert(sizeof(Nvos21) == 32);
static_assert(sizeof(Nvos64) == 48);
static_assert(sizeof(Nvos54) == 32);

// src/common/sdk/nvidia/inc/class/cl0000.h: NV01_ROOT_CLIENT (0x41; 0x0 is
// NV01_NULL_OBJECT, also accepted for a client).
inline constexpr uint32_t kClassRootClient = 0x00000041;
// src/common/sdk/nvidia/inc/class/cla06c.h: KEPLER_CHANNEL_GROUP_A, whose
// allocation parameters NV_CHANNEL_GROUP_ALLOCATION_PARAMETERS are
// {hObjectError, hObjectEccError, hVASpace, engineType, ...}: engineType is
// the 4th 32-bit word.
inline constexpr uint32_t kClassChannelGroup = 0x0000A06C;
inline constexpr uint32_t kChannelGroupEngineTypeWord = 3;
// src/common/sdk/nvidia/inc/class/cl2080_notification.h (NV2080_ENGINE_TYPE_*):
// 1 = GRAPHICS (the compute engine), 9.. = COPY0..; the probe saw 11-13.
inline constexpr uint32_t kEngineTypeGraphics = 1;

// src/common/sdk/nvidia/inc/ctrl/ctrla06c.h.
inline constexpr uint32_t kCtrlSetTimeslice = 0xa06c0103;  // NVA06C_CTRL_TIMESLICE_PARAMS {NvU64 timesliceUs}
inline constexpr uint32_t kCtrlGetTimeslice = 0xa06c0104;
inline constexpr uint32_t kTimesliceParamsSize = 8;
// The other controls by which a channel group takes more of the GPU: its
// place in the runlist (interleave level; documented as privileged) and
// realtime (ahead of every other channel group; docs/gpu-facts.md).
inline constexpr uint32_t kCtrlSetInterleaveLevel = 0xa06c0107;
inline constexpr uint32_t kCtrlMakeRealtime = 0xa06c0110;

// src/common/sdk/nvidia/inc/nvstatuscodes.h.
inline constexpr uint32_t kNvOk = 0x00;
inline constexpr uint32_t kNvErrInsufficientPermissions = 0x1B;
inline constexpr uint32_t kNvErrInvalidArgument = 0x1F;
inline constexpr uint32_t kNvErrInvalidClient = 0x23;
inline constexpr uint32_t kNvErrInvalidObjectHandle = 0x33;
inline constexpr uint32_t kNvErrInvalidParamStruct = 0x3A;
inline constexpr uint32_t kNvErrNotSupported = 0x56;

// _IOWR('F', nr, size) and its parts, as <asm-generic/ioctl.h> defines them.
constexpr unsigned long IoctlRequest(uint32_t nr, uint32_t size) {
  return (3ul << 30) | (static_cast<unsigned long>(size) << 16) | (kIoctlMagic << 8) | nr;
}
constexpr uint32_t IoctlType(unsigned long request) { return (request >> 8) & 0xff; }
constexpr uint32_t IoctlNr(unsigned long request) { return request & 0xff; }
constexpr uint32_t IoctlSize(unsigned long request) { return (request >> 16) & 0x3fff; }
static_assert(IoctlRequest(kEscRmAlloc, sizeof(Nvos64)) == 0xC030462Bul, "docs/gpu-facts.md: NV_ESC_RM_ALLOC");

}  // namespace gpuslice::rm

#endif  // GPUSLICE_RM_RM_ABI_H_
