// CUDA arrays and mipmapped arrays: creation, destruction, descriptors and
// memory requirements. Arrays are charged to the current context's device,
// and belong to the current context: destroying or resetting it frees them.
//
// True size of one array (or one mipmap level): each row is
// round_up(width * element bytes * channels, 512) bytes, times
// max(height, 1) * max(depth, 1) rows, the whole rounded up to 64 KiB (the
// reported alignment). A mipmapped array is the sum of its levels, each
// level halving every non-zero dimension (down to 1). Arrays created with
// CUDA_ARRAY3D_DEFERRED_MAPPING or CUDA_ARRAY3D_SPARSE take no memory (it
// comes from a later mapping), and only deferred-mapping arrays answer
// cu*GetMemoryRequirements, as documented. Supported formats: the 8-, 16- and
// 32-bit integer, half and float ones; other formats give
// CUDA_ERROR_INVALID_VALUE.
#include <cuda.h>

#include "arrays.h"

#include <map>
#include <memory>

#include "contexts.h"
#include "physical.h"
#include "state.h"

struct CUarray_st {
  CUDA_ARRAY3D_DESCRIPTOR desc;
  int device;
  uint64_t bytes;
  bool charged;  // holds physical memory
  CUcontext context;
};

struct CUmipmappedArray_st {
  CUDA_ARRAY3D_DESCRIPTOR desc;
  unsigned int levels;
  int device;
  uint64_t bytes;
  bool charged;
  CUcontext context;
};

namespace fake_cuda {
namespace {

constexpr uint64_t kAlignment = uint64_t{64} << 10;
constexpr uint64_t kRowAlignment = 512;

struct Arrays {
  std::map<CUarray, std::unique_ptr<CUarray_st>> arrays;
  std::map<CUmipmappedArray, std::unique_ptr<CUmipmappedArray_st>> mipmaps;
};

Arrays& GetArrays(const Locked&) {
  static auto* arrays = new Arrays;
  return *arrays;
}

// Bytes per channel of `format`, or 0 for formats the fake does not size.
uint64_t ChannelBytes(CUarray_format format) {
  switch (format) {
    case CU_AD_FORMAT_UNSIGNED_INT8:
    case CU_AD_FORMAT_SIGNED_INT8: return 1;
    case CU_AD_FORMAT_UNSIGNED_INT16:
    case CU_AD_FORMAT_SIGNED_INT16:
    case CU_AD_FORMAT_HALF: return 2;
    case CU_AD_FORMAT_UNSIGNED_INT32:
    case CU_AD_FORMAT_SIGNED_INT32:
    case CU_AD_FORMAT_FLOAT: return 4;
    default: return 0;
  }
}

// Size of one level, or false when the descriptor is invalid or the size
// does not fit in 64 bits.
bool LevelBytes(uint64_t width, uint64_t height, uint64_t depth, CUarray_format format,
                unsigned int channels, uint64_t* bytes) {
  const uint64_t channel_bytes = ChannelBytes(format);
  if (width == 0 || channel_bytes == 0) return false;
  if (channels != 1 && channels != 2 && channels != 4) return false;
  uint64_t row = 0, size = 0;
  if (__builtin_mul_overflow(width, channel_bytes * channels, &row)) return false;
  row = RoundUp(row, kRowAlignment);
  if (__builtin_mul_overflow(row, height == 0 ? 1 : height, &size)) return false;
  if (__builtin_mul_overflow(size, depth == 0 ? 1 : depth, &size)) return false;
  *bytes = RoundUp(size, kAlignment);
  return *bytes != UINT64_MAX;
}

uint64_t Halve(uint64_t dim) { return dim <= 1 ? dim : dim / 2; }

bool MipmapBytes(const CUDA_ARRAY3D_DESCRIPTOR& d, unsigned int levels, uint64_t* bytes) {
  uint64_t w = d.Width, h = d.Height, depth = d.Depth, total = 0;
  for (unsigned int level = 0; level < levels; ++level) {
    uint64_t level_bytes = 0;
    if (!LevelBytes(w, h, depth, d.Format, d.NumChannels, &level_bytes)) return false;
    if (__builtin_add_overflow(total, level_bytes, &total)) return false;
    w = Halve(w);
    h = Halve(h);
    depth = Halve(depth);
  }
  *bytes = total;
  return true;
}

bool TakesNoMemory(unsigned int flags) {
  return (flags & (CUDA_ARRAY3D_DEFERRED_MAPPING | CUDA_ARRAY3D_SPARSE)) != 0;
}

CUresult CreateArray(CUarray* out, const CUDA_ARRAY3D_DESCRIPTOR& desc) {
  uint64_t bytes = 0;
  if (out == nullptr ||
      !LevelBytes(desc.Width, desc.Height, desc.Depth, desc.Format, desc.NumChannels, &bytes)) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  Locked locked;
  int device = 0;
  if (CUresult r = CurrentDevice(locked, &device); r != CUDA_SUCCESS) return r;
  const bool charged = !TakesNoMemory(desc.Flags);
  if (charged && !TakePhysical(locked, device, bytes)) return CUDA_ERROR_OUT_OF_MEMORY;
  auto array = std::make_unique<CUarray_st>(CUarray_st{desc, device, bytes, charged, CurrentContext(locked)});
  *out = array.get();
  GetArrays(locked).arrays.emplace(*out, std::move(array));
  return CUDA_SUCCESS;
}

CUarray_st* FindArray(const Locked& locked, CUarray array) {
  auto& arrays = GetArrays(locked).arrays;
  auto it = arrays.find(array);
  return it == arrays.end() ? nullptr : it->second.get();
}

CUmipmappedArray_st* FindMipmap(const Locked& locked, CUmipmappedArray mipmap) {
  auto& mipmaps = GetArrays(locked).mipmaps;
  auto it = mipmaps.find(mipmap);
  return it == mipmaps.end() ? nullptr : it->second.get();
}

CUresult WriteRequirements(CUDA_ARRAY_MEMORY_REQUIREMENTS* req, const CUDA_ARRAY3D_DESCRIPTOR& desc,
                           uint64_t bytes, CUdevice device) {
  if (req == nullptr || (desc.Flags & CUDA_ARRAY3D_DEFERRED_MAPPING) == 0) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  if (!ValidDevice(device)) return CUDA_ERROR_INVALID_DEVICE;
  *req = {};
  req->size = bytes;
  req->alignment = kAlignment;
  return CUDA_SUCCESS;
}

// Frees the entries of `map` (arrays or mipmaps) that `ctx` owns.
template <typename Map>
void FreeOwned(const Locked& locked, Map& map, CUcontext ctx) {
  for (auto it = map.begin(); it != map.end();) {
    if (it->second->context != ctx) {
      ++it;
      continue;
    }
    if (it->second->charged) ReturnPhysical(locked, it->second->device, it->second->bytes);
    it = map.erase(it);
  }
}

}  // namespace

void FreeContextArrays(const Locked& locked, CUcontext ctx) {
  FreeOwned(locked, GetArrays(locked).arrays, ctx);
  FreeOwned(locked, GetArrays(locked).mipmaps, ctx);
}

}  // namespace fake_cuda

