# Aggregator profiles and real learners in a scenario (runner/sc_profile.h,
# docs/scenarios.md): ours through a metrics-free profile, skipped checks,
# readiness by port, invalid profiles, a learner given by command; and
# DI-engine's aggregator through profiles/di-engine.json (skipped without
# DI_ROOT).
if(TARGET run_scenarios)
  add_test(NAME test_profile
           COMMAND sh ${CMAKE_CURRENT_LIST_DIR}/test_profile.sh $<TARGET_FILE:run_scenarios> ${CMAKE_SOURCE_DIR}
                   ${CMAKE_BINARY_DIR}/runner-tests/profile)
  set_tests_properties(test_profile PROPERTIES TIMEOUT 240 LABELS "runner;e2e")
  add_test(NAME test_profile_di_engine
           COMMAND sh ${CMAKE_CURRENT_LIST_DIR}/test_profile_di_engine.sh $<TARGET_FILE:run_scenarios>
                   ${CMAKE_SOURCE_DIR} ${CMAKE_BINARY_DIR}/reference-tests/profile)
  set_tests_properties(test_profile_di_engine PROPERTIES TIMEOUT 180 SKIP_RETURN_CODE 77 LABELS "reference;e2e")
endif()
