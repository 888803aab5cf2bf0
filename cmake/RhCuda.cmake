# Decides RH_ENABLE_CUDA from RH_BUILD_CUDA (ON / OFF / AUTO).
# AUTO builds librh_cuda only when a CUDA compiler and a toolkit with cuBLAS and cuSOLVER are
# found, so machines without CUDA still build and test everything else.
set(RH_ENABLE_CUDA OFF)
set(RH_CUDA_SKIP_REASON "switched off")
# RH_CUDA_LIBRARY_ROOT: an extra prefix with include/ and lib/ holding cuBLAS and cuSOLVER when
# the toolkit lacks them (e.g. the nvidia-cublas / nvidia-cusolver wheels' nvidia/cu13 folder),
# so the engine can be compile-checked on a machine with nvcc alone.
set(RH_CUDA_LIBRARY_ROOT "" CACHE PATH "Extra prefix holding cuBLAS/cuSOLVER headers and libraries")
if(RH_CUDA_LIBRARY_ROOT)
  list(APPEND CMAKE_LIBRARY_PATH "${RH_CUDA_LIBRARY_ROOT}/lib" "${RH_CUDA_LIBRARY_ROOT}/lib64")
endif()
string(TOUPPER "${RH_BUILD_CUDA}" _rh_cuda_mode)
if(NOT _rh_cuda_mode STREQUAL "OFF")
  include(CheckLanguage)
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    find_package(CUDAToolkit QUIET)
  endif()
  if(CMAKE_CUDA_COMPILER AND CUDAToolkit_FOUND AND TARGET CUDA::cublas AND TARGET CUDA::cusolver)
    set(RH_ENABLE_CUDA ON)
  elseif(_rh_cuda_mode STREQUAL "ON")
    message(FATAL_ERROR "RH_BUILD_CUDA=ON but no CUDA compiler with cuBLAS and cuSOLVER was found "
                        "(compiler: '${CMAKE_CUDA_COMPILER}', toolkit found: '${CUDAToolkit_FOUND}')")
  else()
    set(RH_CUDA_SKIP_REASON "no CUDA compiler with cuBLAS and cuSOLVER found")
    message(STATUS "renewable-huber: CUDA engine skipped (no CUDA compiler with cuBLAS/cuSOLVER found)")
  endif()
endif()
if(RH_ENABLE_CUDA AND RH_CUDA_LIBRARY_ROOT)
  foreach(_rh_target CUDA::cublas CUDA::cusolver)
    set_property(TARGET ${_rh_target} APPEND PROPERTY
      INTERFACE_INCLUDE_DIRECTORIES "${RH_CUDA_LIBRARY_ROOT}/include")
  endforeach()
endif()
if(RH_ENABLE_CUDA)
  if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
    # sm_90 machine code for the H100/H200 plus compute_90 PTX for forward compatibility.
    set(CMAKE_CUDA_ARCHITECTURES "90-real;90-virtual")
  endif()
  enable_language(CUDA)
  message(STATUS "renewable-huber: CUDA engine enabled (CUDA ${CUDAToolkit_VERSION})")
endif()
