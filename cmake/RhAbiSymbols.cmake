# The exported symbol list of the ABI comes from one place, abi/rh_cuda_contract.json: the linker
# version script both engines link with is generated from it at configure time, and the export
# check (check_exports.cmake) reads it the same way. Usable from a project and from `cmake -P`.

set(RH_ABI_SYMBOL_COUNT 17)

# rh_abi_symbols(<manifest> <out-var>): the manifest's function names, in manifest order.
# Fails unless there are exactly RH_ABI_SYMBOL_COUNT distinct names of the form rh_cuda_*.
# Each reason stands on an indented line of its own, which CMake prints without re-wrapping
# (ctest matches these messages).
function(rh_abi_symbols manifest out_var)
  file(READ "${manifest}" json)
  string(JSON n_symbols ERROR_VARIABLE json_error LENGTH "${json}" symbols)
  if(json_error)
    message(FATAL_ERROR "${manifest}:\n  no \"symbols\" array (${json_error})")
  endif()
  if(NOT n_symbols EQUAL RH_ABI_SYMBOL_COUNT)
    message(FATAL_ERROR "${manifest}:\n  lists ${n_symbols} symbols; the ABI has exactly "
                        "${RH_ABI_SYMBOL_COUNT}")
  endif()
  set(names "")
  math(EXPR last "${n_symbols} - 1")
  foreach(i RANGE ${last})
    string(JSON name GET "${json}" symbols ${i} name)
    # A name that is not a plain rh_cuda_ identifier would make the version script match
    # something else (a pattern) or nothing at all.
    if(NOT name MATCHES "^rh_cuda_[a-z0-9_]+$")
      message(FATAL_ERROR "${manifest}:\n  symbol ${i} has the name '${name}', not rh_cuda_[a-z0-9_]+")
    endif()
    if(name IN_LIST names)
      message(FATAL_ERROR "${manifest}:\n  symbol ${name} is listed twice")
    endif()
    list(APPEND names "${name}")
  endforeach()
  set(${out_var} "${names}" PARENT_SCOPE)
endfunction()

# rh_abi_extension_symbols(<manifest> <out-var>): the function names of the manifest's optional
# extensions ("extensions": [{"name", "symbols": [...]}, ...]), in manifest order; empty when it
# has none. They are never among the 17 required symbols: an engine exports an extension's
# symbols in addition, or not at all. Same name rules as the core symbols.
function(rh_abi_extension_symbols manifest out_var)
  file(READ "${manifest}" json)
  rh_abi_symbols("${manifest}" core)
  set(names "")
  string(JSON n_extensions ERROR_VARIABLE json_error LENGTH "${json}" extensions)
  if(json_error OR n_extensions EQUAL 0)
    set(${out_var} "" PARENT_SCOPE)
    return()
  endif()
  math(EXPR last_extension "${n_extensions} - 1")
  foreach(e RANGE ${last_extension})
    string(JSON extension GET "${json}" extensions ${e} name)
    string(JSON n_symbols LENGTH "${json}" extensions ${e} symbols)
    math(EXPR last "${n_symbols} - 1")
    foreach(i RANGE ${last})
      string(JSON name GET "${json}" extensions ${e} symbols ${i} name)
      if(NOT name MATCHES "^rh_cuda_[a-z0-9_]+$")
        message(FATAL_ERROR "${manifest}:\n  extension ${extension} symbol ${i} has the name '${name}', not rh_cuda_[a-z0-9_]+")
      endif()
      if(name IN_LIST names OR name IN_LIST core)
        message(FATAL_ERROR "${manifest}:\n  symbol ${name} is listed twice")
      endif()
      list(APPEND names "${name}")
    endforeach()
  endforeach()
  set(${out_var} "${names}" PARENT_SCOPE)
endfunction()

# rh_generate_version_script(<manifest> <output> [WITH_EXTENSIONS]): a GNU ld version script
# that exports exactly the manifest's symbols (with WITH_EXTENSIONS also its optional extensions'
# symbols: both engines implement them) and keeps everything else
# (rh_common, libgomp, the static CUDA runtime) local. Rewritten only when its text changes, so a
# reconfigure relinks nothing needlessly; the manifest is a configure dependency, so editing it
# regenerates the script.
function(rh_generate_version_script manifest output)
  cmake_parse_arguments(PARSE_ARGV 2 arg "WITH_EXTENSIONS" "" "")
  rh_abi_symbols("${manifest}" names)
  if(arg_WITH_EXTENSIONS)
    rh_abi_extension_symbols("${manifest}" extension_names)
    list(APPEND names ${extension_names})
  endif()
  file(RELATIVE_PATH shown "${PROJECT_SOURCE_DIR}" "${manifest}")
  set(body "/* Generated from ${shown} by cmake/RhAbiSymbols.cmake; do not edit. */\n{\n  global:\n")
  foreach(name IN LISTS names)
    string(APPEND body "    ${name};\n")
  endforeach()
  string(APPEND body "  local:\n    *;\n};\n")
  file(CONFIGURE OUTPUT "${output}" CONTENT "${body}" @ONLY)
  get_property(depends DIRECTORY "${PROJECT_SOURCE_DIR}" PROPERTY CMAKE_CONFIGURE_DEPENDS)
  if(NOT manifest IN_LIST depends)
    set_property(DIRECTORY "${PROJECT_SOURCE_DIR}" APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS "${manifest}")
  endif()
endfunction()

# rh_add_export_check(<test> <target> [MANIFEST <json>] [EXPECT_FAILURE <regex>]
#                     [WITH_EXTENSIONS]): a ctest that runs check_exports.cmake on <target>'s
# library against the manifest (default: the project's); WITH_EXTENSIONS: the library must also
# export every symbol of the manifest's optional extensions.
# With EXPECT_FAILURE the test passes only when the check fails with output matching <regex>
# (tests of the check itself). ELF platforms only: elsewhere no version script is used.
function(rh_add_export_check test target)
  cmake_parse_arguments(PARSE_ARGV 2 arg "WITH_EXTENSIONS" "MANIFEST;EXPECT_FAILURE" "")
  if(NOT (UNIX AND NOT APPLE AND CMAKE_NM))
    return()
  endif()
  if(NOT arg_MANIFEST)
    set(arg_MANIFEST "${RH_ABI_MANIFEST}")
  endif()
  set(extensions OFF)
  if(arg_WITH_EXTENSIONS)
    set(extensions ON)
  endif()
  add_test(NAME ${test}
           COMMAND ${CMAKE_COMMAND} -DNM=${CMAKE_NM} -DLIBRARY=$<TARGET_FILE:${target}>
                   -DMANIFEST=${arg_MANIFEST} -DWITH_EXTENSIONS=${extensions} -P "${PROJECT_SOURCE_DIR}/cmake/check_exports.cmake")
  if(arg_EXPECT_FAILURE)
    # ctest then ignores the exit code, so <regex> must be text that only the failure prints.
    set_tests_properties(${test} PROPERTIES PASS_REGULAR_EXPRESSION "${arg_EXPECT_FAILURE}")
  endif()
endfunction()
