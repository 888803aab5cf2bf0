# Build switches for portable binaries (Python wheels).
#
# RH_OPENMP (AUTO / ON / OFF) decides whether librh_cpu is parallelised with OpenMP; see
# engines/cpu_c/CMakeLists.txt. OFF gives a serial engine with no OpenMP runtime to ship.
#
# RH_GLIBC_COMPAT: glibc 2.27 and 2.29 gave exp, log, pow and their float and base-2 siblings new
# symbol versions (the new ones drop the SVID error handling, which only touched errno). A library
# compiled against a newer glibc therefore needs glibc >= 2.29 at run time for no other reason.
# With the switch on, every C file of the target is compiled with cmake/rh_glibc_compat.h
# force-included, which binds those calls to the architecture's original versions: the same
# functions, the same results, found in every glibc. `auditwheel show` then reports the glibc the
# library really needs. GCC or Clang on glibc-based Linux only.
string(TOUPPER "${RH_OPENMP}" RH_OPENMP)
if(NOT RH_OPENMP MATCHES "^(AUTO|ON|OFF)$")
  message(FATAL_ERROR "RH_OPENMP must be AUTO, ON or OFF (got '${RH_OPENMP}')")
endif()
if(RH_GLIBC_COMPAT AND NOT (CMAKE_SYSTEM_NAME STREQUAL "Linux" AND CMAKE_C_COMPILER_ID MATCHES "GNU|Clang"))
  message(FATAL_ERROR "RH_GLIBC_COMPAT needs GCC or Clang on Linux (glibc symbol versions)")
endif()

# rh_portable_glibc(<target>): the force-included symbol-version header, when RH_GLIBC_COMPAT.
function(rh_portable_glibc target)
  if(RH_GLIBC_COMPAT)
    target_compile_options(${target} PRIVATE
      "$<$<COMPILE_LANGUAGE:C>:SHELL:-include ${PROJECT_SOURCE_DIR}/cmake/rh_glibc_compat.h>")
  endif()
endfunction()
