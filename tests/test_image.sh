#!/usr/bin/env bash
# The OCI image's root file system (deploy/build-image.sh), checked under
# chroot: machines here cannot run containers, and loopback is shared with
# a chroot, so the image's programs talk to the mocks as in a pod.
#
# usage: test_image.sh MODE SOURCE_DIR BUILD_DIR IMAGE_DIR
#   build      (re)build IMAGE_DIR from BUILD_DIR's programs (the fixture)
#   content    what the image holds: our programs and their libraries, a
#              non-root user, a valid OCI layout; no compiler, header, test
#              data or package tool; reports the size
#   scenarios  aggregator --version, then the happy and Kubernetes scenarios
#              with the aggregator inside the image, given the environment
#              DI-orchestrator sets, the mock operator as the server
# Exit 77 (skipped): not root, or no debootstrap / chroot.
set -euo pipefail
mode=$1 src=$2 build=$3 img=$4
root=$img/rootfs

skip() { echo "SKIP: $*"; exit 77; }
fail() { echo "FAIL: $*"; exit 1; }
[ "$(id -u)" = 0 ] || skip "building and entering the image's root file system needs root (debootstrap, chroot)"
command -v chroot >/dev/null || skip "no chroot"
command -v debootstrap >/dev/null || skip "no debootstrap (apt-get install debootstrap; ./do test installs it)"

if [ "$mode" = build ]; then
    exec "$src/deploy/build-image.sh" "$build" "$img"
fi
[ -x "$root/usr/bin/aggregator" ] || fail "no image at $img: the fixture test image_build did not build it"

case $mode in
content)
    bad=0
    no() { # DESCRIPTION FIND-ARGS...: no file of the image may match
        local what=$1
        shift
        local hits
        hits=$(cd "$root" && find . -xdev "$@" -print 2>/dev/null | head -5)
        if [ -n "$hits" ]; then
            echo "FAIL: the image holds $what: $(echo "$hits" | tr '\n' ' ')"
            bad=1
        else
            echo "ok   none of: $what"
        fi
    }
    no "a compiler, assembler, linker or build tool" \( -path '*/bin/*' -o -path '*/libexec/*' -o -path './usr/lib/gcc*' \) \
        \( -name 'gcc*' -o -name 'g++*' -o -name 'cc' -o -name 'c++' -o -name 'cpp*' -o -name 'clang*' \
           -o -name 'tcc' -o -name 'ld' -o -name 'ld.bfd' -o -name 'ld.gold' -o -name 'as' -o -name 'cmake' \
           -o -name 'make' -o -name 'ninja' -o -name 'cc1' -o -name '*-linux-gnu-*' \)
    no "C headers (ours or any)" \( -name '*.h' -o -path './usr/include/*' \)
    no "static libraries (libinteraction.a)" -name '*.a'
    no "test data or test programs (scenarios, run_scenarios, test_*)" \
        \( -name 'run_scenarios' -o -name 'test_*' -o -name '*.json' -path '*scenario*' -o -name 'scenarios' \)
    no "a package tool (apt)" \( -name 'apt' -o -name 'apt-get' -o -path './var/lib/apt' -o -path './etc/apt' \)
    no "manuals or info pages" \( -path './usr/share/man' -o -path './usr/share/info' \)
    no "documentation but copyright files" -path './usr/share/doc/*' -type f -not -name copyright
    no "the build tree's paths" -path "./${build#/}*"
    for b in aggregator mock_learner mock_coordinator mock_operator dilearn-mock-job-coordinator; do
        if [ ! -x "$root/usr/bin/$b" ] || [ "$(stat -c %u "$root/usr/bin/$b")" != 0 ]; then
            echo "FAIL: /usr/bin/$b is missing or not owned by root"
            bad=1
        fi
    done
    if readelf -S "$root/usr/bin/aggregator" | grep -q '\.debug_info'; then
        echo "FAIL: the image's aggregator is not stripped"
        bad=1
    fi
    if missing=$(chroot "$root" /usr/bin/ldd /usr/bin/aggregator /usr/bin/mock_learner /usr/bin/mock_coordinator \
        /usr/bin/mock_operator | grep 'not found'); then
        echo "FAIL: libraries missing: $missing"
        bad=1
    else
        echo "ok   every library our programs need is there"
    fi
    for lib in libmicrohttpd.so.12 libcurl.so.4 libcjson.so.1; do
        [ -n "$(find "$root/usr/lib" -name "$lib*" | head -1)" ] || { echo "FAIL: no $lib"; bad=1; }
    done
    grep -q '^dilearn:x:10001:10001:' "$root/etc/passwd" || { echo "FAIL: no user dilearn (10001)"; bad=1; }
    # The OCI layout: every digest and size as declared, the layer's diff_id,
    # the entry point and the user.
    python3 - "$img/oci" <<'EOF' || bad=1
