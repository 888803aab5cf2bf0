# RH_SANITIZE=ON builds every C and C++ target (engines, tests) with AddressSanitizer and
# UndefinedBehaviorSanitizer. Any report aborts the process so ctest sees it as a failure.
# CUDA device code is left alone (nvcc does not take these flags); compute-sanitizer covers it.
if(RH_SANITIZE)
  if(MSVC)
    message(FATAL_ERROR "RH_SANITIZE is supported with GCC and Clang only")
  endif()
  set(RH_SANITIZER_FLAGS -fsanitize=address,undefined -fno-sanitize-recover=all
                         -fno-omit-frame-pointer)
  add_compile_options("$<$<COMPILE_LANGUAGE:C,CXX>:${RH_SANITIZER_FLAGS}>")
  add_link_options(-fsanitize=address,undefined)
  message(STATUS "renewable-huber: ASan + UBSan enabled")
endif()
