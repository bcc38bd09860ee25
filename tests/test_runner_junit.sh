#!/bin/sh
# The JUnit report is what CI tools accept (tests/junit.xsd, and counts that
# match the testcases) and is enough on its own to reproduce: every testcase
# carries its seed and replay command (properties and system-out). A failed
# expectation is a <failure> at its line; an invalid file still writes the
# report, as an <error> at the line of the error, with the valid files as
# <skipped>, and no stale report is left; a --junit path in a missing folder
# exits 2 before anything runs. Skipped without xmllint.
set -u
RS=$1 SRC=$2 OUT=$3
XSD="$SRC/tests/junit.xsd"
command -v xmllint > /dev/null || { echo "xmllint missing (Debian: libxml2-utils): skipped"; exit 77; }
rm -rf "$OUT" && mkdir -p "$OUT/sc" "$OUT/o"
fail() { echo "FAIL: $*"; echo "---- output:"; cat "$OUT/log" 2>/dev/null; exit 1; }
valid() { # $1: report; the schema, then the counts against the testcases
  xmllint --noout --schema "$XSD" "$1" 2> "$OUT/xmllint.log" || fail "$1 does not validate: $(cat "$OUT/xmllint.log")"
  for what in tests:testcase failures:failure errors:error skipped:skipped; do
    attr=${what%%:*} el=${what#*:}
    want=$(xmllint --xpath "count(//testcase/$el)" "$1")
    [ "$attr" = tests ] && want=$(xmllint --xpath "count(//testcase)" "$1")
    got=$(xmllint --xpath "string(/testsuites/testsuite/@$attr)" "$1")
    [ "$got" = "$want" ] || fail "$1: $attr=\"$got\" but $want such testcases"
  done
  n=$(xmllint --xpath "count(//testcase)" "$1")
  r=$(xmllint --xpath "count(//testcase/properties/property[@name='replay'])" "$1")
  [ "$n" = "$r" ] || fail "$1: $r of $n testcases have a replay property"
  o=$(xmllint --xpath "count(//testcase/system-out[contains(., 'replay: ')])" "$1")
  [ "$n" = "$o" ] || fail "$1: $o of $n testcases have the replay command in system-out"
}

cp "$SRC/scenarios/happy_1.json" "$OUT/sc/pass_one.json"
cp "$SRC/tests/fixtures/wrong_gpu.json" "$OUT/sc/wrong_gpu.json"
"$RS" -j 2 --quiet --out "$OUT/o" --seed 7 --junit "$OUT/o/j.xml" "$OUT/sc" > "$OUT/log" 2>&1
[ $? -eq 1 ] || fail "exit $?, expected 1"
valid "$OUT/o/j.xml"
grep -q '<failure type="expectation" message="resource #1: result.gpu == 2' "$OUT/o/j.xml" || fail "no failure"
grep -q '<property name="seed" value="7"/>' "$OUT/o/j.xml" || fail "no seed property"
replay=$(xmllint --xpath "string(//testcase[@name='wrong_gpu']/properties/property[@name='replay']/@value)" "$OUT/o/j.xml")
case "$replay" in *"--seed 7 "*wrong_gpu.json) ;; *) fail "replay property: $replay" ;; esac
sh -c "$replay --quiet" > "$OUT/replay.log" 2>&1
[ $? -eq 1 ] || fail "the replay from the JUnit file did not fail"
grep -q "FAILED resource #1: result.gpu == 2" "$OUT/replay.log" || fail "the replay from the JUnit file does not reproduce"

# an invalid file: exit 2, and still a report; the old one is gone
echo "stale report of an earlier run" > "$OUT/o/j.xml"
printf '{\n  "description": "x",\n  "learners": [{"count": 0}],\n  "expect": {}\n}\n' > "$OUT/sc/bad.json"
"$RS" --quiet --out "$OUT/o" --junit "$OUT/o/j.xml" --html "$OUT/o/r.html" "$OUT/sc" > "$OUT/log" 2>&1
[ $? -eq 2 ] || fail "invalid file: exit $?, expected 2"
grep -q "stale report" "$OUT/o/j.xml" && fail "the stale JUnit file is left in place"
valid "$OUT/o/j.xml"
grep -q '<testcase classname="scenarios" name="bad" file="[^"]*bad.json" line="3"' "$OUT/o/j.xml" ||
  fail "the invalid file is not a testcase at its line"
grep -q '<error type="invalid scenario" message="[^"]*bad.json:3: invalid scenario file: learners\[0\].count: must be between 1 and 4096, not 0"' "$OUT/o/j.xml" ||
  fail "the invalid file is not an <error> with file:line"
[ "$(grep -c '<skipped message="not run: another scenario file is invalid"/>' "$OUT/o/j.xml")" -eq 2 ] ||
  fail "the valid files are not skipped"
[ -s "$OUT/o/r.html" ] || fail "no HTML report for an invalid file"

# a report in a folder that does not exist: found before anything runs
"$RS" --quiet --out "$OUT/o" --junit "$OUT/nowhere/j.xml" "$OUT/sc/pass_one.json" > "$OUT/log" 2>&1
[ $? -eq 2 ] || fail "--junit in a missing folder: exit $?, expected 2"
grep -q "the folder .*nowhere does not exist" "$OUT/log" || fail "no message for the missing folder"
[ -d "$OUT/o/runs/pass_one-1" ] && fail "it ran although the report cannot be written"
echo "1 passed, 0 failed"
