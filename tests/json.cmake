# jsonx (interaction/jsonx.c) and the aggregator's merge and split
# (aggregator/agg_merge.c).
dl_unit_test(test_jsonx SOURCES test_jsonx.c LABELS json)
if(TARGET agg_core)
  dl_unit_test(test_agg_merge SOURCES test_agg_merge.c LIBS agg_core LABELS json)
endif()
# The number-list block path, white box: every classifier gives the same.
dl_unit_test(test_jsonx_simd SOURCES test_jsonx_simd.c LABELS json)
