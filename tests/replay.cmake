# scenario_from_events (runner/sfe.h): units on hand-written events files.
if(TARGET sfe_core AND TARGET runner_core)
  dl_unit_test(test_sfe SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_sfe.c LIBS sfe_core runner_core LABELS runner TIMEOUT 60)
  target_compile_definitions(test_sfe PRIVATE SFE_DIR="${CMAKE_CURRENT_LIST_DIR}/sfe")
endif()

# The round trip: run, events file to scenario, replay, same outcomes; for
# the crash, hang, heartbeat loss, slow join, operator error, restart and
# return scenarios of the library, and an incident written by hand.
# Not in sanitizer builds: the source runs' timings (170 ms heartbeat
# tolerances) are too tight for instrumented processes on a loaded machine,
# and a spurious loss in a source run is faithfully replayed as a fault
# (test_sfe covers the converter there).
if(TARGET scenario_from_events AND TARGET run_scenarios AND SANITIZE STREQUAL "")
  set(DL_RT_SCENARIOS crash_learn crash_start hang_past_deadline heartbeat_loss slow_join_past operator_down
      restart_learner learner_returns coordinator_gone sigterm_mid_task)
  set(DL_RT_FILES ${CMAKE_CURRENT_LIST_DIR}/replay/incident_oom.json)
  foreach(n ${DL_RT_SCENARIOS})
    list(APPEND DL_RT_FILES ${CMAKE_SOURCE_DIR}/scenarios/${n}.json)
  endforeach()
  add_test(NAME test_replay_roundtrip
           COMMAND sh ${CMAKE_CURRENT_LIST_DIR}/test_replay_roundtrip.sh $<TARGET_FILE:run_scenarios>
                   $<TARGET_FILE:scenario_from_events> ${CMAKE_BINARY_DIR}/replay-tests ${DL_RT_FILES})
  set_tests_properties(test_replay_roundtrip PROPERTIES TIMEOUT 300 LABELS "runner;e2e")
endif()
