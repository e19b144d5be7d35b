# Runs one fuzz target (the ctest test fuzz.<name>):
#   cmake -DFUZZER=bin -DSEEDS=dir -DWORK=dir [-DDICT=file] -DSECONDS=n -P run_fuzzer.cmake
# for SECONDS over a fresh copy of the seed corpus in WORK/corpus (new inputs land there,
# never in the committed corpus). Reproducers of crashes, timeouts, leaks and sanitizer
# reports go to WORK/artifacts/, and libFuzzer's non-zero exit fails the test. The whole
# log is WORK/fuzz.log; the final stats (executions included) are printed.
foreach(_v FUZZER SEEDS WORK SECONDS)
  if(NOT DEFINED ${_v})
    message(FATAL_ERROR "run_fuzzer.cmake: -D${_v}= is required")
  endif()
endforeach()

file(REMOVE_RECURSE ${WORK})
file(MAKE_DIRECTORY ${WORK}/corpus ${WORK}/artifacts)
file(GLOB _seeds ${SEEDS}/*)
list(LENGTH _seeds _nseeds)
if(_seeds)
  file(COPY ${_seeds} DESTINATION ${WORK}/corpus)
endif()

set(_args -max_total_time=${SECONDS} -timeout=10 -rss_limit_mb=2048 -print_final_stats=1
          -artifact_prefix=${WORK}/artifacts/)
if(DICT)
  list(APPEND _args -dict=${DICT})
endif()
# UBSan must stop at the first report (the code is also built with -fno-sanitize-recover).
if(NOT DEFINED ENV{UBSAN_OPTIONS})
  set(ENV{UBSAN_OPTIONS} "print_stacktrace=1:halt_on_error=1")
endif()

execute_process(COMMAND ${FUZZER} ${_args} ${WORK}/corpus
                RESULT_VARIABLE _rc OUTPUT_VARIABLE _log ERROR_VARIABLE _log)
file(WRITE ${WORK}/fuzz.log "${_log}")

string(REGEX MATCH "stat::number_of_executed_units: *([0-9]+)" _m "${_log}")
set(_execs "${CMAKE_MATCH_1}")
file(GLOB _corpus ${WORK}/corpus/*)
list(LENGTH _corpus _ncorpus)
get_filename_component(_name ${FUZZER} NAME)
if(NOT _rc EQUAL 0)
  # The tail holds the sanitizer report, the stack and the reproducer's file name.
  string(LENGTH "${_log}" _len)
  set(_tail "${_log}")
  if(_len GREATER 20000)
    math(EXPR _from "${_len} - 20000")
    string(SUBSTRING "${_log}" ${_from} -1 _tail)
  endif()
  message("${_tail}")
  file(GLOB _artifacts ${WORK}/artifacts/*)
  message(FATAL_ERROR "${_name}: libFuzzer exited with ${_rc} after ${_execs} executions; "
                      "reproducer(s): ${_artifacts}; reproduce with: ${FUZZER} <file>")
endif()
string(REGEX MATCHALL "stat::[a-z_]+: *[0-9]+" _stats "${_log}")
string(REPLACE ";" "\n" _stats "${_stats}")
message("${_stats}")
message("${_name}: ${_execs} executions in ${SECONDS} s, corpus ${_nseeds} seeds -> ${_ncorpus} files, no findings")
