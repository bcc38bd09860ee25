add_library(testutil STATIC ${CMAKE_CURRENT_LIST_DIR}/testutil.c)
target_link_libraries(testutil PUBLIC interaction)
target_include_directories(testutil PUBLIC ${CMAKE_CURRENT_LIST_DIR})
dl_unit_test(test_interaction SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_interaction.c LIBS testutil TIMEOUT 120)
