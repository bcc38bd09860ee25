# The aggregator: unit tests of its modules and end-to-end runs of the real
# process with mock_learner and mock_coordinator processes.
add_library(testproc STATIC ${CMAKE_CURRENT_LIST_DIR}/proc.c)
target_link_libraries(testproc PUBLIC interaction)
target_include_directories(testproc PUBLIC ${CMAKE_CURRENT_LIST_DIR})
if(TARGET aggregator AND TARGET mock_learner AND TARGET mock_coordinator)
  dl_unit_test(test_aggregator_e2e SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_aggregator_e2e.c
               LIBS testproc testutil LABELS "aggregator;e2e" TIMEOUT 300)
  target_compile_definitions(test_aggregator_e2e PRIVATE
    AGGREGATOR_BIN="$<TARGET_FILE:aggregator>"
    MOCK_LEARNER_BIN="$<TARGET_FILE:mock_learner>"
    MOCK_COORDINATOR_BIN="$<TARGET_FILE:mock_coordinator>")
  add_dependencies(test_aggregator_e2e aggregator mock_learner mock_coordinator)
  if(TARGET mock_operator)
    target_compile_definitions(test_aggregator_e2e PRIVATE MOCK_OPERATOR_BIN="$<TARGET_FILE:mock_operator>")
    add_dependencies(test_aggregator_e2e mock_operator)
  endif()
  # The /metrics text through `promtool check metrics` (Debian package
  # prometheus); skipped (77) where promtool is not installed.
  dl_unit_test(test_agg_promtool SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_aggregator_e2e.c
               LIBS testproc testutil LABELS "aggregator;e2e" TIMEOUT 120)
  target_compile_definitions(test_agg_promtool PRIVATE AGG_E2E_PROMTOOL=1
    AGGREGATOR_BIN="$<TARGET_FILE:aggregator>"
    MOCK_LEARNER_BIN="$<TARGET_FILE:mock_learner>"
    MOCK_COORDINATOR_BIN="$<TARGET_FILE:mock_coordinator>")
  set_tests_properties(test_agg_promtool PROPERTIES SKIP_RETURN_CODE 77)
  add_dependencies(test_agg_promtool aggregator mock_learner mock_coordinator)
endif()
if(TARGET agg_core)
  dl_unit_test(test_agg_config SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_agg_config.c LIBS agg_core LABELS aggregator)
endif()
# The aggregator's HTTP client against hostile peers (tests/hostile.h), in
# two ctest entries so that ctest -j runs them side by side.
if(TARGET aggregator)
  add_executable(test_hostile_peers ${CMAKE_CURRENT_LIST_DIR}/test_hostile_peers.c)
  target_link_libraries(test_hostile_peers PRIVATE testproc testutil interaction PkgConfig::CMOCKA)
  target_compile_definitions(test_hostile_peers PRIVATE AGGREGATOR_BIN="$<TARGET_FILE:aggregator>")
  add_dependencies(test_hostile_peers aggregator)
  if(SANITIZE STREQUAL "address")
    target_compile_definitions(test_hostile_peers PRIVATE RSS_CAP_MIB=1024)
  endif()
  foreach(group connect learners)
    add_test(NAME test_hostile_peers_${group} COMMAND test_hostile_peers ${group})
    set_tests_properties(test_hostile_peers_${group} PROPERTIES TIMEOUT 120 LABELS "unit;aggregator;e2e")
  endforeach()
endif()
