# The trainer's precompiled <torch/torch.h>, reused by the targets built on it (tests, benches,
# studio-train). Included by trainer/CMakeLists.txt once studio_trainer has its PCH.
#
# Measured on the 2-core AMD EPYC machine (-O2 -g, one compile at a time, docs/PERFORMANCE.md):
# a TU that includes LibTorch takes 20-26 s less with the .gch (tst_safetensors.cpp 70 -> 50 s,
# app/cmd_train.cpp 53 -> 27 s); one that does not takes ~9 s more (tst_lr_schedule.cpp 8 -> 17 s),
# so only the sources that reach LibTorch get it.

# ccache serves compiles that use a GCC precompiled header only with these sloppiness settings
# (ccache manual, "Precompiled headers"); without them every such TU is a cache miss.
function(studio_pch_ccache target)
  if(STUDIO_CCACHE)
    set(_sloppiness pch_defines,time_macros,include_file_mtime,include_file_ctime)
    set_target_properties(${target} PROPERTIES CXX_COMPILER_LAUNCHER
      "${CMAKE_COMMAND};-E;env;CCACHE_SLOPPINESS=${_sloppiness};${STUDIO_CCACHE}")
  endif()
endfunction()

# Where the project's "studio/..." headers are found: every folder's include/.
file(GLOB _studio_include_roots LIST_DIRECTORIES true
     "${PROJECT_SOURCE_DIR}/*/include" "${PROJECT_SOURCE_DIR}/*/*/include")
set(STUDIO_INCLUDE_ROOTS ${_studio_include_roots} CACHE INTERNAL "the project's include/ folders")

# studio_reaches_torch(<file> <out>): TRUE when <file> includes LibTorch (<torch/...>, <ATen/...>,
# <c10/...>), itself or through the "..." headers it includes (found next to it or under one of
# STUDIO_INCLUDE_ROOTS), read at configure time; each file is read once per configure. A header
# it cannot find (a generated one) counts as not reaching LibTorch: that source then compiles
# without the .gch, slower but the same.
function(studio_reaches_torch file out)
  get_property(_known GLOBAL PROPERTY "studio_torch:${file}" SET)
  if(_known)
    get_property(_result GLOBAL PROPERTY "studio_torch:${file}")
    set(${out} ${_result} PARENT_SCOPE)
    return()
  endif()
  set_property(GLOBAL PROPERTY "studio_torch:${file}" FALSE)  # ends a loop of headers
  file(READ "${file}" _text)
  set(_result FALSE)
  if(_text MATCHES "#include <(torch|ATen|c10)/")
    set(_result TRUE)
  else()
    get_filename_component(_here "${file}" DIRECTORY)
    string(REGEX MATCHALL "#include \"[^\"]+\"" _includes "${_text}")
    foreach(_include IN LISTS _includes)
      string(REGEX REPLACE "#include \"([^\"]+)\"" "\\1" _name "${_include}")
      foreach(_dir IN ITEMS "${_here}" ${STUDIO_INCLUDE_ROOTS})
        if(EXISTS "${_dir}/${_name}" AND NOT IS_DIRECTORY "${_dir}/${_name}")
          studio_reaches_torch("${_dir}/${_name}" _sub)
          if(_sub)
            set(_result TRUE)
          endif()
          break()
        endif()
      endforeach()
      if(_result)
        break()
      endif()
    endforeach()
  endif()
  set_property(GLOBAL PROPERTY "studio_torch:${file}" ${_result})
  set(${out} ${_result} PARENT_SCOPE)
endfunction()

# studio_reuse_torch_pch(<target>): the target's C++ sources that reach LibTorch start from
# studio_trainer's precompiled <torch/torch.h> instead of parsing it again; the others (and
# AUTOMOC's own TU) compile as before. Nothing changes for a target none of whose sources
# reaches LibTorch. GCC accepts the .gch only under the same -fPIC, -O, -g and -std, with every
# macro defined when it was made defined the same way (the trainer's compile definitions are
# PUBLIC for this); macros the consumer adds are free as long as torch's headers never name them
# (Qt's, the tests' paths). A refused .gch is an error (-Werror=invalid-pch), not a silent full
# parse. GCC only: clang refuses a PCH whose command-line macros differ at all.
function(studio_reuse_torch_pch target)
  if(NOT CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
    return()
  endif()
  get_target_property(_sources ${target} SOURCES)
  get_target_property(_source_dir ${target} SOURCE_DIR)
  set(_any FALSE)
  set(_plain "${CMAKE_CURRENT_BINARY_DIR}/${target}_autogen/mocs_compilation.cpp")
  foreach(_source IN LISTS _sources)
    if(NOT _source MATCHES "\\.(cpp|cc|cxx)$")
      continue()
    endif()
    if(IS_ABSOLUTE "${_source}")
      set(_path "${_source}")
    else()
      set(_path "${_source_dir}/${_source}")
    endif()
    set(_uses FALSE)
    if(EXISTS "${_path}")
      studio_reaches_torch("${_path}" _uses)
    endif()
    if(_uses)
      set(_any TRUE)
    else()
      list(APPEND _plain "${_path}")
    endif()
  endforeach()
  if(NOT _any)
    return()
  endif()
  target_precompile_headers(${target} REUSE_FROM studio_trainer)
  # Executables outside Qt get no -fPIC of their own; the library's .gch needs it.
  target_compile_options(${target} PRIVATE -fPIC -Werror=invalid-pch)
  studio_pch_ccache(${target})
  set_source_files_properties(${_plain} TARGET_DIRECTORY ${target}
                              PROPERTIES SKIP_PRECOMPILE_HEADERS ON)
endfunction()
