// The header must compile on its own, more than once, under strict C++17, with C linkage.
#include "rh_cuda.h"
// The optional row-statistics extension header, twice as well (it includes rh_cuda.h again).
#include "rh_cuda_row_statistics.h"

RhCudaStatus rh_abi_header_check_cxx(RhCudaEngine* engine);
RhCudaStatus rh_abi_header_check_cxx(RhCudaEngine* engine) {
  return rh_cuda_engine_synchronize(engine);
}
