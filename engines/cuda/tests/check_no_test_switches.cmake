# The shipped librh_cuda reads no test switch from the environment: the names the test build
# reads (test_switches.cpp: RH_CUDA_STAGING* and RH_CUDA_TEST_*) must not appear in it, so the
# prefixes are searched. Nor does it print the cluster Cholesky's phase stamps: the format of
# those lines (RH_CLUSTER_PHASES, a diagnostic build's, CMake RH_CUDA_CLUSTER_PHASES=ON) must
# not appear either. Run as cmake -DLIBRARY=<path> -P <this>.
file(READ "${LIBRARY}" _rh_bytes HEX)
foreach(_rh_name RH_CUDA_STAGING RH_CUDA_TEST_ RH_CLUSTER_PHASES)
  string(HEX "${_rh_name}" _rh_hex)
  string(FIND "${_rh_bytes}" "${_rh_hex}" _rh_at)
  if(NOT _rh_at EQUAL -1)
    if(_rh_name STREQUAL "RH_CLUSTER_PHASES")
      message(FATAL_ERROR "${LIBRARY} prints the cluster Cholesky's phase stamps: it was built "
                          "with RH_CUDA_CLUSTER_PHASES=ON, a diagnostic build, never a release")
    endif()
    message(FATAL_ERROR "${LIBRARY} contains '${_rh_name}': the shipped engine must not read "
                        "test switches (they belong to librh_cuda_testing)")
  endif()
endforeach()
