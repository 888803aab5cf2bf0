# Included by ctest (the test directory's TEST_INCLUDE_FILES, CMakeLists.txt) with
# RH_NUMERICS_EXECUTABLE set: one entry per test that `test_cuda_numerics --list` names, each
# running `test_cuda_numerics NAME` (exit 77 without a GPU: SKIPPED). A binary that is missing or
# cannot list its tests gives one entry that runs it and so fails, never silently no entries.
if(EXISTS "${RH_NUMERICS_EXECUTABLE}")
  execute_process(COMMAND "${RH_NUMERICS_EXECUTABLE}" --list
                  OUTPUT_VARIABLE _rh_listed RESULT_VARIABLE _rh_listed_rc)
else()
  set(_rh_listed_rc "not built")
endif()
if(NOT _rh_listed_rc STREQUAL "0")
  add_test(test_cuda_numerics "${RH_NUMERICS_EXECUTABLE}" --list)
  set_tests_properties(test_cuda_numerics PROPERTIES LABELS cuda)
else()
  string(REGEX MATCHALL "[A-Za-z0-9_]+" _rh_names "${_rh_listed}")
  foreach(_rh_name IN LISTS _rh_names)
    add_test(test_cuda_numerics.${_rh_name} "${RH_NUMERICS_EXECUTABLE}" ${_rh_name})
    set_tests_properties(test_cuda_numerics.${_rh_name} PROPERTIES
      SKIP_RETURN_CODE 77 LABELS cuda TIMEOUT 300)
  endforeach()
endif()
