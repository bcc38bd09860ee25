#!/usr/bin/env bash
# Builds the OCI image of the aggregator and the mocks from Debian 12
# packages only, without running a container:
#   1. a minimal Debian root file system (debootstrap --variant=minbase
#      bookworm, from the mirror of /etc/apt/sources*) with the runtime
#      libraries, pruned of what no program of the image uses; cached;
#   2. our four executables, installed by the CMake install rules of a build
#      tree (stripped) into a staging folder and copied from there, and the
#      mock DIJob's coordinator script;
#   3. a non-root user (dilearn, 10001) and the aggregator as entry point;
#   4. an OCI image layout (one layer: a reproducible tar of the root file
#      system) and an oci-archive tarball of it, which `podman load` and
#      `docker load` take.
#
# usage: deploy/build-image.sh BUILD_DIR OUT_DIR
#   OUT_DIR/rootfs/          the image's root file system (for the tests)
#   OUT_DIR/oci/             OCI image layout
#   OUT_DIR/dilearn-oci.tar  the same as an oci-archive
#   OUT_DIR/image.env        IMAGE_REF, IMAGE_BYTES (root fs), LAYER_BYTES
# Cache: $DILEARN_CACHE (default ${XDG_CACHE_HOME:-~/.cache}/dilearn): the
# debootstrap tarball of .debs and the pruned base root file system, keyed by
# mirror, architecture, package list and this script's base recipe.
# Needs root (debootstrap, chroot), debootstrap, tar, gzip, sha256sum.
set -euo pipefail

