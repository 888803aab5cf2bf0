# Where `cmake --install` puts things, and the CMake package and pkg-config files that let C and
# C++ programs find the engines.
#
# Two layouts:
#   - a Python wheel (scikit-build-core sets SKBUILD): everything under the renewable_huber
#     package, the libraries in renewable_huber/_lib (where the ctypes loader looks), the header
#     in renewable_huber/include and the CMake package in renewable_huber/cmake, so C++ builds
#     can use an installed wheel (`renewable-huber info --cmake-dir`);
#   - a plain prefix: include/rh_cuda.h, lib/librh_cpu.so.2 and librh_cuda.so.2 (SONAME carries
#     the ABI major) with their development symlinks, lib/cmake/renewable_huber and
#     lib/pkgconfig/rh_cpu.pc, rh_cuda.pc.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

# The ABI version in the header is the version of the C package: find_package(renewable_huber 2)
# accepts any 2.x, never another major.
file(STRINGS "${PROJECT_SOURCE_DIR}/abi/rh_cuda.h" _rh_abi_line
     REGEX "^#define RH_CUDA_ABI_VERSION [0-9]+u$")
string(REGEX REPLACE "^#define RH_CUDA_ABI_VERSION ([0-9]+)u$" "\\1" RH_ABI_MAJOR "${_rh_abi_line}")
if(NOT RH_ABI_MAJOR MATCHES "^[0-9]+$")
  message(FATAL_ERROR "RH_CUDA_ABI_VERSION not found in abi/rh_cuda.h")
endif()
set(RH_PACKAGE_VERSION "${RH_ABI_MAJOR}.0.0")

if(SKBUILD)
  set(RH_INSTALL_LIBDIR "renewable_huber/_lib")
  set(RH_INSTALL_INCLUDEDIR "renewable_huber/include")
  set(RH_INSTALL_CMAKEDIR "renewable_huber/cmake/renewable_huber")
  set(RH_INSTALL_DATADIR "renewable_huber/conformance/data")
else()
  set(RH_INSTALL_LIBDIR "${CMAKE_INSTALL_LIBDIR}")
  set(RH_INSTALL_INCLUDEDIR "${CMAKE_INSTALL_INCLUDEDIR}")
  set(RH_INSTALL_CMAKEDIR "${CMAKE_INSTALL_LIBDIR}/cmake/renewable_huber")
  set(RH_INSTALL_DATADIR "${CMAKE_INSTALL_DATADIR}/renewable_huber")
endif()

# rh_install_engine(<target> <description>): the library with its SONAME, its export set for
# the CMake package and, outside a wheel, its pkg-config file.
function(rh_install_engine target description)
  set_target_properties(${target} PROPERTIES SOVERSION ${RH_ABI_MAJOR})
  target_include_directories(${target} INTERFACE
    "$<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/abi>"
    "$<INSTALL_INTERFACE:${RH_INSTALL_INCLUDEDIR}>")
  # Each engine is its own install component (named like the target), so a package can carry
  # one engine alone: the CUDA wheel installs only the rh_cuda component on top of the base
  # wheel (packaging/cuda). Everything shared (header, CMake package, corpora) is component
  # "rh_common".
  if(SKBUILD)
    # A wheel cannot hold symbolic links: only the SONAME file, which the loader and the
    # package's imported target both name.
    install(TARGETS ${target} EXPORT ${target}_targets
      LIBRARY DESTINATION ${RH_INSTALL_LIBDIR} NAMELINK_SKIP COMPONENT ${target}
      RUNTIME DESTINATION ${RH_INSTALL_LIBDIR} COMPONENT ${target})
  else()
    install(TARGETS ${target} EXPORT ${target}_targets
      LIBRARY DESTINATION ${RH_INSTALL_LIBDIR} COMPONENT ${target}
      ARCHIVE DESTINATION ${RH_INSTALL_LIBDIR} COMPONENT ${target}
      RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT ${target})
    set(RH_PC_NAME ${target})
    set(RH_PC_DESCRIPTION "${description}")
    # Relocatable: the prefix is found from where the .pc file lies, so `cmake --install
    # --prefix` anywhere gives working flags.
    file(RELATIVE_PATH RH_PC_PREFIX_FROM_PCDIR "/prefix/${RH_INSTALL_LIBDIR}/pkgconfig" "/prefix")
    string(REGEX REPLACE "/$" "" RH_PC_PREFIX_FROM_PCDIR "${RH_PC_PREFIX_FROM_PCDIR}")
    configure_file("${PROJECT_SOURCE_DIR}/cmake/rh_engine.pc.in"
                   "${PROJECT_BINARY_DIR}/pkgconfig/${target}.pc" @ONLY)
    install(FILES "${PROJECT_BINARY_DIR}/pkgconfig/${target}.pc"
            DESTINATION "${RH_INSTALL_LIBDIR}/pkgconfig" COMPONENT ${target})
  endif()
  install(EXPORT ${target}_targets NAMESPACE renewable_huber::
          FILE renewable_huber_${target}_targets.cmake DESTINATION "${RH_INSTALL_CMAKEDIR}"
          COMPONENT ${target})
endfunction()

function(rh_install_package)
  install(FILES "${PROJECT_SOURCE_DIR}/abi/rh_cuda.h"
                "${PROJECT_SOURCE_DIR}/abi/rh_cuda_row_statistics.h"
          DESTINATION "${RH_INSTALL_INCLUDEDIR}" COMPONENT rh_common)
  configure_package_config_file("${PROJECT_SOURCE_DIR}/cmake/renewable_huberConfig.cmake.in"
    "${PROJECT_BINARY_DIR}/renewable_huberConfig.cmake"
    INSTALL_DESTINATION "${RH_INSTALL_CMAKEDIR}")
  write_basic_package_version_file("${PROJECT_BINARY_DIR}/renewable_huberConfigVersion.cmake"
    VERSION ${RH_PACKAGE_VERSION} COMPATIBILITY SameMajorVersion)
  install(FILES "${PROJECT_BINARY_DIR}/renewable_huberConfig.cmake"
                "${PROJECT_BINARY_DIR}/renewable_huberConfigVersion.cmake"
          DESTINATION "${RH_INSTALL_CMAKEDIR}" COMPONENT rh_common)
  # The kit's data (golden corpora, negative cases, tolerance profiles), so an installed engine
  # can be checked with the conformance kit.
  file(GLOB _rh_corpora "${PROJECT_SOURCE_DIR}/conformance/corpora/native_core_v*.json")
  install(FILES ${_rh_corpora} "${PROJECT_SOURCE_DIR}/conformance/negative_cases.json"
                "${PROJECT_SOURCE_DIR}/conformance/tolerances.json"
          DESTINATION "${RH_INSTALL_DATADIR}" COMPONENT rh_common)
endfunction()
