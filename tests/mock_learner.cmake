# mock_learner's end-to-end tests: they run the real executable.
if(TARGET mock_learner)
  dl_unit_test(test_mock_learner SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_mock_learner.c LIBS testutil TIMEOUT 300
               LABELS mock_learner)
  target_compile_definitions(test_mock_learner PRIVATE MOCK_LEARNER_PATH="$<TARGET_FILE:mock_learner>")
  add_dependencies(test_mock_learner mock_learner)
endif()
