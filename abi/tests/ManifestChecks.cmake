# rh_generate_manifest_checks(MANIFEST OUTPUT): writes a header of RH_ABI_CHECK lines derived from
# rh_cuda_contract.json, so the static_assert translation units can never be edited out of step
# with the manifest. The including file defines RH_ABI_CHECK and RH_ABI_IS_TYPE for its language.

function(rh_generate_manifest_checks manifest output)
  file(READ "${manifest}" json)
  set(body "/* Generated from ${manifest} by abi/tests/ManifestChecks.cmake. Do not edit. */\n")

  string(JSON abi_version GET "${json}" abi_version)
  string(JSON pointer_size GET "${json}" pointer_size)
  string(APPEND body "RH_ABI_CHECK(RH_CUDA_ABI_VERSION == ${abi_version}u, \"RH_CUDA_ABI_VERSION == ${abi_version}\");\n")
  string(APPEND body "RH_ABI_CHECK(sizeof(void*) == ${pointer_size}, \"pointer size == ${pointer_size}\");\n")

  set(constant_count 0)
  string(JSON n_groups LENGTH "${json}" constants)
  math(EXPR last_group "${n_groups} - 1")
  foreach(g RANGE ${last_group})
    string(JSON group MEMBER "${json}" constants ${g})
    string(JSON n_names LENGTH "${json}" constants ${group})
    math(EXPR last_name "${n_names} - 1")
    foreach(c RANGE ${last_name})
      string(JSON name MEMBER "${json}" constants ${group} ${c})
      string(JSON value GET "${json}" constants ${group} ${name})
      string(APPEND body "RH_ABI_CHECK(${name} == ${value}, \"${name} == ${value}\");\n")
      math(EXPR constant_count "${constant_count} + 1")
    endforeach()
  endforeach()

  set(field_count 0)
  string(JSON n_structs LENGTH "${json}" structs)
  math(EXPR last_struct "${n_structs} - 1")
  foreach(s RANGE ${last_struct})
    string(JSON type MEMBER "${json}" structs ${s})
    string(JSON size GET "${json}" structs ${type} size)
    string(APPEND body "RH_ABI_CHECK(sizeof(${type}) == ${size}, \"sizeof(${type}) == ${size}\");\n")
    string(JSON n_fields LENGTH "${json}" structs ${type} fields)
    math(EXPR last_field "${n_fields} - 1")
    foreach(f RANGE ${last_field})
      string(JSON field GET "${json}" structs ${type} fields ${f} name)
      string(JSON ctype GET "${json}" structs ${type} fields ${f} type)
      string(JSON offset GET "${json}" structs ${type} fields ${f} offset)
      string(JSON width GET "${json}" structs ${type} fields ${f} width)
      set(alias "rh_abi_field_${type}_${field}")
      string(APPEND body
        "typedef ${ctype} ${alias};\n"
        "RH_ABI_CHECK(offsetof(${type}, ${field}) == ${offset}, \"offsetof(${type}, ${field}) == ${offset}\");\n"
        "RH_ABI_CHECK(sizeof(((${type}*)0)->${field}) == ${width}, \"width of ${type}.${field} == ${width}\");\n"
        "RH_ABI_CHECK(RH_ABI_IS_TYPE(((${type}*)0)->${field}, ${alias}), \"type of ${type}.${field} is ${ctype}\");\n")
      math(EXPR field_count "${field_count} + 1")
    endforeach()
  endforeach()

  string(JSON n_symbols LENGTH "${json}" symbols)
  math(EXPR last_symbol "${n_symbols} - 1")
  foreach(i RANGE ${last_symbol})
    string(JSON name GET "${json}" symbols ${i} name)
    string(JSON returns GET "${json}" symbols ${i} returns)
    string(JSON n_params LENGTH "${json}" symbols ${i} params)
    set(param_types "")
    if(n_params EQUAL 0)
      set(param_types "void")
    else()
      math(EXPR last_param "${n_params} - 1")
      foreach(k RANGE ${last_param})
        string(JSON param GET "${json}" symbols ${i} params ${k})
        # "const RhCudaEngineOptions* options" -> "const RhCudaEngineOptions*": drop the name.
        string(REGEX REPLACE "[ ]*[A-Za-z_][A-Za-z0-9_]*$" "" param_type "${param}")
        if(param_type STREQUAL param OR param_type STREQUAL "")
          message(FATAL_ERROR "manifest symbol ${name}: cannot split parameter '${param}'")
        endif()
        list(APPEND param_types "${param_type}")
      endforeach()
      list(JOIN param_types ", " param_types)
    endif()
    set(alias "rh_abi_function_${name}")
    string(APPEND body
      "typedef ${returns} (*${alias})(${param_types});\n"
      "RH_ABI_CHECK(RH_ABI_IS_TYPE(&${name}, ${alias}), \"${name} is ${returns}(${param_types})\");\n")
  endforeach()

  if(NOT n_symbols EQUAL 17)
    message(FATAL_ERROR "${manifest} lists ${n_symbols} symbols; the ABI has exactly 17")
  endif()
  if(n_structs EQUAL 0 OR field_count EQUAL 0 OR constant_count EQUAL 0)
    message(FATAL_ERROR "${manifest}: found ${n_structs} structs, ${field_count} fields, "
                        "${constant_count} constants; refusing to generate empty checks")
  endif()
  file(CONFIGURE OUTPUT "${output}" CONTENT "${body}" @ONLY)
endfunction()
