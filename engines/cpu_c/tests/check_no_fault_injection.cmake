# The shipped librh_cpu carries no fault injection: the variable the injection build reads
# (src/allocation.c) must be absent from LIBRARY and present in FAULTS_LIBRARY, so the check
# itself is shown to look at the right bytes. Run as
# cmake -DLIBRARY=<librh_cpu> -DFAULTS_LIBRARY=<librh_cpu_faults> -P <this>.
string(HEX "RH_CPU_TEST_FAIL_ALLOCATION" _rh_hex)
file(READ "${FAULTS_LIBRARY}" _rh_faults HEX)
string(FIND "${_rh_faults}" "${_rh_hex}" _rh_at)
if(_rh_at EQUAL -1)
  message(FATAL_ERROR "${FAULTS_LIBRARY} does not contain RH_CPU_TEST_FAIL_ALLOCATION: the "
                      "check would prove nothing")
endif()
file(READ "${LIBRARY}" _rh_shipped HEX)
string(FIND "${_rh_shipped}" "${_rh_hex}" _rh_at)
if(NOT _rh_at EQUAL -1)
  message(FATAL_ERROR "${LIBRARY} contains RH_CPU_TEST_FAIL_ALLOCATION: the shipped engine "
                      "must be built without RH_FAULT_INJECTION")
endif()
message(STATUS "${LIBRARY}: no fault injection")
