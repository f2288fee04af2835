# Drives the fuzzers for ctest (tests/CMakeLists.txt, label `fuzz`).
#   -DMODE=build -DSOURCE_DIR=<repo> -DWORK_DIR=<dir>
#       configures tests/fuzz with clang in WORK_DIR/build and builds the targets.
#   -DMODE=run -DSOURCE_DIR=<repo> -DWORK_DIR=<dir>
#              -DTARGET=safetensors|npy|index|config|names|args -DSECONDS=n
#       runs TARGET_fuzzer for SECONDS over the seed corpus and the regression
#       inputs; new inputs go to WORK_DIR/corpus/TARGET (never the source tree),
#       a crash to WORK_DIR/artifacts/, and the test fails naming it.
if(MODE STREQUAL "build")
  find_program(clangxx NAMES clang++ clang++-14)
  find_program(clangc NAMES clang clang-14)
  if(NOT clangxx OR NOT clangc)
    message(FATAL_ERROR "clang++ not found: the fuzz tests build libFuzzer targets with clang. "
                        "Install it with scripts/install-deps (Debian: clang, libclang-rt-14-dev) "
                        "or skip these tests with ctest -LE fuzz.")
  endif()
  foreach(step
      "${CMAKE_COMMAND};-S;${SOURCE_DIR}/tests/fuzz;-B;${WORK_DIR}/build;-DCMAKE_CXX_COMPILER=${clangxx};-DLOWP_SOURCE_DIR=${SOURCE_DIR}"
      "${CMAKE_COMMAND};--build;${WORK_DIR}/build;-j2")
    execute_process(COMMAND ${step} RESULT_VARIABLE result OUTPUT_VARIABLE out ERROR_VARIABLE out)
    if(NOT result EQUAL 0)
      message(FATAL_ERROR "fuzz build step failed (${result}): ${step}\n${out}")
    endif()
  endforeach()
elseif(MODE STREQUAL "run")
  set(fuzzer "${WORK_DIR}/build/${TARGET}_fuzzer")
  if(NOT EXISTS "${fuzzer}")
    message(FATAL_ERROR "${fuzzer} is missing: the fuzz.build test builds it")
  endif()
  set(scratch "${WORK_DIR}/corpus/${TARGET}")
  file(MAKE_DIRECTORY "${scratch}" "${WORK_DIR}/artifacts")
  set(seeds "${SOURCE_DIR}/tests/fuzz/corpus/${TARGET}")
  set(regressions "${SOURCE_DIR}/tests/fuzz/regressions/${TARGET}")
  set(dirs "${scratch}" "${seeds}")
  if(EXISTS "${regressions}")
    list(APPEND dirs "${regressions}")
  endif()
  execute_process(
    COMMAND "${fuzzer}" -max_total_time=${SECONDS} -timeout=10 -rss_limit_mb=2048
            -max_len=16384 -print_final_stats=1 -dict=${SOURCE_DIR}/tests/fuzz/${TARGET}.dict
            -artifact_prefix=${WORK_DIR}/artifacts/${TARGET}- ${dirs}
    RESULT_VARIABLE result OUTPUT_VARIABLE out ERROR_VARIABLE out)
  string(LENGTH "${out}" length)
  if(length GREATER 12000)
    math(EXPR start "${length} - 12000")
    string(SUBSTRING "${out}" ${start} -1 out)
  endif()
  if(NOT result EQUAL 0)
    message(FATAL_ERROR "${TARGET}_fuzzer failed (${result}); the crashing input is in "
                        "${WORK_DIR}/artifacts/ (add it to tests/fuzz/regressions/${TARGET}/ "
                        "once fixed):\n${out}")
  endif()
  message(STATUS "${out}")
else()
  message(FATAL_ERROR "MODE must be build or run")
endif()
