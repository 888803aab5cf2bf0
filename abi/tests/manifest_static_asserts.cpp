// The same generated checks as manifest_static_asserts.c, compiled as C++17, where the header is
// seen through extern "C" and type identity is exact (std::is_same, no C compatibility rules).
#include <cstddef>
#include <type_traits>

#include "rh_cuda.h"

#define RH_ABI_CHECK(condition, what) static_assert(condition, what)
// No parentheses around the expression: decltype of a parenthesised member access is a reference.
#define RH_ABI_IS_TYPE(expression, type) std::is_same<decltype(expression), type>::value

#include "rh_abi_manifest_checks.h"
