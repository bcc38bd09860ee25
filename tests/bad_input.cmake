# Hostile input against every endpoint of the real aggregator and mocks
# (raw TCP: malformed JSON, wrong types, missing fields, over-limit and
# truncated bodies, dribbled heads, bad Token and Channel, unknown paths and
# methods, protocol state), each followed by a liveness check; and the
# request-head deadline of hs. Prints "bad-input cases: N".
if(TARGET aggregator AND TARGET mock_learner AND TARGET mock_coordinator AND TARGET mock_operator)
  find_package(Threads REQUIRED)
  dl_unit_test(test_bad_input SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_bad_input.c
               LIBS testproc testutil Threads::Threads LABELS "e2e;security" TIMEOUT 120)
  target_compile_definitions(test_bad_input PRIVATE
    AGGREGATOR_BIN="$<TARGET_FILE:aggregator>"
    MOCK_LEARNER_BIN="$<TARGET_FILE:mock_learner>"
    MOCK_COORDINATOR_BIN="$<TARGET_FILE:mock_coordinator>"
    MOCK_OPERATOR_BIN="$<TARGET_FILE:mock_operator>")
  add_dependencies(test_bad_input aggregator mock_learner mock_coordinator mock_operator)
endif()
