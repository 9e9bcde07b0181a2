// Tests of CUDA array sizing: 512-byte rows, 64 KiB rounding, mipmap levels,
// deferred mapping.
#include "fake_driver_test_util.h"

namespace fake_driver_test {
namespace {

constexpr uint64_t k64KiB = 64 << 10;

class FakeArrayTest : public FakeCudaTest {
 protected:
  static CUDA_ARRAY3D_DESCRIPTOR Desc(size_t w, size_t h, size_t d, CUarray_format format,
                                      unsigned int channels, unsigned int flags = 0) {
    CUDA_ARRAY3D_DESCRIPTOR desc{};
    desc.Width = w;
    desc.Height = h;
    desc.Depth = d;
    desc.Format = format;
    desc.NumChannels = channels;
    desc.Flags = flags;
    return desc;
  }

  // Bytes that creating then destroying a 3D array of `desc` takes.
  uint64_t ArrayBytes(const CUDA_ARRAY3D_DESCRIPTOR& desc) {
    const uint64_t before = PhysicalUsed(0);
    CUarray array = nullptr;
    EXPECT_EQ(CU(cuArray3DCreate_v2)(&array, &desc), CUDA_SUCCESS);
    const uint64_t bytes = PhysicalUsed(0) - before;
    EXPECT_EQ(CU(cuArrayDestroy)(array), CUDA_SUCCESS);
    EXPECT_EQ(PhysicalUsed(0), before);
    return bytes;
  }
};

TEST_F(FakeArrayTest, SizesFollowRowPitchAndAlignment) {
  // 100 float4 = 1600 B -> 2048 B rows; x100 = 204800 -> 4 x 64 KiB.
  EXPECT_EQ(ArrayBytes(Desc(100, 100, 0, CU_AD_FORMAT_FLOAT, 4)), 4 * k64KiB);
  // 1D: one 512 B row, rounded to 64 KiB.
  EXPECT_EQ(ArrayBytes(Desc(10, 0, 0, CU_AD_FORMAT_UNSIGNED_INT8, 1)), k64KiB);
  // 64^3 bytes: 512 B rows x 4096 = 2 MiB exactly.
  EXPECT_EQ(ArrayBytes(Desc(64, 64, 64, CU_AD_FORMAT_SIGNED_INT8, 1)), 2 * kMiB);
  // half2: 4 B per element; 1024 x 4 B = 4096 B rows x 33 = 135168 -> 3 x 64 KiB.
  EXPECT_EQ(ArrayBytes(Desc(1024, 33, 0, CU_AD_FORMAT_HALF, 2)), 3 * k64KiB);
}

TEST_F(FakeArrayTest, TwoDimensionalCreateAndDescriptors) {
  const uint64_t before = PhysicalUsed(0);
  CUDA_ARRAY_DESCRIPTOR desc{};
  desc.Width = 100;
  desc.Height = 100;
  desc.Format = CU_AD_FORMAT_FLOAT;
  desc.NumChannels = 4;
  CUarray array = nullptr;
  ASSERT_EQ(CU(cuArrayCreate_v2)(&array, &desc), CUDA_SUCCESS);
  EXPECT_EQ(PhysicalUsed(0) - before, 4 * k64KiB);
  CUDA_ARRAY_DESCRIPTOR got{};
  ASSERT_EQ(CU(cuArrayGetDescriptor_v2)(&got, array), CUDA_SUCCESS);
  EXPECT_EQ(got.Width, 100u);
  EXPECT_EQ(got.Height, 100u);
  EXPECT_EQ(got.NumChannels, 4u);
  CUDA_ARRAY3D_DESCRIPTOR got3d{};
  ASSERT_EQ(CU(cuArray3DGetDescriptor_v2)(&got3d, array), CUDA_SUCCESS);
  EXPECT_EQ(got3d.Depth, 0u);
  EXPECT_EQ(got3d.Format, CU_AD_FORMAT_FLOAT);
  CUDA_ARRAY_MEMORY_REQUIREMENTS req{};
  EXPECT_EQ(CU(cuArrayGetMemoryRequirements)(&req, array, 0), CUDA_ERROR_INVALID_VALUE);
  ASSERT_EQ(CU(cuArrayDestroy)(array), CUDA_SUCCESS);
  EXPECT_EQ(CU(cuArrayDestroy)(array), CUDA_ERROR_INVALID_HANDLE);
}

TEST_F(FakeArrayTest, DeferredMappingReportsSizeAndTakesNothing) {
  const uint64_t before = PhysicalUsed(0);
  const CUDA_ARRAY3D_DESCRIPTOR desc =
      Desc(100, 100, 0, CU_AD_FORMAT_FLOAT, 4, CUDA_ARRAY3D_DEFERRED_MAPPING);
  CUarray array = nullptr;
  ASSERT_EQ(CU(cuArray3DCreate_v2)(&array, &desc), CUDA_SUCCESS);
  EXPECT_EQ(PhysicalUsed(0), before);
  CUDA_ARRAY_MEMORY_REQUIREMENTS req{};
  ASSERT_EQ(CU(cuArrayGetMemoryRequirements)(&req, array, 0), CUDA_SUCCESS);
  EXPECT_EQ(req.size, 4 * k64KiB);
  EXPECT_EQ(req.alignment, k64KiB);
  ASSERT_EQ(CU(cuArrayDestroy)(array), CUDA_SUCCESS);
}

TEST_F(FakeArrayTest, MipmapsSumTheirLevels) {
  // 256^2 float: 1024 B x 256 = 256 KiB; 128^2: 512 B x 128 = 64 KiB;
  // 64^2: 256 -> 512 B x 64 = 32 KiB -> 64 KiB. Total 384 KiB.
  const uint64_t expected = 6 * k64KiB;
  const uint64_t before = PhysicalUsed(0);
  CUDA_ARRAY3D_DESCRIPTOR desc = Desc(256, 256, 0, CU_AD_FORMAT_FLOAT, 1);
  CUmipmappedArray mipmap = nullptr;
  ASSERT_EQ(CU(cuMipmappedArrayCreate)(&mipmap, &desc, 3), CUDA_SUCCESS);
  EXPECT_EQ(PhysicalUsed(0) - before, expected);
  ASSERT_EQ(CU(cuMipmappedArrayDestroy)(mipmap), CUDA_SUCCESS);
  EXPECT_EQ(PhysicalUsed(0), before);

  desc.Flags = CUDA_ARRAY3D_DEFERRED_MAPPING;
  ASSERT_EQ(CU(cuMipmappedArrayCreate)(&mipmap, &desc, 3), CUDA_SUCCESS);
  CUDA_ARRAY_MEMORY_REQUIREMENTS req{};
  ASSERT_EQ(CU(cuMipmappedArrayGetMemoryRequirements)(&req, mipmap, 0), CUDA_SUCCESS);
  EXPECT_EQ(req.size, expected);
  EXPECT_EQ(PhysicalUsed(0), before);
  ASSERT_EQ(CU(cuMipmappedArrayDestroy)(mipmap), CUDA_SUCCESS);
}

TEST_F(FakeArrayTest, RejectsBadDescriptorsAndOom) {
  CUarray array = nullptr;
  CUDA_ARRAY3D_DESCRIPTOR desc = Desc(16, 16, 0, CU_AD_FORMAT_FLOAT, 3);
  EXPECT_EQ(CU(cuArray3DCreate_v2)(&array, &desc), CUDA_ERROR_INVALID_VALUE);
  desc = Desc(0, 16, 0, CU_AD_FORMAT_FLOAT, 1);
  EXPECT_EQ(CU(cuArray3DCreate_v2)(&array, &desc), CUDA_ERROR_INVALID_VALUE);
  desc = Desc(16, 16, 0, CU_AD_FORMAT_NV12, 1);
  EXPECT_EQ(CU(cuArray3DCreate_v2)(&array, &desc), CUDA_ERROR_INVALID_VALUE);
  // 32768^2 float4 = 16 GiB: more than the 1 GiB fake GPU.
  desc = Desc(32768, 32768, 0, CU_AD_FORMAT_FLOAT, 4);
  EXPECT_EQ(CU(cuArray3DCreate_v2)(&array, &desc), CUDA_ERROR_OUT_OF_MEMORY);
}

}  // namespace
}  // namespace fake_driver_test
