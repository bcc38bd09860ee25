#!/bin/sh
# The HTML report renders in headless Chromium: one page, no external
# resources, an SVG timeline per scenario, the expectations and the logs.
set -u
RS=$1 SRC=$2 OUT=$3
rm -rf "$OUT" && mkdir -p "$OUT"
fail() { echo "FAIL: $*"; exit 1; }
CHROMIUM=$(command -v chromium || command -v chromium-browser || true)
[ -n "$CHROMIUM" ] || fail "chromium is not installed (apt-get install chromium)"

"$RS" -j 2 --quiet --out "$OUT/o" --html "$OUT/report.html" "$SRC/scenarios/happy_4.json" \
  "$SRC/scenarios/crash_learn.json" "$SRC/scenarios/learner_returns.json" > "$OUT/log" 2>&1
[ -s "$OUT/report.html" ] || fail "no report written: $(cat "$OUT/log")"
# self-contained: nothing is fetched
if grep -Eq '(src|href)="(https?:)?//' "$OUT/report.html"; then fail "external resource in the page"; fi
[ "$(grep -c '<svg' "$OUT/report.html")" -eq 3 ] || fail "expected 3 timelines"

flags="--headless --no-sandbox --disable-gpu --no-first-run --disable-background-networking --disable-component-update --disable-sync"
# shellcheck disable=SC2086
timeout 120 "$CHROMIUM" $flags --user-data-dir="$OUT/profile1" --virtual-time-budget=5000 \
  --dump-dom "file://$OUT/report.html" > "$OUT/dom.html" 2> "$OUT/chromium.log" || fail "chromium --dump-dom failed: $(tail -5 "$OUT/chromium.log")"
for want in 'Scenario report' 'id="s-crash_learn"' 'id="s-learner_returns"' '<svg' '<rect' 'world size' 'log: aggregator' 'kill\|fault drop\|fault learner1'; do
  grep -q "$want" "$OUT/dom.html" || fail "the rendered page lacks '$want'"
done
# shellcheck disable=SC2086
timeout 120 "$CHROMIUM" $flags --user-data-dir="$OUT/profile2" --window-size=1200,2000 --virtual-time-budget=5000 \
  --screenshot="$OUT/report.png" "file://$OUT/report.html" > /dev/null 2>> "$OUT/chromium.log" || fail "chromium --screenshot failed"
size=$(wc -c < "$OUT/report.png")
[ "$size" -gt 20000 ] || fail "screenshot of $size bytes: a blank page?"
echo "report: $OUT/report.html, screenshot: $OUT/report.png"
echo "1 passed, 0 failed"
