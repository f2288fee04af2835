# Drives the sanitized build for ctest (tests/CMakeLists.txt, label `sanitize`).
#   -DMODE=build -DSOURCE_DIR=<repo> -DWORK_DIR=<dir> [-DPYTHON=ON|OFF -DPython_EXECUTABLE=...]
#       configures the whole project with clang and -DLOWP_SANITIZE=ON
#       (AddressSanitizer + UndefinedBehaviorSanitizer; Highway targets AVX2
#       and scalar) in WORK_DIR, without the benchmarks, and builds it.
#   -DMODE=run -DWORK_DIR=<dir> -DEXCLUDE=<label regex>
#       runs that build's tests but those labelled EXCLUDE; ASAN_OPTIONS and
#       UBSAN_OPTIONS come from the test's environment. Any report fails its
#       test (-fno-sanitize-recover=all, halt_on_error=1), and so this one.
# clang, not g++ 12: g++ took 7 min 17 s of CPU for the two kernel sources
# sanitized even with two targets, clang 43 s.
cmake_host_system_information(RESULT jobs QUERY NUMBER_OF_LOGICAL_CORES)
if(MODE STREQUAL "build")
  find_program(clangxx NAMES clang++ clang++-14)
  if(NOT clangxx)
    message(FATAL_ERROR "clang++ not found: the sanitize tests build with clang. Install it "
                        "with scripts/install-deps (Debian: clang, libclang-rt-14-dev) or "
                        "skip these tests with ctest -LE sanitize.")
  endif()
  set(configure ${CMAKE_COMMAND} -S ${SOURCE_DIR} -B ${WORK_DIR} -DCMAKE_BUILD_TYPE=Release
      -DCMAKE_CXX_COMPILER=${clangxx} -DLOWP_SANITIZE=ON -DLOWP_BUILD_BENCH=OFF
      -DLOWP_BUILD_PYTHON=${PYTHON})
  if(Python_EXECUTABLE)
    list(APPEND configure -DPython_EXECUTABLE=${Python_EXECUTABLE})
  endif()
  foreach(step "${configure}" "${CMAKE_COMMAND};--build;${WORK_DIR};-j${jobs}")
    execute_process(COMMAND ${step} RESULT_VARIABLE result OUTPUT_VARIABLE out ERROR_VARIABLE out)
    if(NOT result EQUAL 0)
      message(FATAL_ERROR "sanitized build step failed (${result}): ${step}\n${out}")
    endif()
  endforeach()
elseif(MODE STREQUAL "run")
  if(NOT EXISTS "${WORK_DIR}/CTestTestfile.cmake")
    message(FATAL_ERROR "${WORK_DIR} has no tests: the sanitize.build test builds them")
  endif()
  execute_process(
    COMMAND ${CMAKE_CTEST_COMMAND} --test-dir ${WORK_DIR} -LE "${EXCLUDE}" -j${jobs}
            --output-on-failure --no-tests=error
    RESULT_VARIABLE result OUTPUT_VARIABLE out ERROR_VARIABLE out)
  if(NOT result EQUAL 0)
    message(FATAL_ERROR "sanitized tests failed (${result}); the reports are above each "
                        "failed test, rerun one with ctest --test-dir ${WORK_DIR} -R NAME "
                        "--output-on-failure:\n${out}")
  endif()
  string(LENGTH "${out}" length)
  if(length GREATER 3000)  # the summary
    math(EXPR start "${length} - 3000")
    string(SUBSTRING "${out}" ${start} -1 out)
  endif()
  message(STATUS "${out}")
else()
  message(FATAL_ERROR "MODE must be build or run")
endif()
