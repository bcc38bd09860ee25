#!/bin/sh
# The protocol is documented inside the repository (docs/protocol.md) and the
# documentation links nothing outside it; the page covers every code of
# interaction/proto.h and every endpoint the slave and the master serve.
set -u
SRC=$1
fail() { echo "FAIL: $*"; exit 1; }
P="$SRC/docs/protocol.md"
[ -s "$P" ] || fail "no docs/protocol.md"
# links: no path that leaves the repository
for f in "$SRC"/README.md "$SRC"/docs/*.md; do
  bad=$(grep -o '\.\./[A-Za-z0-9_./-]*' "$f" | head -1)
  [ -z "$bad" ] || fail "$f points outside the repository: $bad"
  for l in $(grep -o '](\([A-Za-z0-9_./-]*\.md\))' "$f" | sed 's/^](//; s/)$//'); do
    [ -f "$(dirname "$f")/$l" ] || fail "$f links $l, which does not exist"
  done
done
grep -q '](docs/protocol.md)' "$SRC/README.md" || fail "the README does not link docs/protocol.md"
# every code of proto.h
for c in $(sed -n 's/^ *X([A-Z_]*, \([0-9]*\),.*/\1/p' "$SRC/interaction/proto.h" | sort -u); do
  grep -Eq "^\| +$c \||^\| [0-9, ]*\b$c\b[0-9, ]* \|" "$P" || fail "code $c of proto.h is not in the table of docs/protocol.md"
done
# every endpoint served by the slave and the master
for e in $(sed -n 's/.*strcmp(path, "\(\/[a-z/]*\)") == 0.*/\1/p' "$SRC/interaction/slave.c" "$SRC/interaction/master.c" | sort -u); do
  grep -q " $e\`" "$P" || fail "endpoint $e is not documented in docs/protocol.md"
done
# the split and merge rules and the fixes are there
for h in '## The codes' "## The aggregator's semantics" '### Merging results' '## Learner tasks' '**Fix'; do
  grep -qF "$h" "$P" || fail "docs/protocol.md lacks '$h'"
done
echo "1 passed, 0 failed"
