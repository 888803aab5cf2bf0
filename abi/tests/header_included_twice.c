/* The header must compile on its own, more than once, under strict C99 and C11. */
#include "rh_cuda.h"
/* The optional row-statistics extension header, twice as well (it includes rh_cuda.h again). */
#include "rh_cuda_row_statistics.h"

/* Uses a type and a prototype so the translation unit is not empty (ISO C forbids that). */
RhCudaStatus rh_abi_header_check_c(RhCudaEngine* engine);
RhCudaStatus rh_abi_header_check_c(RhCudaEngine* engine) {
  return rh_cuda_engine_synchronize(engine);
}
