# The event loop (interaction/ev.h) and the event stream (interaction/evt.h, docs/events.md).
dl_unit_test(test_evt SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_evt.c LIBS testutil TIMEOUT 60)
dl_unit_test(test_ev SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_ev.c LIBS testutil TIMEOUT 60)
dl_unit_test(test_events_doc SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_events_doc.c TIMEOUT 30)
target_compile_definitions(test_events_doc PRIVATE DOCS_EVENTS_MD="${PROJECT_SOURCE_DIR}/docs/events.md")
