# Warning flags shared by every engine target.
#
# RH_HOST_WARNING_FLAGS holds the C/C++ flags as a list so the CUDA engine can forward them to
# its host compiler (-Xcompiler) when it wants to; rh_set_warnings() applies them to C and C++
# sources of a target.
if(MSVC)
  set(RH_HOST_WARNING_FLAGS /W4)
  set(RH_HOST_WERROR_FLAG /WX)
else()
  set(RH_HOST_WARNING_FLAGS -Wall -Wextra -Wshadow -Wstrict-overflow=2 -Wformat=2)
  set(RH_HOST_WERROR_FLAG -Werror)
endif()

function(rh_set_warnings target)
  set(flags ${RH_HOST_WARNING_FLAGS})
  if(RH_WARNINGS_AS_ERRORS)
    list(APPEND flags ${RH_HOST_WERROR_FLAG})
  endif()
  target_compile_options(${target} PRIVATE "$<$<COMPILE_LANGUAGE:C,CXX>:${flags}>")
endfunction()
