# mock_operator: end-to-end tests that run the real executable (its path is
# compiled in; `test_mock_operator PATH` overrides it), and unit tests of its
# modules.
if(TARGET mock_operator)
  dl_unit_test(test_mock_operator SOURCES test_mock_operator.c LIBS PkgConfig::CURL
               TIMEOUT 180 LABELS "e2e;mock_operator")
  target_compile_definitions(test_mock_operator PRIVATE
                             MOCK_OPERATOR_BIN="$<TARGET_FILE:mock_operator>")
  add_dependencies(test_mock_operator mock_operator)
  dl_unit_test(test_mock_operator_units SOURCES test_mock_operator_units.c
               LIBS mock_operator_core LABELS mock_operator)
endif()
