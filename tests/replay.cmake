# scenario_from_events (runner/sfe.h): units on hand-written events files.
if(TARGET sfe_core AND TARGET runner_core)
  dl_unit_test(test_sfe SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_sfe.c LIBS sfe_core runner_core LABELS runner TIMEOUT 60)
  target_compile_definitions(test_sfe PRIVATE SFE_DIR="${CMAKE_CURRENT_LIST_DIR}/sfe")
endif()
