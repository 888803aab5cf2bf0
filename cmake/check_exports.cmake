# cmake -DNM=<nm> -DLIBRARY=<engine library> -DMANIFEST=<abi/rh_cuda_contract.json>
#       [-DWITH_EXTENSIONS=ON] -P check_exports.cmake
# Fails unless LIBRARY exports exactly the functions the manifest lists (ctest runs it on every
# shipped engine): its 17 required symbols, plus with WITH_EXTENSIONS every symbol of its
# optional extensions. NM is the nm of the toolchain.
include("${CMAKE_CURRENT_LIST_DIR}/RhAbiSymbols.cmake")
foreach(input NM LIBRARY MANIFEST)
  if(NOT DEFINED ${input})
    message(FATAL_ERROR "check_exports.cmake needs -D${input}=...")
  endif()
endforeach()
rh_abi_symbols("${MANIFEST}" expected)
set(extension_count 0)
if(WITH_EXTENSIONS)
  rh_abi_extension_symbols("${MANIFEST}" extension_names)
  list(LENGTH extension_names extension_count)
  list(APPEND expected ${extension_names})
endif()

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

set(extra ${names})
list(REMOVE_ITEM extra ${expected})
set(missing ${expected})
if(names)
  list(REMOVE_ITEM missing ${names})
endif()
if(extra OR missing)
  message(FATAL_ERROR "${LIBRARY} does not export exactly the symbols of ${MANIFEST}:\n"
                      "  exported but not in the manifest: ${extra}\n"
                      "  in the manifest but not exported: ${missing}")
endif()
message(STATUS "${LIBRARY}: exactly the ${RH_ABI_SYMBOL_COUNT} symbols of the manifest"
               " and ${extension_count} extension symbols")
