# star_add_test(NAME SOURCES... LABELS l1 [l2] LIBS lib...)
# One GoogleTest executable per test file; its cases are registered with ctest and
# labelled by component so `ctest -L core` runs one component's tests.
function(star_add_test name)
  cmake_parse_arguments(ARG "" "" "SOURCES;LABELS;LIBS" ${ARGN})
  if(NOT STAR_BUILD_TESTS)
    return()
  endif()
  add_executable(${name} ${ARG_SOURCES})
  target_link_libraries(${name} PRIVATE ${ARG_LIBS} GTest::gtest GTest::gtest_main star::warnings)
  gtest_discover_tests(${name}
    PROPERTIES LABELS "${ARG_LABELS}"
    DISCOVERY_TIMEOUT 60)
endfunction()

# star_add_bench(NAME SOURCES... LIBS lib...)
function(star_add_bench name)
  cmake_parse_arguments(ARG "" "" "SOURCES;LIBS" ${ARGN})
  if(NOT STAR_BUILD_BENCH)
    return()
  endif()
  add_executable(${name} ${ARG_SOURCES})
  target_link_libraries(${name} PRIVATE ${ARG_LIBS} benchmark::benchmark star::warnings)
endfunction()