die() { echo "build-image: $*" >&2; exit 2; }
[ $# -eq 2 ] || die "usage: $0 BUILD_DIR OUT_DIR"
BUILD=$(cd "$1" && pwd) || die "no build folder '$1'"
mkdir -p "$2"
OUT=$(cd "$2" && pwd)
HERE=$(cd "$(dirname "$0")" && pwd)
[ "$(id -u)" = 0 ] || die "needs root (debootstrap and chroot)"
command -v debootstrap >/dev/null || die "needs debootstrap (apt-get install debootstrap)"
[ -f "$BUILD/CMakeCache.txt" ] || die "'$BUILD' is not a configured CMake build tree"

SUITE=bookworm
# Runtime libraries: HTTP server (libmicrohttpd), HTTP client (libcurl),
# JSON (cJSON). The tree builds its HTTP on its own code today and on
# libmicrohttpd + libcurl in other branches: the image carries both.
RUNTIME_PKGS=libmicrohttpd12,libcurl4,libcjson1
BINARIES=(aggregator mock_learner mock_coordinator mock_operator)
IMAGE_NAME=${DILEARN_IMAGE_NAME:-localhost/dilearn}
VERSION=$(sed -n 's/^CMAKE_PROJECT_VERSION:STATIC=//p' "$BUILD/CMakeCache.txt")
[ -n "$VERSION" ] || VERSION=0.0.0
IMAGE_REF=$IMAGE_NAME:$VERSION
ARCH=$(dpkg --print-architecture)

# The mirror this machine uses: the first URI of the main archive.
mirror() {
    local m
    m=$(cat /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources 2>/dev/null |
        grep -E '^(URIs:|deb )' | grep -oE 'https?://[^ ]+' | grep -E '/debian/?$' | head -1 || true)
    echo "${DILEARN_DEBIAN_MIRROR:-${m:-http://deb.debian.org/debian}}"
}
MIRROR=$(mirror)

CACHE=${DILEARN_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/dilearn}
mkdir -p "$CACHE"
# The base recipe is the text of base_rootfs() below: change it, get a new key.
DEBS_KEY=$(echo "$SUITE $ARCH $MIRROR $RUNTIME_PKGS" | sha256sum | cut -c1-16)
KEY=$( { echo "$DEBS_KEY"; sed -n '/^base_rootfs()/,/^}/p;/^prune()/,/^}/p' "$0"; } | sha256sum | cut -c1-16)
DEBS=$CACHE/debootstrap-$SUITE-$ARCH-$DEBS_KEY.tgz
BASE=$CACHE/base-$SUITE-$ARCH-$KEY.tar

# Removes from a Debian root file system what none of our programs uses:
# apt (the image is never updated in place: it is rebuilt) and the packages
# only apt or a file system tool use, the time zone data (the programs log in
# UTC), glibc's iconv modules, documentation except the copyright files,
# manuals, translations, caches, logs. What stays is Debian's Essential set
# (a shell and coreutils for `kubectl exec`; dpkg's status file, which image
# scanners read to find the packages' security fixes) and the libraries.
prune() {
    local r=$1
    chroot "$r" dpkg --purge apt libapt-pkg6.0 libstdc++6 e2fsprogs libext2fs2 libss2 logsave tzdata \
        >"$r.prune.log" 2>&1 || { cat "$r.prune.log" >&2; die "cannot purge the unused packages from the base"; }
    rm -f "$r.prune.log"
    rm -rf "$r"/etc/apt "$r"/var/lib/apt "$r"/var/cache/apt "$r"/var/cache/debconf/*-old \
        "$r"/var/lib/dpkg/*-old "$r"/var/log/* "$r"/usr/share/man "$r"/usr/share/info \
        "$r"/usr/share/lintian "$r"/usr/share/linda "$r"/usr/share/bug "$r"/var/cache/man \
        "$r"/usr/lib/*-linux-gnu/gconv
    find "$r"/usr/share/doc -mindepth 1 -not -name copyright -not -type d -delete
    find "$r"/usr/share/doc -mindepth 1 -type d -empty -delete
    find "$r"/usr/share/locale -mindepth 1 -maxdepth 1 -not -name locale.alias -exec rm -rf {} +
    rm -f "$r"/etc/machine-id "$r"/var/lib/dbus/machine-id "$r"/etc/hostname "$r"/etc/resolv.conf
    : > "$r"/etc/hosts
}

base_rootfs() {
    local tmp=$1
    if [ ! -s "$DEBS" ]; then
        echo "== debootstrap: downloading $SUITE ($ARCH) minbase + $RUNTIME_PKGS from $MIRROR"
        local dl
        dl=$(mktemp -d "$CACHE/dl.XXXXXX")
        debootstrap --variant=minbase --include="$RUNTIME_PKGS" --make-tarball="$dl/debs.tgz" \
            "$SUITE" "$dl/work" "$MIRROR" >"$dl/log" 2>&1 || { tail -20 "$dl/log" >&2; die "debootstrap --make-tarball failed"; }
        mv "$dl/debs.tgz" "$DEBS"
        rm -rf "$dl"
    fi
    echo "== debootstrap: installing the base from $(basename "$DEBS")"
    debootstrap --variant=minbase --include="$RUNTIME_PKGS" --unpack-tarball="$DEBS" \
        "$SUITE" "$tmp" "$MIRROR" >"$tmp.log" 2>&1 || { tail -20 "$tmp.log" >&2; die "debootstrap failed (log: $tmp.log)"; }
    rm -f "$tmp.log"
    prune "$tmp"
    # The user the image runs as: no login, no home.
    echo "dilearn:x:10001:10001:dilearn:/nonexistent:/usr/sbin/nologin" >>"$tmp/etc/passwd"
    echo "dilearn:x:10001:" >>"$tmp/etc/group"
    echo "dilearn:!:19000::::::" >>"$tmp/etc/shadow"
}

start=$(date +%s)
if [ ! -s "$BASE" ]; then
    tmp=$(mktemp -d "$CACHE/base.XXXXXX")
    base_rootfs "$tmp/root"
    tar -C "$tmp/root" --numeric-owner -cf "$tmp/base.tar" .
    mv "$tmp/base.tar" "$BASE"
    rm -rf "$tmp"
else
    echo "== base root file system from the cache ($(basename "$BASE"))"
fi

ROOT=$OUT/rootfs
rm -rf "$ROOT" "$OUT/stage" "$OUT/oci" "$OUT/dilearn-oci.tar"
mkdir -p "$ROOT"
tar -C "$ROOT" --numeric-owner -xf "$BASE"

# Our executables, by the install rules, stripped; only the four programs
# go into the image (not the runner, the static library or the headers).
echo "== installing ${BINARIES[*]} from $BUILD"
DESTDIR="$OUT/stage" cmake --install "$BUILD" --prefix /usr --strip >/dev/null
for b in "${BINARIES[@]}"; do
    [ -x "$OUT/stage/usr/bin/$b" ] || die "the install rules of $BUILD gave no usr/bin/$b (build it first)"
    install -m 0755 -o 0 -g 0 "$OUT/stage/usr/bin/$b" "$ROOT/usr/bin/$b"
done
# The mock DIJob's coordinator (deploy/k8s/mock-dijob.yaml).
install -m 0755 -o 0 -g 0 "$HERE/dilearn-mock-job-coordinator" "$ROOT/usr/bin/"
missing=$(chroot "$ROOT" /usr/bin/ldd "${BINARIES[@]/#//usr/bin/}" 2>&1 | grep 'not found' || true)
[ -z "$missing" ] || die "libraries missing in the image: $missing"

# ---- OCI image layout ----
SDE=${SOURCE_DATE_EPOCH:-$(git -C "$HERE" log -1 --format=%ct 2>/dev/null || date +%s)}
OCI=$OUT/oci
mkdir -p "$OCI/blobs/sha256"
blob() { # FILE MEDIATYPE -> moves FILE into blobs, prints a descriptor
    local d s
    d=$(sha256sum "$1" | cut -d' ' -f1)
    s=$(stat -c %s "$1")
    mv "$1" "$OCI/blobs/sha256/$d"
    printf '{"mediaType":"%s","digest":"sha256:%s","size":%s}' "$2" "$d" "$s"
}
# One layer: sorted names, clamped mtimes, no atime/ctime, numeric owners,
# gzip without a name or time stamp: the same inputs give the same digest.
tar -C "$ROOT" --sort=name --numeric-owner --mtime="@$SDE" --clamp-mtime \
    --pax-option=exthdr.name=%d/PaxHeaders/%f,delete=atime,delete=ctime -cf "$OUT/layer.tar" .
DIFF_ID=$(sha256sum "$OUT/layer.tar" | cut -d' ' -f1)
gzip -n -6 "$OUT/layer.tar"
LAYER=$(blob "$OUT/layer.tar.gz" application/vnd.oci.image.layer.v1.tar+gzip)
CREATED=$(date -u -d "@$SDE" +%Y-%m-%dT%H:%M:%SZ)
cat >"$OUT/config.json" <<JSON
{"created":"$CREATED","architecture":"$ARCH","os":"linux",
 "config":{"User":"10001:10001","Entrypoint":["/usr/bin/aggregator"],
  "Env":["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"],
  "ExposedPorts":{"22272/tcp":{},"22273/tcp":{}},"WorkingDir":"/",
  "Labels":{"org.opencontainers.image.title":"dilearn","org.opencontainers.image.version":"$VERSION",
   "org.opencontainers.image.description":"DI-engine learner aggregator (entry point) with mock_learner, mock_coordinator, mock_operator"}},
 "rootfs":{"type":"layers","diff_ids":["sha256:$DIFF_ID"]},
 "history":[{"created":"$CREATED","created_by":"deploy/build-image.sh: debootstrap --variant=minbase $SUITE + $RUNTIME_PKGS + ${BINARIES[*]}"}]}
JSON
CONFIG=$(blob "$OUT/config.json" application/vnd.oci.image.config.v1+json)
printf '{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","config":%s,"layers":[%s]}' \
    "$CONFIG" "$LAYER" >"$OUT/manifest.json"
MANIFEST=$(blob "$OUT/manifest.json" application/vnd.oci.image.manifest.v1+json)
printf '{"schemaVersion":2,"mediaType":"application/vnd.oci.image.index.v1+json","manifests":[%s]}\n' \
    "${MANIFEST%\}},\"annotations\":{\"org.opencontainers.image.ref.name\":\"$VERSION\",\"io.containerd.image.name\":\"$IMAGE_REF\"}}" \
    >"$OCI/index.json"
echo '{"imageLayoutVersion":"1.0.0"}' >"$OCI/oci-layout"
tar -C "$OCI" --sort=name --numeric-owner --owner=0 --group=0 --mtime="@$SDE" -cf "$OUT/dilearn-oci.tar" .

IMAGE_BYTES=$(du -sb "$ROOT" | cut -f1)
LAYER_DIGEST=${LAYER#*sha256:}
LAYER_BYTES=$(stat -c %s "$OCI/blobs/sha256/${LAYER_DIGEST%%\"*}")
printf 'IMAGE_REF=%s\nIMAGE_BYTES=%s\nLAYER_BYTES=%s\n' "$IMAGE_REF" "$IMAGE_BYTES" "$LAYER_BYTES" >"$OUT/image.env"
echo "== image $IMAGE_REF: root file system $((IMAGE_BYTES / 1024)) KiB, compressed layer $((LAYER_BYTES / 1024)) KiB," \
     "built in $(( $(date +%s) - start )) s"
echo "   $OUT/rootfs  $OUT/oci  $OUT/dilearn-oci.tar"
