# star.torch's tests (label python), included by CMakeLists.txt when STAR_BUILD_TESTS.
# Every tests/test_*.py file is one ctest per torch:
#   python_<name>          pytest on Python_EXECUTABLE (/usr/bin/python3: Debian's torch 1.13)
#   python_torch2_<name>   pytest on STAR_TORCH2_PYTHON (PyTorch 2.x; scripts/torch-venv.sh)
# and python_pip_install (labels python, slow) builds and installs the package with pip
# on STAR_TORCH2_PYTHON, then trains with it (tests/packaging/pip_install_test.sh).
set(STAR_TORCH2_PYTHON "" CACHE FILEPATH
    "a python with PyTorch 2.x and pytest: star.torch's tests also run on it (scripts/torch-venv.sh)")

set(_env "PYTHONPATH=${_out}")
if(STAR_SANITIZE)
  # The instrumented module in an uninstrumented interpreter: the runtimes go first;
  # the interpreter's own allocations are not ours to leak-check.
  execute_process(COMMAND ${CMAKE_CXX_COMPILER} -print-file-name=libasan.so
                  OUTPUT_VARIABLE _asan OUTPUT_STRIP_TRAILING_WHITESPACE)
  execute_process(COMMAND ${CMAKE_CXX_COMPILER} -print-file-name=libubsan.so
                  OUTPUT_VARIABLE _ubsan OUTPUT_STRIP_TRAILING_WHITESPACE)
  list(APPEND _env "LD_PRELOAD=${_asan}:${_ubsan}" "ASAN_OPTIONS=detect_leaks=0:abort_on_error=1")
endif()

# The interpreters to run on, as prefix;python pairs. The module is built for
# Python_EXECUTABLE's version: a torch 2 python of another version could not import it.
set(_interpreters "python_;${Python_EXECUTABLE}")
set(_torch2 "")
if(STAR_TORCH2_PYTHON)
  execute_process(COMMAND ${STAR_TORCH2_PYTHON} -c
                    "import sys, torch; print('%d.%d' % sys.version_info[:2], torch.__version__)"
                  OUTPUT_VARIABLE _probe OUTPUT_STRIP_TRAILING_WHITESPACE
                  RESULT_VARIABLE _probe_rc ERROR_QUIET)
  string(REPLACE " " ";" _probe "${_probe}")
  list(LENGTH _probe _probe_len)
  set(_want "${Python_VERSION_MAJOR}.${Python_VERSION_MINOR}")
  if(NOT _probe_rc EQUAL 0 OR NOT _probe_len EQUAL 2)
    message(FATAL_ERROR "STAR_TORCH2_PYTHON=${STAR_TORCH2_PYTHON}: not a python that imports torch")
  endif()
  list(GET _probe 0 _have)
  list(GET _probe 1 _torch_version)
  if(NOT _have STREQUAL _want)
    message(FATAL_ERROR "STAR_TORCH2_PYTHON=${STAR_TORCH2_PYTHON}: Python ${_have}, but star._star "
                        "is built for ${_want} (${Python_EXECUTABLE}); make it from that python")
  endif()
  if(NOT _torch_version MATCHES "^2\\.")
    message(FATAL_ERROR "STAR_TORCH2_PYTHON=${STAR_TORCH2_PYTHON}: torch ${_torch_version}, not 2.x")
  endif()
  set(_torch2 ${STAR_TORCH2_PYTHON})
  list(APPEND _interpreters "python_torch2_;${_torch2}")
  message(STATUS "STAR: star.torch tests also on torch ${_torch_version} (${_torch2})")
else()
  message(STATUS "STAR: star.torch tests on Debian's torch only "
                 "(no STAR_TORCH2_PYTHON; scripts/torch-venv.sh makes one)")
endif()

file(GLOB _tests CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/tests/test_*.py)
while(_interpreters)
  list(POP_FRONT _interpreters _prefix _python)
  foreach(_t ${_tests})
    get_filename_component(_name ${_t} NAME_WE)
    add_test(NAME ${_prefix}${_name}
             COMMAND ${_python} -m pytest -q -p no:cacheprovider ${_t}
             WORKING_DIRECTORY ${CMAKE_CURRENT_SOURCE_DIR}/tests)
    set_tests_properties(${_prefix}${_name} PROPERTIES LABELS python ENVIRONMENT "${_env}" TIMEOUT 300)
  endforeach()
endwhile()

# pip builds the whole shim again (its own build tree), so it runs without sanitizers and
# only where the torch 2 environment has the build backend.
if(_torch2 AND NOT STAR_SANITIZE)
  add_test(NAME python_pip_install
           COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/tests/packaging/pip_install_test.sh
                   ${_torch2} ${CMAKE_CURRENT_SOURCE_DIR} ${CMAKE_CURRENT_BINARY_DIR}/pip-install-test)
  set_tests_properties(python_pip_install PROPERTIES LABELS "python;slow" TIMEOUT 1200 COST 500)
endif()
