# The shipped librh_cuda reads no test switch from the environment: the names the test build
# reads (test_switches.cpp) must not appear in it. Run as cmake -DLIBRARY=<path> -P <this>.
file(READ "${LIBRARY}" _rh_bytes HEX)
foreach(_rh_name RH_CUDA_STAGING RH_CUDA_STAGING_THREADS RH_CUDA_TEST_CHUNK
                 RH_CUDA_TEST_FAIL_CALL RH_CUDA_TEST_FAIL_KIND)
  string(HEX "${_rh_name}" _rh_hex)
  string(FIND "${_rh_bytes}" "${_rh_hex}" _rh_at)
  if(NOT _rh_at EQUAL -1)
    message(FATAL_ERROR "${LIBRARY} contains '${_rh_name}': the shipped engine must not read "
                        "test switches (they belong to librh_cuda_testing)")
  endif()
endforeach()
