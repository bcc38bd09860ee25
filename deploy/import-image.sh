#!/usr/bin/env bash
# Imports OUT_DIR/dilearn-oci.tar (deploy/build-image.sh) into podman or
# docker when one of them is installed and answers; never runs a container.
# usage: deploy/import-image.sh OUT_DIR
set -euo pipefail
out=${1:?usage: $0 OUT_DIR}
tar=$out/dilearn-oci.tar
# shellcheck disable=SC1091
. "$out/image.env"
imported=no
for tool in podman docker; do
    command -v "$tool" >/dev/null || continue
    if ! "$tool" info >/dev/null 2>&1; then
        echo "== $tool is installed but does not answer ($tool info fails): not imported into it"
        continue
    fi
    echo "== $tool load -i $tar"
    "$tool" load -i "$tar"
    [ "$tool" = docker ] || "$tool" tag "$IMAGE_REF" "$IMAGE_REF" 2>/dev/null || true
    imported=yes
done
if [ $imported = no ]; then
    echo "== not imported (no podman or docker that answers). To use it elsewhere:"
    echo "   podman load -i $tar    # or: docker load -i $tar (where Docker reads OCI archives)"
    echo "   skopeo copy oci-archive:$tar docker://REGISTRY/dilearn:${IMAGE_REF##*:}"
fi
