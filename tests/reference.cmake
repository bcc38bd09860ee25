# DI-engine's own aggregator through reference/di_aggregator.py (needs a
# DI-engine checkout in DI_ROOT at test time; skipped otherwise).
if(TARGET mock_learner AND TARGET mock_coordinator)
  add_test(NAME test_reference_launcher
           COMMAND sh ${CMAKE_CURRENT_LIST_DIR}/test_reference_launcher.sh ${CMAKE_BINARY_DIR} ${CMAKE_SOURCE_DIR}
                   ${CMAKE_BINARY_DIR}/reference-tests/launcher)
  set_tests_properties(test_reference_launcher PROPERTIES TIMEOUT 120 SKIP_RETURN_CODE 77 LABELS "reference;e2e")
endif()
