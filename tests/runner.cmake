# The scenario runner (runner/, docs/scenarios.md): units of the scenario
# parser and validator, an end-to-end run, the HTML report in headless
# Chromium, no orphans after kill -9 of the runner, SIGINT/SIGTERM with
# scenarios queued, the JUnit report against tests/junit.xsd, --repeat and
# --seeds, the planted bugs (with
# -DPLANT_BUGS=ON), and one ctest test per scenario file (label "scenario").
if(TARGET runner_core AND TARGET run_scenarios)
  dl_unit_test(test_runner_parse SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_runner_parse.c LIBS runner_core
               LABELS runner TIMEOUT 60)
  dl_unit_test(test_explore SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_explore.c LIBS runner_core
               LABELS "runner;explore" TIMEOUT 60)

  set(DL_RUNNER_OUT ${CMAKE_BINARY_DIR}/runner-tests)
  foreach(t e2e html orphans signal junit repeat)
    add_test(NAME test_runner_${t}
             COMMAND sh ${CMAKE_CURRENT_LIST_DIR}/test_runner_${t}.sh $<TARGET_FILE:run_scenarios>
                     ${CMAKE_SOURCE_DIR} ${DL_RUNNER_OUT}/${t})
    set_tests_properties(test_runner_${t} PROPERTIES TIMEOUT 180 LABELS "runner;e2e" SKIP_RETURN_CODE 77)
  endforeach()

  # the runner reads events: faults on the timeline, never-fired faults,
  # expect.events, bad event lines (tests/test_runner_events.sh)
  add_test(NAME test_runner_events
           COMMAND sh ${CMAKE_CURRENT_LIST_DIR}/test_runner_events.sh $<TARGET_FILE:run_scenarios>
                   ${CMAKE_SOURCE_DIR} ${DL_RUNNER_OUT}/events $<TARGET_FILE:mock_learner>)
  set_tests_properties(test_runner_events PROPERTIES TIMEOUT 180 LABELS "runner;e2e")

  # the whole library with every process's log level at off
  if(TARGET aggregator)
    add_test(NAME test_runner_logs_off
             COMMAND sh ${CMAKE_CURRENT_LIST_DIR}/test_runner_logs_off.sh $<TARGET_FILE:run_scenarios>
                     ${CMAKE_SOURCE_DIR} ${DL_RUNNER_OUT}/logs_off $<TARGET_FILE:aggregator>)
    # alone and one scenario at a time, so that their timings hold under a checker
    set_tests_properties(test_runner_logs_off PROPERTIES TIMEOUT 300 LABELS "runner;e2e" SKIP_RETURN_CODE 77
                         RUN_SERIAL TRUE)
  endif()

  # every file of the library validates
  add_test(NAME test_runner_library_valid
           COMMAND run_scenarios --check ${CMAKE_SOURCE_DIR}/scenarios)
  set_tests_properties(test_runner_library_valid PROPERTIES TIMEOUT 30 LABELS runner)

  # invalid fault objects are refused at --check time (exit 2, file:line)
  add_test(NAME test_runner_check_invalid
           COMMAND sh ${CMAKE_CURRENT_LIST_DIR}/test_runner_check_invalid.sh $<TARGET_FILE:run_scenarios>
                   ${CMAKE_CURRENT_LIST_DIR}/invalid_scenarios/fault_typos.json)
  set_tests_properties(test_runner_check_invalid PROPERTIES TIMEOUT 30 LABELS runner)

  if(PLANT_BUGS)
    foreach(bug merge_drops_key split_off_by_one no_deadline no_retake)
      add_test(NAME test_runner_planted_${bug}
               COMMAND sh ${CMAKE_CURRENT_LIST_DIR}/test_runner_planted.sh $<TARGET_FILE:run_scenarios>
                       ${CMAKE_SOURCE_DIR} ${DL_RUNNER_OUT}/planted-${bug} ${bug})
      set_tests_properties(test_runner_planted_${bug} PROPERTIES TIMEOUT 300 LABELS "runner;planted")
    endforeach()
  endif()

  # explore (docs/scenarios.md, "Explore"): a CI-sized exploration of the
  # normal aggregator finds no violation (fewer runs under a sanitizer)
  if(SANITIZE)
    set(DL_EXPLORE_RUNS 16)
  else()
    set(DL_EXPLORE_RUNS 100)
  endif()
  # (each exploration writes a new folder: the test starts from an empty one)
  add_test(NAME test_runner_explore
           COMMAND sh -c "rm -rf \"$1\" && mkdir -p \"$1\" && exec \"$0\" --explore \"$2\" --runs $3 --seed 1 -j 2 --quiet --max-seconds 240 --shrink-seconds 60 --out \"$1\" --junit \"$1/junit.xml\" --html \"$1/report.html\""
                   $<TARGET_FILE:run_scenarios> ${DL_RUNNER_OUT}/explore ${CMAKE_SOURCE_DIR}/scenarios/explore/base_4.json
                   ${DL_EXPLORE_RUNS})
  set_tests_properties(test_runner_explore PROPERTIES TIMEOUT 420 LABELS "runner;explore")
  if(PLANT_BUGS)
    foreach(bug merge_drops_key split_off_by_one no_deadline no_retake retake_forgets_demand retake_stalls_task)
      add_test(NAME test_runner_explore_planted_${bug}
               COMMAND sh ${CMAKE_CURRENT_LIST_DIR}/test_runner_explore_planted.sh $<TARGET_FILE:run_scenarios>
                       ${CMAKE_SOURCE_DIR} ${DL_RUNNER_OUT}/explore-planted-${bug} ${bug})
      set_tests_properties(test_runner_explore_planted_${bug} PROPERTIES TIMEOUT 420 LABELS "runner;planted;explore")
    endforeach()
  endif()

  file(GLOB DL_SCENARIOS ${CMAKE_SOURCE_DIR}/scenarios/*.json)
  foreach(f ${DL_SCENARIOS})
    get_filename_component(n ${f} NAME_WE)
    # a fresh folder each time: the runner never overwrites an earlier run's
    # folder, so repeated ctest runs would pile them up
    add_test(NAME scenario_${n}
             COMMAND sh -c "rm -rf \"$1\" && exec \"$2\" --quiet --out \"$1\" \"$3\"" sh
                     ${DL_RUNNER_OUT}/scenarios/${n} $<TARGET_FILE:run_scenarios> ${f})
    set_tests_properties(scenario_${n} PROPERTIES TIMEOUT 120 LABELS scenario)
  endforeach()
endif()
