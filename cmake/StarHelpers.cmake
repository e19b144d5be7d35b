# star_gtest_executable(NAME SOURCES... LIBS lib...): a GoogleTest executable, with the
# test helpers every test may use (tests/support: star/test_support/*.h) and a stack trace
# on a crash (tests/support/crash_trace.cc; its symbols exported so the trace names them).
function(star_gtest_executable name)
  cmake_parse_arguments(ARG "" "" "SOURCES;LIBS" ${ARGN})
  if(NOT TARGET star_crash_trace)
    add_library(star_crash_trace OBJECT ${PROJECT_SOURCE_DIR}/tests/support/crash_trace.cc)
    target_link_libraries(star_crash_trace PRIVATE star::warnings)
  endif()
  add_executable(${name} ${ARG_SOURCES})
  target_link_libraries(${name} PRIVATE ${ARG_LIBS} star_crash_trace GTest::gtest GTest::gtest_main
                                        star::warnings)
  target_include_directories(${name} PRIVATE ${PROJECT_SOURCE_DIR}/tests/support)
  set_target_properties(${name} PROPERTIES ENABLE_EXPORTS ON)
endfunction()

# star_add_test(NAME SOURCES... LABELS l1 [l2] LIBS lib... [SERIAL])
# SERIAL: its tests run alone (they load every core or measure contention).
# One GoogleTest executable per test file; its cases are registered with ctest and
# labelled by component so `ctest -L core` runs one component's tests.
function(star_add_test name)
  cmake_parse_arguments(ARG "SERIAL" "" "SOURCES;LABELS;LIBS" ${ARGN})
  if(NOT STAR_BUILD_TESTS)
    return()
  endif()
  star_gtest_executable(${name} SOURCES ${ARG_SOURCES} LIBS ${ARG_LIBS})
  gtest_discover_tests(${name} DISCOVERY_TIMEOUT 60)
  # Labels are set after discovery: gtest_discover_tests's PROPERTIES flattens a list
  # ("LABELS shim e2e" would set only "shim"). CTest includes this file after the
  # discovered tests, whose names are in ${name}_TESTS.
  set(_labels_file ${CMAKE_CURRENT_BINARY_DIR}/${name}_labels.cmake)
  set(_serial "")
  if(ARG_SERIAL)
    set(_serial " RUN_SERIAL TRUE")
  endif()
  file(WRITE ${_labels_file}
    "if(DEFINED ${name}_TESTS)\n"
    "  set_tests_properties(\${${name}_TESTS} PROPERTIES LABELS \"${ARG_LABELS}\"${_serial})\n"
    "endif()\n")
  set_property(DIRECTORY APPEND PROPERTY TEST_INCLUDE_FILES ${_labels_file})
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

