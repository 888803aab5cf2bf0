/* Compile-time proof, under C11, that rh_cuda.h agrees with rh_cuda_contract.json: sizes,
 * offsets, widths, field types, constants and the 17 function signatures. The checks come from
 * rh_abi_manifest_checks.h, which CMake generates from the manifest at configure time. */
#include <stddef.h>

#include "rh_cuda.h"

#define RH_ABI_CHECK(condition, what) _Static_assert(condition, what)
#define RH_ABI_IS_TYPE(expression, type) _Generic((expression), type: 1, default: 0)

#include "rh_abi_manifest_checks.h"
