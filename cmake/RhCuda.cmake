# Decides RH_ENABLE_CUDA from RH_BUILD_CUDA (ON / OFF / AUTO).
# AUTO builds librh_cuda only when a CUDA compiler and a toolkit with cuBLAS and cuSOLVER are
# found, so machines without CUDA still build and test everything else.
set(RH_ENABLE_CUDA OFF)
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
    message(STATUS "renewable-huber: CUDA engine skipped (no CUDA compiler with cuBLAS/cuSOLVER found)")
  endif()
endif()
if(RH_ENABLE_CUDA)
  if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
    # sm_90 machine code for the H100/H200 plus compute_90 PTX for forward compatibility.
    set(CMAKE_CUDA_ARCHITECTURES "90-real;90-virtual")
  endif()
  enable_language(CUDA)
  message(STATUS "renewable-huber: CUDA engine enabled (CUDA ${CUDAToolkit_VERSION})")
endif()
