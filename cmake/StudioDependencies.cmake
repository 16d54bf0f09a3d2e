# Finds the packages and decides which parts can be built. The config library needs only yaml-cpp
# and the header-only nlohmann-json; the engine needs LibTorch; the studio needs Qt 6, QCustomPlot
# and libssh. Each part is ON by default where its packages are found.

find_package(yaml-cpp REQUIRED)
find_package(nlohmann_json 3.9 REQUIRED)
find_package(Threads REQUIRED)

# --- the Python environment: LibTorch (the torch wheel) and the tests' Hugging Face references ----
# scripts/setup.sh installs it outside the clone (scripts/python-env.sh says where); STUDIO_PYTHON is
# its interpreter. Torch's CMake package is found through it unless CMAKE_PREFIX_PATH already has one.
if(NOT DEFINED STUDIO_PYTHON)
  if(DEFINED ENV{STUDIO_PYTHON})
    set(_python "$ENV{STUDIO_PYTHON}")
  else()
    execute_process(
      COMMAND bash -c ". '${CMAKE_CURRENT_SOURCE_DIR}/scripts/python-env.sh' && echo \"$STUDIO_PYTHON\""
      OUTPUT_VARIABLE _python OUTPUT_STRIP_TRAILING_WHITESPACE)
  endif()
  set(STUDIO_PYTHON "${_python}" CACHE FILEPATH
      "The Python interpreter with torch, transformers, tokenizers and trl (scripts/setup.sh)")
endif()
# LLaMA-Factory's command line, in its own environment (scripts/llamafactory-requirements.txt): the
# tests that train with LLaMA-Factory and follow its runs use it.
if(NOT DEFINED STUDIO_LLAMAFACTORY_CLI)
  if(DEFINED ENV{STUDIO_LLAMAFACTORY_CLI})
    set(_lf "$ENV{STUDIO_LLAMAFACTORY_CLI}")
  else()
    execute_process(
      COMMAND bash -c ". '${CMAKE_CURRENT_SOURCE_DIR}/scripts/python-env.sh' && echo \"$STUDIO_LLAMAFACTORY_CLI\""
      OUTPUT_VARIABLE _lf OUTPUT_STRIP_TRAILING_WHITESPACE)
  endif()
  set(STUDIO_LLAMAFACTORY_CLI "${_lf}" CACHE FILEPATH
      "llamafactory-cli of the LLaMA-Factory environment scripts/setup.sh makes")
endif()
set(STUDIO_PYTHON_OK OFF)
set(STUDIO_TORCH_PREFIX "")
if(EXISTS "${STUDIO_PYTHON}")
  execute_process(
    COMMAND "${STUDIO_PYTHON}" -c "import torch, torch.utils; print(torch.utils.cmake_prefix_path)"
    OUTPUT_VARIABLE STUDIO_TORCH_PREFIX OUTPUT_STRIP_TRAILING_WHITESPACE
    RESULT_VARIABLE _torch_rc ERROR_QUIET)
  if(_torch_rc EQUAL 0)
    set(STUDIO_PYTHON_OK ON)
    list(APPEND CMAKE_PREFIX_PATH "${STUDIO_TORCH_PREFIX}")
  else()
    set(STUDIO_TORCH_PREFIX "")
  endif()
endif()
if(NOT STUDIO_PYTHON_OK)
  message(STATUS "SeqStudio: no torch in STUDIO_PYTHON='${STUDIO_PYTHON}': run scripts/setup.sh; "
                 "the tests that compare with Hugging Face references will fail saying so")
endif()

# --- engine: LibTorch ------------------------------------------------------------------------
# The CUDA build of LibTorch needs the CUDA toolkit's CMake discovery (nvcc, cudart, ...).
if(NOT DEFINED CMAKE_CUDA_COMPILER AND NOT DEFINED ENV{CUDACXX} AND EXISTS /usr/local/cuda/bin/nvcc)
  set(CMAKE_CUDA_COMPILER /usr/local/cuda/bin/nvcc)
endif()
if(NOT DEFINED CUDAToolkit_ROOT AND EXISTS /usr/local/cuda)
  set(CUDAToolkit_ROOT /usr/local/cuda)
endif()
# The GPU architectures our CUDA code is compiled for. Captured before Torch's CMake package enables
# CUDA (which caches the compiler's default architecture and then sets CMAKE_CUDA_ARCHITECTURES to
# OFF); applied to our targets below. -DCMAKE_CUDA_ARCHITECTURES=... on the first configure or
# -DSTUDIO_CUDA_ARCHITECTURES=... at any time picks others.
if(NOT DEFINED STUDIO_CUDA_ARCHITECTURES)
  if(DEFINED CMAKE_CUDA_ARCHITECTURES)
    set(_arch "${CMAKE_CUDA_ARCHITECTURES}")
  else()
    set(_arch 90a)  # H100/H200
  endif()
  set(STUDIO_CUDA_ARCHITECTURES "${_arch}" CACHE STRING "CUDA architectures of the engine's kernels")
endif()
if(NOT DEFINED TORCH_CUDA_ARCH_LIST AND NOT DEFINED ENV{TORCH_CUDA_ARCH_LIST})
  set(TORCH_CUDA_ARCH_LIST "9.0a")  # H100/H200, as CMAKE_CUDA_ARCHITECTURES below
endif()
find_package(Torch QUIET)
if(NOT DEFINED STUDIO_BUILD_ENGINE)
  set(_engine_default ${Torch_FOUND})