# star_module(TARGET name DIR src-dir INCLUDE include-dir LABEL labels...
#             [DEPS targets...] [PRIVATE_DEPS targets...] [TEST_LIBS targets...])
# A static library of every DIR/*.cc that is not a test, one test executable of every
# DIR/*_test.cc (labelled LABEL), and one of every DIR/*_k8s_test.cc, run on the real
# cluster (TARGET_k8s_test, star_k8s_gtest). Sources are globbed, so a new file needs no
# edit.
function(star_module)
  cmake_parse_arguments(ARG "" "TARGET;DIR;INCLUDE" "LABEL;DEPS;PRIVATE_DEPS;TEST_LIBS" ${ARGN})
  file(GLOB _all CONFIGURE_DEPENDS ${ARG_DIR}/*.cc)
  file(GLOB _tests CONFIGURE_DEPENDS ${ARG_DIR}/*_test.cc)
  file(GLOB _k8s_tests CONFIGURE_DEPENDS ${ARG_DIR}/*_k8s_test.cc)
  set(_srcs ${_all})
  if(_tests)
    list(REMOVE_ITEM _srcs ${_tests})
  endif()
  if(_k8s_tests)
    list(REMOVE_ITEM _tests ${_k8s_tests})
  endif()
  if(_srcs)
    add_library(${ARG_TARGET} STATIC ${_srcs})
    target_include_directories(${ARG_TARGET} PUBLIC ${ARG_INCLUDE} PRIVATE ${ARG_DIR}/..)
    target_link_libraries(${ARG_TARGET} PUBLIC ${ARG_DEPS} PRIVATE ${ARG_PRIVATE_DEPS} star::warnings)
    set_target_properties(${ARG_TARGET} PROPERTIES POSITION_INDEPENDENT_CODE ON)
  else()
    add_library(${ARG_TARGET} INTERFACE)
    target_include_directories(${ARG_TARGET} INTERFACE ${ARG_INCLUDE})
    target_link_libraries(${ARG_TARGET} INTERFACE ${ARG_DEPS})
  endif()
  if(_tests AND STAR_BUILD_TESTS)
    star_add_test(${ARG_TARGET}_test SOURCES ${_tests} LABELS ${ARG_LABEL}
                  LIBS ${ARG_TARGET} ${ARG_PRIVATE_DEPS} ${ARG_TEST_LIBS})
    target_include_directories(${ARG_TARGET}_test PRIVATE ${ARG_DIR}/..)
  endif()
  if(_k8s_tests AND STAR_BUILD_TESTS)
    star_k8s_gtest(${ARG_TARGET}_k8s_test SOURCES ${_k8s_tests} LABELS ${ARG_LABEL}
                   LIBS ${ARG_TARGET} ${ARG_PRIVATE_DEPS} ${ARG_TEST_LIBS})
    target_include_directories(${ARG_TARGET}_k8s_test PRIVATE ${ARG_DIR}/..)
  endif()
endfunction()

# The environment every test on the real cluster gets (tests/k8s starts the cluster).
set(STAR_K8S_TEST_ENV
    KUBECONFIG=${STAR_K8S_CLUSTER_DIR}/kubeconfig
    STAR_KUBECTL=${STAR_K8S_BIN}/kubectl
    STAR_HELM=${STAR_K8S_BIN}/helm
    STAR_SOURCE_DIR=${PROJECT_SOURCE_DIR}
    STAR_CLUSTER_DIR=${STAR_K8S_CLUSTER_DIR}
    CACHE INTERNAL "environment of the k8s tests")

# star_k8s_test(NAME COMMAND... [LABELS l...] [ENV k=v...] [LOCK] [SERIAL] [TIMEOUT s]): a
# test on the k8s_cluster fixture's real cluster (tests/k8s), labelled k8s; registered only
# where that cluster can run (STAR_K8S_TESTS). LOCK serializes the tests that run an
# operator (they share the test node's NodeAllocation); SERIAL runs the test alone (an
# operator that watches every namespace would take other tests' TrainingJobs).
function(star_k8s_test name)
  cmake_parse_arguments(ARG "LOCK;SERIAL" "TIMEOUT" "COMMAND;LABELS;ENV" ${ARGN})
  if(NOT STAR_K8S_TESTS)
    return()
  endif()
  if(NOT ARG_TIMEOUT)
    set(ARG_TIMEOUT 600)
  endif()
  add_test(NAME ${name} COMMAND ${ARG_COMMAND})
  set_tests_properties(${name} PROPERTIES FIXTURES_REQUIRED k8s_cluster LABELS "k8s;${ARG_LABELS}"
                       TIMEOUT ${ARG_TIMEOUT} ENVIRONMENT "${STAR_K8S_TEST_ENV};${ARG_ENV}")
  if(ARG_LOCK)
    set_tests_properties(${name} PROPERTIES RESOURCE_LOCK star_k8s_node_allocation)
  endif()
  if(ARG_SERIAL)
    set_tests_properties(${name} PROPERTIES RUN_SERIAL TRUE)
  endif()
endfunction()

# star_k8s_gtest(NAME SOURCES... LABELS l... LIBS lib... [LOCK] [TIMEOUT s]): a GoogleTest
# executable of tests on the real cluster, run whole as one star_k8s_test (so that the
# fixture applies to every case; gtest_discover_tests would register each case alone).
function(star_k8s_gtest name)
  cmake_parse_arguments(ARG "LOCK" "TIMEOUT" "SOURCES;LABELS;LIBS" ${ARGN})
  if(NOT STAR_BUILD_TESTS)
    return()
  endif()
  star_gtest_executable(${name} SOURCES ${ARG_SOURCES} LIBS ${ARG_LIBS})
  if(NOT ARG_TIMEOUT)
    set(ARG_TIMEOUT 600)
  endif()
  set(_lock "")
  if(ARG_LOCK)
    set(_lock LOCK)
  endif()
  star_k8s_test(${name} ${_lock} LABELS ${ARG_LABELS} TIMEOUT ${ARG_TIMEOUT} COMMAND $<TARGET_FILE:${name}>)
endfunction()

# star_go_test(NAME LABELS l...): `go test ./...` of the Go module in the calling
# directory (a Go test tool's own tests); not registered where go is missing.
function(star_go_test name)
  cmake_parse_arguments(ARG "" "" "LABELS" ${ARGN})
  find_program(STAR_GO go PATHS /usr/local/go/bin)
  if(NOT STAR_GO)
    message(STATUS "${CMAKE_CURRENT_SOURCE_DIR}: no go, ${name} not registered")
    return()
  endif()
  add_test(NAME ${name} COMMAND ${STAR_GO} test -count=1 ./... WORKING_DIRECTORY ${CMAKE_CURRENT_SOURCE_DIR})
  set_tests_properties(${name} PROPERTIES LABELS "${ARG_LABELS}" TIMEOUT 300 ENVIRONMENT "GOFLAGS=-mod=mod")
endfunction()
