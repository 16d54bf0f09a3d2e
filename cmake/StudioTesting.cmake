# studio_add_test(NAME SOURCES src... LIBS lib... [LABELS l...] [TIMEOUT s] [ENV VAR=value...])
# One Qt Test executable per test class, registered with CTest under the same name.
function(studio_add_test name)
  cmake_parse_arguments(T "" "TIMEOUT" "SOURCES;LIBS;LABELS;ENV" ${ARGN})
  add_executable(${name} ${T_SOURCES})
  target_link_libraries(${name} PRIVATE Qt6::Test Qt6::Core studio_warnings ${T_LIBS})
  target_compile_definitions(${name} PRIVATE
    STUDIO_SOURCE_DIR="${PROJECT_SOURCE_DIR}"
    STUDIO_TEST_FIXTURES_DIR="${PROJECT_SOURCE_DIR}/tests/fixtures"
    STUDIO_BINARY_DIR="${PROJECT_BINARY_DIR}"
    # The interpreter of the Python environment with the Hugging Face references (transformers,
    # tokenizers, trl, torch): scripts/setup.sh installs it, StudioDependencies.cmake finds it.
    STUDIO_PYTHON="${STUDIO_PYTHON}")
  set_target_properties(${name} PROPERTIES AUTOMOC ON)
  target_include_directories(${name} PRIVATE ${PROJECT_SOURCE_DIR}/tests/common)
  # Its sources that include LibTorch reuse the trainer's precompiled <torch/torch.h>.
  if(COMMAND studio_reuse_torch_pch AND "studio_trainer" IN_LIST T_LIBS)
    studio_reuse_torch_pch(${name})
  endif()
  add_test(NAME ${name} COMMAND ${name})
  if(NOT T_TIMEOUT)
    set(T_TIMEOUT 300)
  endif()
  # QTEST_FUNCTION_TIMEOUT: Qt Test's watchdog kills any one test function after 300 s by
  # default; the limit is the test's own TIMEOUT instead (on the 2-core AMD machine, under the
  # whole suite, tst_slurm_live's requeue function passed 300 s, the test's 900 s allowing it).
  math(EXPR function_ms "${T_TIMEOUT} * 1000")
  # TORCH_FR_BUFFER_SIZE=0: PyTorch 2.11's flight recorder inserts into a map before taking its
  # lock (FlightRecorder::record), so process groups of several ranks run as threads of one test
  # process (tst_sp_attention, tst_communicator) can crash it when they enqueue at once. A run of
  # the engine has one rank per process, its collectives issued from one thread.
  set_tests_properties(${name} PROPERTIES TIMEOUT ${T_TIMEOUT} LABELS "${T_LABELS}"
                       ENVIRONMENT
                       "QT_QPA_PLATFORM=offscreen;TORCH_FR_BUFFER_SIZE=0;QTEST_FUNCTION_TIMEOUT=${function_ms};${T_ENV}")
endfunction()
