# Runs one fuzzer for ctest (tests/CMakeLists.txt, label `fuzz`):
#   -DSOURCE_DIR=<repo> -DFUZZER=<the sanitized build's TARGET_fuzzer>
#   -DWORK_DIR=<dir> -DTARGET=safetensors|npy|... -DSECONDS=n
# runs FUZZER for SECONDS over the seed corpus and the regression inputs; new
# inputs go to WORK_DIR/corpus/TARGET (never the source tree), a crash to
# WORK_DIR/artifacts/, and the test fails naming it.
if(NOT EXISTS "${FUZZER}")
  message(FATAL_ERROR "${FUZZER} is missing: the sanitize.build test builds it (with clang)")
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
  COMMAND "${FUZZER}" -max_total_time=${SECONDS} -timeout=10 -rss_limit_mb=2048
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
