# ./do: what each command installs (tests/test_do.sh).
add_test(NAME test_do_packages COMMAND sh ${CMAKE_CURRENT_LIST_DIR}/test_do.sh ${CMAKE_SOURCE_DIR}
                                       ${CMAKE_BINARY_DIR}/do-tests)
set_tests_properties(test_do_packages PROPERTIES TIMEOUT 60 LABELS "e2e" SKIP_RETURN_CODE 77)
# The documentation stays inside the repository and covers the protocol's
# codes and endpoints (tests/test_docs.sh).
add_test(NAME test_docs COMMAND sh ${CMAKE_CURRENT_LIST_DIR}/test_docs.sh ${CMAKE_SOURCE_DIR})
set_tests_properties(test_docs PROPERTIES TIMEOUT 30)
