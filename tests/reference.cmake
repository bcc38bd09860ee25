# DI-engine's own aggregator through reference/di_aggregator.py (needs a
# DI-engine checkout in DI_ROOT at test time; skipped otherwise).
if(TARGET mock_learner AND TARGET mock_coordinator)
  add_test(NAME test_reference_launcher
           COMMAND sh ${CMAKE_CURRENT_LIST_DIR}/test_reference_launcher.sh ${CMAKE_BINARY_DIR} ${CMAKE_SOURCE_DIR}
                   ${CMAKE_BINARY_DIR}/reference-tests/launcher)
  set_tests_properties(test_reference_launcher PROPERTIES TIMEOUT 120 SKIP_RETURN_CODE 77 LABELS "reference;e2e")
endif()

# DI-engine's own Python master and slave (Flask and requests), loaded from
# DI_ROOT at test time by tests/test_di_interop.py: its test_learner_aggregator
# sequence against our aggregator, its master driving mock_learner, and
# mock_coordinator driving its slave. Skipped without DI_ROOT or the modules.
if(TARGET aggregator AND TARGET mock_learner AND TARGET mock_coordinator)
  foreach(check aggregator master slave)
    add_test(NAME test_di_interop_${check}
             COMMAND /usr/bin/python3 ${CMAKE_CURRENT_LIST_DIR}/test_di_interop.py ${CMAKE_BINARY_DIR} ${check})
    set_tests_properties(test_di_interop_${check} PROPERTIES TIMEOUT 120 SKIP_RETURN_CODE 77 LABELS "reference;e2e")
  endforeach()
endif()
