# Tests of mock_coordinator: unit tests of its modules (no network), and
# end-to-end runs of the real executable against in-test learners (and
# against mock_learner, when that target exists).
if(TARGET mock_coordinator_core)
  dl_unit_test(test_mock_coordinator
    SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_mock_coordinator.c
    LIBS mock_coordinator_core
    LABELS mock_coordinator
    TIMEOUT 60)
  dl_unit_test(test_mock_coordinator_e2e
    SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_mock_coordinator_e2e.c
    LABELS "mock_coordinator;e2e"
    TIMEOUT 240)
  target_compile_definitions(test_mock_coordinator_e2e PRIVATE MC_BIN="$<TARGET_FILE:mock_coordinator>")
  add_dependencies(test_mock_coordinator_e2e mock_coordinator)
  if(TARGET mock_learner)
    target_compile_definitions(test_mock_coordinator_e2e PRIVATE MOCK_LEARNER_BIN="$<TARGET_FILE:mock_learner>")
    add_dependencies(test_mock_coordinator_e2e mock_learner)
  endif()
endif()
