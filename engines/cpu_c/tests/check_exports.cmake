# Fails unless LIBRARY exports exactly the 17 rh_cuda_* functions (ctest runs this with
# cmake -P). NM is the nm of the toolchain.
execute_process(COMMAND "${NM}" -D --defined-only "${LIBRARY}"
                OUTPUT_VARIABLE listing RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "nm failed on ${LIBRARY}")
endif()
string(REGEX MATCHALL "[0-9a-fA-F]+ [TtWDBR] [A-Za-z_][A-Za-z0-9_@.]*" entries "${listing}")
set(names "")
foreach(entry IN LISTS entries)
  string(REGEX REPLACE "^[0-9a-fA-F]+ [A-Za-z] " "" name "${entry}")
  string(REGEX REPLACE "@.*$" "" name "${name}")
  if(NOT name MATCHES "^(_init|_fini)$")
    list(APPEND names "${name}")
  endif()
endforeach()
list(SORT names)
set(expected rh_cuda_abi_version rh_cuda_device_count rh_cuda_engine_copy_state
    rh_cuda_engine_create rh_cuda_engine_destroy rh_cuda_engine_features
    rh_cuda_engine_last_error rh_cuda_engine_predict rh_cuda_engine_restore
    rh_cuda_engine_stream rh_cuda_engine_synchronize rh_cuda_engine_update_device_with_state
    rh_cuda_engine_update_host rh_cuda_engine_update_host_with_state rh_cuda_is_available
    rh_cuda_last_error rh_cuda_runtime_info)
list(LENGTH expected expected_count)
if(NOT expected_count EQUAL 17)
  message(FATAL_ERROR "the expected list itself has ${expected_count} names, not 17")
endif()
if(NOT names STREQUAL expected)
  message(FATAL_ERROR "${LIBRARY} exports\n  ${names}\nexpected exactly\n  ${expected}")
endif()
message(STATUS "${LIBRARY}: exactly the 17 ABI symbols")
