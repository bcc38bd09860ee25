#!/bin/sh
# ./do installs what each command needs and no more: "run" and "build" only
# the compiler, CMake and the libraries (no Chromium, valgrind, clang,
# cppcheck, cmocka), "test" the test tools too; apt's output is shown, not
# hidden (a minute of downloads must not look like a hang). dpkg-query and
# apt-get are replaced by stand-ins on PATH that report nothing installed and
# record what they were asked; the stand-in apt-get then fails, so that ./do
# stops before building. Skipped unless root (./do installs only as root).
set -u
SRC=$1 OUT=$2
[ "$(id -u)" = 0 ] || { echo "not root: skipped"; exit 77; }
rm -rf "$OUT" && mkdir -p "$OUT/bin"
fail() { { echo "FAIL: $*"; echo "---- output:"; cat "$OUT/log" 2>/dev/null; } >&2; exit 1; }
cat > "$OUT/bin/dpkg-query" <<'S'
#!/bin/sh
exit 1
S
cat > "$OUT/bin/apt-get" <<S
#!/bin/sh
echo "apt-get \$*" >> "$OUT/apt.log"
echo "STAND-IN APT PROGRESS: \$1"
[ "\$1" = update ] && exit 0
exit 1
S
chmod +x "$OUT/bin/dpkg-query" "$OUT/bin/apt-get"
asked() { # $1: ./do command; prints the packages apt-get install was given
  rm -f "$OUT/apt.log"
  PATH="$OUT/bin:$PATH" "$SRC/do" "$1" > "$OUT/log" 2>&1 && fail "./do $1 went on after apt-get failed"
  grep -q "STAND-IN APT PROGRESS: update" "$OUT/log" || fail "./do $1 hides apt-get update's output"
  grep -q "STAND-IN APT PROGRESS: install" "$OUT/log" || fail "./do $1 hides apt-get install's output"
  sed -n 's/^apt-get install -y --no-install-recommends //p' "$OUT/apt.log"
}
for cmd in run build; do
  pk=$(asked $cmd) || exit 1
  for want in gcc cmake pkg-config libcjson-dev; do
    echo " $pk " | grep -q " $want " || fail "./do $cmd does not install $want: $pk"
  done
  for not in chromium valgrind clang clang-tidy cppcheck libcmocka-dev libclang-rt-14-dev; do
    echo " $pk " | grep -q " $not " && fail "./do $cmd installs $not, which only tests use: $pk"
  done
done
pk=$(asked test) || exit 1
for want in gcc libcmocka-dev chromium libxml2-utils; do
  echo " $pk " | grep -q " $want " || fail "./do test does not install $want: $pk"
done
for not in valgrind cppcheck clang-tidy; do
  echo " $pk " | grep -q " $not " && fail "./do test installs $not: $pk"
done
pk=$(asked static) || exit 1
echo " $pk " | grep -q " cppcheck " || fail "./do static does not install cppcheck: $pk"
pk=$(asked valgrind) || exit 1
echo " $pk " | grep -q " valgrind " || fail "./do valgrind does not install valgrind: $pk"
echo "1 passed, 0 failed"
