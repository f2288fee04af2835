# Runs one notebook from a clean kernel in WORK_DIR (a copy, so the checkout
# is not written) and fails on any error in any cell.
#   cmake -DNOTEBOOK=path.ipynb -DWORK_DIR=dir -DPython_EXECUTABLE=python -P run_notebook.cmake
get_filename_component(name ${NOTEBOOK} NAME)
file(MAKE_DIRECTORY ${WORK_DIR}/figures)
file(COPY ${NOTEBOOK} DESTINATION ${WORK_DIR})
execute_process(
  COMMAND ${Python_EXECUTABLE} -m nbconvert --to notebook --execute --inplace
          --ExecutePreprocessor.timeout=600 --ExecutePreprocessor.kernel_name=python3
          ${WORK_DIR}/${name}
  WORKING_DIRECTORY ${WORK_DIR}
  RESULT_VARIABLE result)
if(NOT result EQUAL 0)
  message(FATAL_ERROR "${name} failed (nbconvert exit ${result})")
endif()
