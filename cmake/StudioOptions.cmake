# Build options. Everything the project can switch is prefixed STUDIO_.
option(STUDIO_BUILD_TESTS "Build the Qt Test suites and register them with CTest" ON)
option(STUDIO_WERROR "Treat compiler warnings as errors" OFF)
set(STUDIO_SANITIZE "" CACHE STRING "Sanitizers to build with, e.g. address,undefined")
option(STUDIO_FUZZ "Build the libFuzzer targets of fuzz/ (clang; scripts/fuzz.sh)" OFF)
# STUDIO_BUILD_ENGINE / STUDIO_BUILD_GUI default to ON where their packages are found (see
# StudioDependencies.cmake); STUDIO_CUDA is AUTO, ON or OFF.
set(STUDIO_CUDA AUTO CACHE STRING "Build the CUDA kernel cores: AUTO (when nvcc is found), ON, OFF")
set_property(CACHE STUDIO_CUDA PROPERTY STRINGS AUTO ON OFF)

find_program(STUDIO_CCACHE ccache)
if(STUDIO_CCACHE)
  set(CMAKE_CXX_COMPILER_LAUNCHER ${STUDIO_CCACHE})
  set(CMAKE_CUDA_COMPILER_LAUNCHER ${STUDIO_CCACHE})
endif()

# Applied to our own targets only, never to third-party headers' consumers.
add_library(studio_warnings INTERFACE)
target_compile_options(studio_warnings INTERFACE
  $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wpedantic -Wno-unused-parameter>
  $<$<AND:$<COMPILE_LANGUAGE:CXX>,$<BOOL:${STUDIO_WERROR}>>:-Werror>)
if(STUDIO_FUZZ)  # coverage for libFuzzer in every library a fuzz target reaches
  target_compile_options(studio_warnings INTERFACE -fsanitize=fuzzer-no-link)
endif()
if(STUDIO_SANITIZE)
  target_compile_options(studio_warnings INTERFACE -fsanitize=${STUDIO_SANITIZE} -fno-omit-frame-pointer)
  target_link_options(studio_warnings INTERFACE -fsanitize=${STUDIO_SANITIZE})
endif()