using fake_cuda::Enter;

extern "C" {

CUresult cuArrayCreate_v2(CUarray* array, const CUDA_ARRAY_DESCRIPTOR* desc) {
  if (CUresult r = Enter(__func__); r != CUDA_SUCCESS) return r;
  if (desc == nullptr) return CUDA_ERROR_INVALID_VALUE;
  CUDA_ARRAY3D_DESCRIPTOR desc3d{};
  desc3d.Width = desc->Width;
  desc3d.Height = desc->Height;
  desc3d.Format = desc->Format;
  desc3d.NumChannels = desc->NumChannels;
  return fake_cuda::CreateArray(array, desc3d);
}

CUresult cuArray3DCreate_v2(CUarray* array, const CUDA_ARRAY3D_DESCRIPTOR* desc) {
  if (CUresult r = Enter(__func__); r != CUDA_SUCCESS) return r;
  if (desc == nullptr) return CUDA_ERROR_INVALID_VALUE;
  return fake_cuda::CreateArray(array, *desc);
}

CUresult cuArrayDestroy(CUarray array) {
  if (CUresult r = Enter(__func__); r != CUDA_SUCCESS) return r;
  fake_cuda::Locked locked;
  const CUarray_st* a = fake_cuda::FindArray(locked, array);
  if (a == nullptr) return CUDA_ERROR_INVALID_HANDLE;
  if (a->charged) fake_cuda::ReturnPhysical(locked, a->device, a->bytes);
  fake_cuda::GetArrays(locked).arrays.erase(array);
  return CUDA_SUCCESS;
}

CUresult cuArrayGetDescriptor_v2(CUDA_ARRAY_DESCRIPTOR* desc, CUarray array) {
  if (CUresult r = Enter(__func__); r != CUDA_SUCCESS) return r;
  if (desc == nullptr) return CUDA_ERROR_INVALID_VALUE;
  fake_cuda::Locked locked;
  const CUarray_st* a = fake_cuda::FindArray(locked, array);
  if (a == nullptr) return CUDA_ERROR_INVALID_HANDLE;
  desc->Width = a->desc.Width;
  desc->Height = a->desc.Height;
  desc->Format = a->desc.Format;
  desc->NumChannels = a->desc.NumChannels;
  return CUDA_SUCCESS;
}

CUresult cuArray3DGetDescriptor_v2(CUDA_ARRAY3D_DESCRIPTOR* desc, CUarray array) {
  if (CUresult r = Enter(__func__); r != CUDA_SUCCESS) return r;
  if (desc == nullptr) return CUDA_ERROR_INVALID_VALUE;
  fake_cuda::Locked locked;
  const CUarray_st* a = fake_cuda::FindArray(locked, array);
  if (a == nullptr) return CUDA_ERROR_INVALID_HANDLE;
  *desc = a->desc;
  return CUDA_SUCCESS;
}

CUresult cuArrayGetMemoryRequirements(CUDA_ARRAY_MEMORY_REQUIREMENTS* req, CUarray array,
                                      CUdevice device) {
  if (CUresult r = Enter(__func__); r != CUDA_SUCCESS) return r;
  fake_cuda::Locked locked;
  const CUarray_st* a = fake_cuda::FindArray(locked, array);
  if (a == nullptr) return CUDA_ERROR_INVALID_HANDLE;
  return fake_cuda::WriteRequirements(req, a->desc, a->bytes, device);
}

CUresult cuMipmappedArrayCreate(CUmipmappedArray* mipmap, const CUDA_ARRAY3D_DESCRIPTOR* desc,
                                unsigned int levels) {
  if (CUresult r = Enter(__func__); r != CUDA_SUCCESS) return r;
  uint64_t bytes = 0;
  if (mipmap == nullptr || desc == nullptr || levels == 0 ||
      !fake_cuda::MipmapBytes(*desc, levels, &bytes)) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  fake_cuda::Locked locked;
  int device = 0;
  if (CUresult r = fake_cuda::CurrentDevice(locked, &device); r != CUDA_SUCCESS) return r;
  const bool charged = !fake_cuda::TakesNoMemory(desc->Flags);
  if (charged && !fake_cuda::TakePhysical(locked, device, bytes)) return CUDA_ERROR_OUT_OF_MEMORY;
  auto m = std::make_unique<CUmipmappedArray_st>(
      CUmipmappedArray_st{*desc, levels, device, bytes, charged, fake_cuda::CurrentContext(locked)});
  *mipmap = m.get();
  fake_cuda::GetArrays(locked).mipmaps.emplace(*mipmap, std::move(m));
  return CUDA_SUCCESS;
}

CUresult cuMipmappedArrayDestroy(CUmipmappedArray mipmap) {
  if (CUresult r = Enter(__func__); r != CUDA_SUCCESS) return r;
  fake_cuda::Locked locked;
  const CUmipmappedArray_st* m = fake_cuda::FindMipmap(locked, mipmap);
  if (m == nullptr) return CUDA_ERROR_INVALID_HANDLE;
  if (m->charged) fake_cuda::ReturnPhysical(locked, m->device, m->bytes);
  fake_cuda::GetArrays(locked).mipmaps.erase(mipmap);
  return CUDA_SUCCESS;
}

CUresult cuMipmappedArrayGetMemoryRequirements(CUDA_ARRAY_MEMORY_REQUIREMENTS* req,
                                               CUmipmappedArray mipmap, CUdevice device) {
  if (CUresult r = Enter(__func__); r != CUDA_SUCCESS) return r;
  fake_cuda::Locked locked;
  const CUmipmappedArray_st* m = fake_cuda::FindMipmap(locked, mipmap);
  if (m == nullptr) return CUDA_ERROR_INVALID_HANDLE;
  return fake_cuda::WriteRequirements(req, m->desc, m->bytes, device);
}

}  // extern "C"
