#!/bin/sh
# The scenario library catches each bug planted in the aggregator
# (DILEARN_PLANT_BUG, a -DPLANT_BUGS=ON build): the whole library runs
# against the bug, and some scenario must fail with a message that points at
# the cause.
set -u
RS=$1 SRC=$2 OUT=$3 BUG=$4
rm -rf "$OUT" && mkdir -p "$OUT"
case $BUG in
  merge_drops_key) want='result has buffer_id' ;;          # a merged key is missing
  split_off_by_one) want='learn data has [0-9]* items, expected batch size' ;; # slices of the wrong length
  no_deadline) want='message contains "learner1: no result within the task deadline' ;; # no deadline of its own
  no_retake) want='world size reaches 3' ;;                # a returning learner is not taken back
  *) echo "unknown bug $BUG"; exit 2 ;;
esac
DILEARN_PLANT_BUG=$BUG "$RS" -j 2 --quiet --out "$OUT/o" "$SRC/scenarios" > "$OUT/log" 2>&1
rc=$?
if [ $rc -ne 1 ]; then echo "FAIL: the library exited $rc against $BUG (expected 1)"; tail -40 "$OUT/log"; exit 1; fi
if ! grep -A3 "FAILED" "$OUT/log" | grep -q "$want"; then
  echo "FAIL: no scenario failed with '$want' against $BUG; the failures:"
  grep -A2 "FAILED" "$OUT/log" | head -60
  exit 1
fi
echo "planted bug $BUG is caught:"
grep -A3 "FAILED" "$OUT/log" | grep "$want" | head -3 | cut -c1-300
echo "1 passed, 0 failed"
