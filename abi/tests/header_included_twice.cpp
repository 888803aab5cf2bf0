// The header must compile on its own, more than once, under strict C++17, with C linkage.
#include "rh_cuda.h"

RhCudaStatus rh_abi_header_check_cxx(RhCudaEngine* engine);
RhCudaStatus rh_abi_header_check_cxx(RhCudaEngine* engine) {
  return rh_cuda_engine_synchronize(engine);
}
