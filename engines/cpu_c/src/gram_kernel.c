/*
 * Register-blocked product of two packed panels (see gram_kernel.h).
 *
 * An 8 x 16 output tile lives in sixteen 8-double accumulators for a whole chunk: per packed
 * row, two vector loads of the plain panel, eight broadcasts of the scaled one and sixteen
 * fused multiply-adds, so the loop is bound by the FMA ports rather than by memory. With
 * AVX-512 the accumulators are 16 of the 32 zmm registers. Tiles start at the diagonal's
 * column group, which keeps the work at about half of the full product.
 *
 * GCC and Clang get the 8-double vectors of vec8.h (one source compiled per instruction set by
 * RH_MULTIVERSION); other compilers run the same loops on scalars, in the same per-entry order.
 */
#include "gram_kernel.h"

#include "multiversion.h"
#include "vec8.h"

#if RH_HAVE_VECTORS

#define RH_ALWAYS_INLINE static inline __attribute__((always_inline))

RH_ALWAYS_INLINE void tile_8x16(const double* a, const double* b0, const double* b1, int64_t depth,
                                double* c, int64_t ldc) {
  RhVec8 lo[8], hi[8];
#pragma GCC unroll 8
  for (int r = 0; r < 8; ++r) {
    lo[r] = *(const RhVec8*)(c + r * ldc);
    hi[r] = *(const RhVec8*)(c + r * ldc + 8);
  }
  for (int64_t k = 0; k < depth; ++k) {
    const RhVec8 p0 = *(const RhVec8*)(b0 + k * RH_PANEL_WIDTH);
    const RhVec8 p1 = *(const RhVec8*)(b1 + k * RH_PANEL_WIDTH);
    const double* ak = a + k * RH_PANEL_WIDTH;
#pragma GCC unroll 8
    for (int r = 0; r < 8; ++r) {
      lo[r] += ak[r] * p0;
      hi[r] += ak[r] * p1;
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < 8; ++r) {
    *(RhVec8*)(c + r * ldc) = lo[r];
    *(RhVec8*)(c + r * ldc + 8) = hi[r];
  }
}

RH_ALWAYS_INLINE void tile_8x8(const double* a, const double* b0, int64_t depth, double* c,
                               int64_t ldc) {
  RhVec8 acc[8];
#pragma GCC unroll 8
  for (int r = 0; r < 8; ++r) {
    acc[r] = *(const RhVec8*)(c + r * ldc);
  }
  for (int64_t k = 0; k < depth; ++k) {
    const RhVec8 p0 = *(const RhVec8*)(b0 + k * RH_PANEL_WIDTH);
    const double* ak = a + k * RH_PANEL_WIDTH;
#pragma GCC unroll 8
    for (int r = 0; r < 8; ++r) {
      acc[r] += ak[r] * p0;
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < 8; ++r) {
    *(RhVec8*)(c + r * ldc) = acc[r];
  }
}

/* AVX2 has 16 ymm registers and GCC lowers 8-double vectors badly without AVX-512 (through
 * the stack), so its tile is 4 x 8 on explicit 4-double halves: 8 ymm accumulators, two loads
 * and one broadcast per row and lane half. */
typedef double RhVec4 __attribute__((vector_size(32), aligned(8)));

RH_ALWAYS_INLINE void tile_4x8(const double* a, const double* b0, int64_t depth, double* c,
                               int64_t ldc) {
  RhVec4 lo[4], hi[4];
#pragma GCC unroll 4
  for (int r = 0; r < 4; ++r) {
    lo[r] = *(const RhVec4*)(c + r * ldc);
    hi[r] = *(const RhVec4*)(c + r * ldc + 4);
  }
  for (int64_t k = 0; k < depth; ++k) {
    const RhVec4 p0 = *(const RhVec4*)(b0 + k * RH_PANEL_WIDTH);
    const RhVec4 p1 = *(const RhVec4*)(b0 + k * RH_PANEL_WIDTH + 4);
    const double* ak = a + k * RH_PANEL_WIDTH;
#pragma GCC unroll 4
    for (int r = 0; r < 4; ++r) {
      lo[r] += ak[r] * p0;
      hi[r] += ak[r] * p1;
    }
  }
#pragma GCC unroll 4
  for (int r = 0; r < 4; ++r) {
    *(RhVec4*)(c + r * ldc) = lo[r];
    *(RhVec4*)(c + r * ldc + 4) = hi[r];
  }
}

#else

static void tile_8xw(const double* a, const double* const* b, int groups_wide, int64_t depth,
                     double* c, int64_t ldc) {
  for (int r = 0; r < 8; ++r) {
    for (int h = 0; h < groups_wide; ++h) {
      for (int l = 0; l < RH_PANEL_WIDTH; ++l) {
        double sum = c[r * ldc + h * RH_PANEL_WIDTH + l];
        for (int64_t k = 0; k < depth; ++k) {
          sum += a[k * RH_PANEL_WIDTH + r] * b[h][k * RH_PANEL_WIDTH + l];
        }
        c[r * ldc + h * RH_PANEL_WIDTH + l] = sum;
      }
    }
  }
}

static void tile_8x16(const double* a, const double* b0, const double* b1, int64_t depth, double* c,
                      int64_t ldc) {
  const double* b[2] = {b0, b1};
  tile_8xw(a, b, 2, depth, c, ldc);
}

static void tile_8x8(const double* a, const double* b0, int64_t depth, double* c, int64_t ldc) {
  const double* b[1] = {b0};
  tile_8xw(a, b, 1, depth, c, ldc);
}

#endif

/* The tiles of row group i: from its own column group to the last. */
#define RH_PANEL_GRAM_BODY(TILES_OF_GROUP)            \
  const int64_t group_size = stride * RH_PANEL_WIDTH; \
  for (int64_t i = 0; i < groups; ++i) {              \
    const double* a = scaled + i * group_size;        \
    double* row = c + i * RH_PANEL_WIDTH * ldc;       \
    TILES_OF_GROUP                                    \
  }

#define RH_TILES_8X16                                                          \
  int64_t g = i;                                                               \
  for (; g + 2 <= groups; g += 2) {                                            \
    tile_8x16(a, plain + g * group_size, plain + (g + 1) * group_size, depth,  \
              row + g * RH_PANEL_WIDTH, ldc);                                  \
  }                                                                            \
  if (g < groups) {                                                            \
    tile_8x8(a, plain + g * group_size, depth, row + g * RH_PANEL_WIDTH, ldc); \
  }

#define RH_TILES_4X8                                                                         \
  for (int64_t g = i; g < groups; ++g) {                                                     \
    tile_4x8(a, plain + g * group_size, depth, row + g * RH_PANEL_WIDTH, ldc);               \
    tile_4x8(a + 4, plain + g * group_size, depth, row + 4 * ldc + g * RH_PANEL_WIDTH, ldc); \
  }

#if RH_HAVE_VECTORS && RH_HAVE_AVX512_KERNELS

/* Explicit per-ISA versions instead of RH_MULTIVERSION: the best tile shape differs. */
__attribute__((target("arch=x86-64-v4"))) static void panel_gram_avx512(
    const double* scaled, const double* plain, int64_t depth, int64_t stride, int64_t groups,
    double* c, int64_t ldc) {
  RH_PANEL_GRAM_BODY(RH_TILES_8X16)
}

__attribute__((target("avx2,fma"))) static void panel_gram_avx2(const double* scaled,
                                                                const double* plain, int64_t depth,
                                                                int64_t stride, int64_t groups,
                                                                double* c, int64_t ldc) {
  RH_PANEL_GRAM_BODY(RH_TILES_4X8)
}

static void panel_gram_baseline(const double* scaled, const double* plain, int64_t depth,
                                int64_t stride, int64_t groups, double* c, int64_t ldc) {
  RH_PANEL_GRAM_BODY(RH_TILES_4X8)
}

void rh_panel_gram_upper(const double* scaled, const double* plain, int64_t depth, int64_t stride,
                         int64_t groups, double* c, int64_t ldc) {
  if (rh_cpu_has_avx512()) {
    panel_gram_avx512(scaled, plain, depth, stride, groups, c, ldc);
  } else if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
    panel_gram_avx2(scaled, plain, depth, stride, groups, c, ldc);
  } else {
    panel_gram_baseline(scaled, plain, depth, stride, groups, c, ldc);
  }
}

#else

RH_MULTIVERSION void rh_panel_gram_upper(const double* scaled, const double* plain, int64_t depth,
                                         int64_t stride, int64_t groups, double* c, int64_t ldc) {
  RH_PANEL_GRAM_BODY(RH_TILES_8X16)
}

#endif
