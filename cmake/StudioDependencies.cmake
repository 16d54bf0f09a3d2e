# Finds the packages and decides which parts can be built. The config library needs only yaml-cpp
# and the header-only nlohmann-json; the engine needs LibTorch; the studio needs Qt 6, QCustomPlot
# and libssh. Each part is ON by default where its packages are found.

find_package(yaml-cpp REQUIRED)
find_package(nlohmann_json 3.9 REQUIRED)
find_package(Threads REQUIRED)

# --- engine: LibTorch ------------------------------------------------------------------------
find_package(Torch QUIET)
if(NOT DEFINED STUDIO_BUILD_ENGINE)
  set(_engine_default ${Torch_FOUND})
else()
  set(_engine_default ${STUDIO_BUILD_ENGINE})
endif()
option(STUDIO_BUILD_ENGINE "Build the training engine (studio-train); needs LibTorch" ${_engine_default})
if(STUDIO_BUILD_ENGINE AND NOT Torch_FOUND)
  message(FATAL_ERROR "STUDIO_BUILD_ENGINE is ON but LibTorch was not found: install libtorch-dev "
                      "(scripts/setup.sh) or point CMAKE_PREFIX_PATH at a LibTorch, or pass -DSTUDIO_BUILD_ENGINE=OFF")
endif()
set(STUDIO_TORCH_CUDA OFF)
if(STUDIO_BUILD_ENGINE AND (TARGET torch_cuda OR TARGET c10_cuda))
  set(STUDIO_TORCH_CUDA ON)
endif()

# --- studio: Qt 6 Widgets, QCustomPlot, libssh ----------------------------------------------
# PrintSupport: QCustomPlotQt6's imported target links Qt6::PrintSupport without finding it.
find_package(Qt6 QUIET COMPONENTS Core Gui Widgets PrintSupport Concurrent Test)
find_package(QCustomPlotQt6 QUIET)
find_package(libssh QUIET)
set(_gui_found OFF)
if(Qt6Widgets_FOUND AND QCustomPlotQt6_FOUND AND libssh_FOUND)
  set(_gui_found ON)
endif()
option(STUDIO_BUILD_GUI "Build the desktop studio; needs Qt 6 Widgets, QCustomPlot (Qt 6) and libssh" ${_gui_found})
if(STUDIO_BUILD_GUI AND NOT _gui_found)
  message(FATAL_ERROR "STUDIO_BUILD_GUI is ON but Qt 6 Widgets, QCustomPlotQt6 or libssh is missing: "
                      "run scripts/setup.sh, or pass -DSTUDIO_BUILD_GUI=OFF")
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
    if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
      set(CMAKE_CUDA_ARCHITECTURES 90a)  # H100/H200; override with -DCMAKE_CUDA_ARCHITECTURES=...
    endif()
    enable_language(CUDA)
    set(CMAKE_CUDA_STANDARD 17)
    set(CMAKE_CUDA_STANDARD_REQUIRED ON)
    set(STUDIO_CUDA_ENABLED ON)
  elseif(STUDIO_CUDA STREQUAL "ON")
    message(FATAL_ERROR "STUDIO_CUDA is ON but no CUDA compiler (nvcc) was found")
  endif()
endif()
