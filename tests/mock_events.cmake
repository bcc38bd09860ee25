# The mocks' events (docs/events.md), end to end with the real executables.
if(TARGET mock_learner AND TARGET mock_coordinator AND TARGET mock_operator)
  dl_unit_test(test_mock_events SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_mock_events.c LIBS testproc testutil
               TIMEOUT 120 LABELS e2e)
  target_compile_definitions(test_mock_events PRIVATE MOCK_LEARNER_PATH="$<TARGET_FILE:mock_learner>"
                             MOCK_COORDINATOR_PATH="$<TARGET_FILE:mock_coordinator>"
                             MOCK_OPERATOR_PATH="$<TARGET_FILE:mock_operator>")
  add_dependencies(test_mock_events mock_learner mock_coordinator mock_operator)
endif()
