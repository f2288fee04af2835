# Installs the build tree into a scratch prefix, then configures, builds and
# runs tests/consumer against it. Run with -DBUILD_DIR=... -DWORK_DIR=...
# [-DCXX=compiler -DFLAGS="compile and link flags"]: the sanitized build's
# libraries need its compiler and -fsanitize to link.
get_filename_component(consumer_dir "${CMAKE_CURRENT_LIST_DIR}" ABSOLUTE)
file(REMOVE_RECURSE "${WORK_DIR}")
set(configure "${CMAKE_COMMAND};-S;${consumer_dir};-B;${WORK_DIR}/build;-DCMAKE_PREFIX_PATH=${WORK_DIR}/prefix")
if(CXX)
  string(APPEND configure ";-DCMAKE_CXX_COMPILER=${CXX}")
endif()
if(FLAGS)
  string(APPEND configure ";-DCMAKE_CXX_FLAGS=${FLAGS};-DCMAKE_EXE_LINKER_FLAGS=${FLAGS}")
endif()
foreach(step
    "${CMAKE_COMMAND};--install;${BUILD_DIR};--prefix;${WORK_DIR}/prefix"
    "${configure}"
    "${CMAKE_COMMAND};--build;${WORK_DIR}/build"
    "${CMAKE_COMMAND};-E;env;LOWP_DATA_DIR=${WORK_DIR}/prefix/share/lowp;${WORK_DIR}/build/consumer")
  execute_process(COMMAND ${step} RESULT_VARIABLE result OUTPUT_VARIABLE out ERROR_VARIABLE out)
  if(NOT result EQUAL 0)
    message(FATAL_ERROR "step failed (${result}): ${step}\n${out}")
  endif()
  set(last "${out}")
endforeach()
# The consumer's own line: the SQNR it measured on the installed checkpoint.
if(DEFINED last)
  string(STRIP "${last}" last)
  message(STATUS "consumer: ${last}")
  if(NOT last MATCHES "SQNR [0-9.]+ dB")
    message(FATAL_ERROR "the consumer printed no SQNR: ${last}")
  endif()
endif()
file(REMOVE_RECURSE "${WORK_DIR}")
