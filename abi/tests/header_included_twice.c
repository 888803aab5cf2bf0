/* The header must compile on its own, more than once, under strict C99 and C11. */
#include "rh_cuda.h"

/* Uses a type and a prototype so the translation unit is not empty (ISO C forbids that). */
RhCudaStatus rh_abi_header_check_c(RhCudaEngine* engine);
RhCudaStatus rh_abi_header_check_c(RhCudaEngine* engine) {
  return rh_cuda_engine_synchronize(engine);
}