import gzip, hashlib, json, os, sys
oci = sys.argv[1]
def blob(desc):
    algo, hexd = desc["digest"].split(":")
    path = os.path.join(oci, "blobs", algo, hexd)
    data = open(path, "rb").read()
    assert hashlib.sha256(data).hexdigest() == hexd, f"{path}: digest mismatch"
    assert len(data) == desc["size"], f"{path}: size {len(data)} != {desc['size']}"
    return data
assert json.load(open(os.path.join(oci, "oci-layout")))["imageLayoutVersion"] == "1.0.0"
index = json.load(open(os.path.join(oci, "index.json")))
(mdesc,) = index["manifests"]
assert mdesc["mediaType"] == "application/vnd.oci.image.manifest.v1+json"
manifest = json.loads(blob(mdesc))
config = json.loads(blob(manifest["config"]))
(layer,) = manifest["layers"]
diff = hashlib.sha256(gzip.decompress(blob(layer))).hexdigest()
assert config["rootfs"]["diff_ids"] == ["sha256:" + diff], "diff_id is not the layer's uncompressed digest"
c = config["config"]
assert c["Entrypoint"] == ["/usr/bin/aggregator"], c["Entrypoint"]
assert c["User"] == "10001:10001", c["User"]
print(f"ok   OCI layout: {mdesc['annotations']['io.containerd.image.name']}, entry point {c['Entrypoint'][0]}, "
      f"user {c['User']}, one layer of {layer['size']} bytes")
EOF
    # shellcheck disable=SC1091
    . "$img/image.env"
    npkg=$(chroot "$root" dpkg-query -W -f='${Package}\n' | wc -l)
    echo "image size: root file system $((IMAGE_BYTES / 1048576)) MiB ($IMAGE_BYTES bytes)," \
        "compressed layer $((LAYER_BYTES / 1048576)) MiB ($LAYER_BYTES bytes), $npkg Debian packages"
    exit $bad
    ;;
scenarios)
    want=$("$build/aggregator/aggregator" --version)
    got=$(chroot --userspec=10001:10001 "$root" /usr/bin/aggregator --version)
    [ "$got" = "$want" ] || fail "aggregator --version in the image: '$got', want '$want'"
    echo "ok   in the image, as user 10001: $got"
    tmp=$(mktemp -d)
    trap 'rm -rf "$tmp"' EXIT
    # The runner starts this in place of the aggregator. For a Kubernetes
    # scenario (the runner sets KUBERNETES_SERVER_URL, _POD_NAMESPACE and
    # _POD_NAME, the mock operator being the server) it adds the rest of what
    # DI-orchestrator gives the aggregator's pod: AGGREGATOR_PORT, and the
    # aggregator's own address. The runner's flags still say where to listen.
    cat >"$tmp/aggregator-in-image" <<EOF
#!/bin/bash
if [ -n "\${KUBERNETES_SERVER_URL:-}" ]; then
    prev=
    for a in "\$@"; do [ "\$prev" = --slave-port ] && export AGGREGATOR_PORT=\$a; prev=\$a; done
    export KUBERNETES_AGGREGATOR_URL=127.0.0.1:\${AGGREGATOR_PORT:?no --slave-port}
fi
# --events FILE: the image cannot see the run folder, so the aggregator
# writes in the image's /tmp and FILE is a link to it (the runner follows it)
args=(); prev=
for a in "\$@"; do
    if [ "\$prev" = --events ]; then
        inside=/tmp/events-\$\$.jsonl
        : >"$root\$inside" && chown 10001:10001 "$root\$inside" && ln -sf "$root\$inside" "\$a"
        a=\$inside
    fi
    args+=("\$a"); prev=\$a
done
exec chroot --userspec=10001:10001 "$root" /usr/bin/aggregator "\${args[@]}"
EOF
    chmod +x "$tmp/aggregator-in-image"
    scen=()
    for s in "$src"/scenarios/happy_*.json "$src"/scenarios/k8s_*.json "$src"/scenarios/operator_*.json; do
        case $s in *happy_64.json | *scale_*) continue ;; esac
        scen+=("$s")
    done
    [ ${#scen[@]} -ge 5 ] || fail "only ${#scen[@]} happy and Kubernetes scenarios found in $src/scenarios"
    echo "== ${#scen[@]} scenarios with the image's aggregator: ${scen[*]##*/}"
    "$build/runner/run_scenarios" -q -j 2 --out "$tmp/out" --aggregator "$tmp/aggregator-in-image" "${scen[@]}" ||
        fail "a scenario failed with the image's aggregator (run folders above)"
    # It did run in the image, in "DI-orchestrator's pod" for the k8s ones.
    logs=$(grep -l "in DI-orchestrator's pod" -r "$tmp/out/runs" | wc -l)
    [ "$logs" -ge 1 ] || fail "no aggregator log says it ran with DI-orchestrator's environment"
    echo "ok   $logs run(s) logged DI-orchestrator's pod environment"
    ;;
*)
    fail "unknown mode '$mode'"
    ;;
esac
