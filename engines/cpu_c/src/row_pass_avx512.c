/* The row-pass kernels compiled for AVX-512 (x86-64-v4) on 8-double vectors; row_pass.c calls
 * them only when rh_cpu_has_avx512(). */
#include "multiversion.h"

#if RH_HAVE_AVX512_KERNELS
#pragma GCC target("arch=x86-64-v4")
#define RH_KERNEL_SUFFIX _avx512
#define RH_KERNEL_ATTRIBUTES
#include "row_kernels.h"
#else
/* Nothing to build here: an ISO C translation unit must not be empty. */
typedef int rh_row_pass_avx512_unused;
#endif