else()
  set(_engine_default ${STUDIO_BUILD_ENGINE})
endif()
option(STUDIO_BUILD_ENGINE "Build the training engine (studio-train); needs LibTorch" ${_engine_default})
if(STUDIO_BUILD_ENGINE AND NOT Torch_FOUND)
  message(FATAL_ERROR "STUDIO_BUILD_ENGINE is ON but LibTorch was not found: run scripts/setup.sh "
                      "(the torch wheel in STUDIO_PYTHON's environment) or point CMAKE_PREFIX_PATH at a LibTorch, or pass -DSTUDIO_BUILD_ENGINE=OFF")
endif()
# The torch wheel's libtorch.so carries (and exports) a static copy of the toolchain's
# std::filesystem (64 symbols: remove_all, copy, status, ...) that crashes when called from our
# code (remove_all jumps to a null pointer). The dynamic linker binds a symbol to the first library
# in load order that defines it, and libtorch.so comes before libstdc++.so.6 in a normal link; this
# puts libstdc++.so.6 first in every binary that links the engine, so std:: resolves to the system
# library. tst_train_loop's checkpoint rotation and tst_hf_checkpoint catch a regression.
add_library(studio_libstdcxx_first INTERFACE)
target_link_options(studio_libstdcxx_first INTERFACE
  "LINKER:--push-state,--no-as-needed" "-lstdc++" "LINKER:--pop-state")
set(STUDIO_TORCH_CUDA OFF)
if(STUDIO_BUILD_ENGINE AND (TARGET torch_cuda OR TARGET c10_cuda))
  set(STUDIO_TORCH_CUDA ON)
endif()

# --- studio: Qt 6 Widgets, QCustomPlot, libssh ----------------------------------------------
# Core and Test first and on their own: the engine's tests need nothing more, and a machine
# without the OpenGL development files (a GPU node, scripts/gpu-check.sh) must still find them
# when the Gui component cannot be configured there.
find_package(Qt6 QUIET COMPONENTS Core Test)
# PrintSupport: QCustomPlotQt6's imported target links Qt6::PrintSupport without finding it.
# Not looked for at all with -DSTUDIO_BUILD_GUI=OFF.
if(NOT DEFINED STUDIO_BUILD_GUI OR STUDIO_BUILD_GUI)
  find_package(Qt6 QUIET COMPONENTS Gui Widgets PrintSupport Concurrent DBus)
  find_package(QCustomPlotQt6 QUIET)
  find_package(libssh QUIET)
  # libxcb where Qt draws on X11: the studio's windows take the screen's colormap there
  # (ui/shell/include/studio/ui/shell/screen_colormap.h says why).
  find_package(PkgConfig QUIET)
  if(PkgConfig_FOUND)
    pkg_check_modules(XCB QUIET IMPORTED_TARGET xcb)
  endif()
endif()
set(STUDIO_QT_XCB OFF)
if(TARGET Qt6::Gui)
  get_target_property(_qt_gui_features Qt6::Gui QT_ENABLED_PUBLIC_FEATURES)
  if("xcb" IN_LIST _qt_gui_features)
    set(STUDIO_QT_XCB ON)
  endif()
endif()
set(_gui_found OFF)
if(Qt6Widgets_FOUND AND Qt6DBus_FOUND AND QCustomPlotQt6_FOUND AND libssh_FOUND AND
   (NOT STUDIO_QT_XCB OR TARGET PkgConfig::XCB))
  set(_gui_found ON)
endif()
option(STUDIO_BUILD_GUI "Build the desktop studio; needs Qt 6 Widgets, QCustomPlot (Qt 6), libssh and, with Qt on X11, libxcb" ${_gui_found})
if(STUDIO_BUILD_GUI AND NOT _gui_found)
  message(FATAL_ERROR "STUDIO_BUILD_GUI is ON but Qt 6 Widgets or DBus, QCustomPlotQt6, libssh or libxcb is "
                      "missing: run scripts/setup.sh, or pass -DSTUDIO_BUILD_GUI=OFF")
endif()
if(STUDIO_BUILD_GUI)
  set(CMAKE_AUTOMOC ON)
endif()

if(STUDIO_BUILD_TESTS AND NOT Qt6Test_FOUND)
  message(WARNING "Qt 6 Test was not found: tests are not built (install qt6-base-dev)")
  set(STUDIO_BUILD_TESTS OFF)
endif()

# --- CUDA kernel cores: nvcc alone, no LibTorch needed -----------------------------------------
set(STUDIO_CUDA_ENABLED OFF)
if(NOT STUDIO_CUDA STREQUAL "OFF" AND STUDIO_BUILD_ENGINE)
  if(NOT DEFINED CMAKE_CUDA_COMPILER AND NOT DEFINED ENV{CUDACXX} AND EXISTS /usr/local/cuda/bin/nvcc)
    set(CMAKE_CUDA_COMPILER /usr/local/cuda/bin/nvcc)
  endif()
  include(CheckLanguage)
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    set(CMAKE_CUDA_ARCHITECTURES ${STUDIO_CUDA_ARCHITECTURES})
    enable_language(CUDA)
    set(CMAKE_CUDA_STANDARD 17)
    set(CMAKE_CUDA_STANDARD_REQUIRED ON)
    set(STUDIO_CUDA_ENABLED ON)
  elseif(STUDIO_CUDA STREQUAL "ON")
    message(FATAL_ERROR "STUDIO_CUDA is ON but no CUDA compiler (nvcc) was found")
  endif()
endif()
