#!/usr/bin/env bash
# Build a STAND-IN for the official python:3.11.11-slim-bookworm base image, for machines that reach no
# container registry but do reach Debian's package archive. It is NOT the official image: Debian bookworm's
# own Python 3.11 (debootstrap minbase + python3, venv, pip, ca-certificates), with `python` on PATH as the
# official image has it. Images built on it are for trying and testing here, never for a cluster.
#
# Where outbound HTTPS passes a TLS-intercepting proxy, the CA bundle named by $REQUESTS_CA_BUNDLE is added
# to the stand-in's trust store and pip's, so `pip install` inside a build trusts the proxy.
#
#   infra/docker/standin-base.sh            # build it unless it exists (with the same CA bundle)
#   infra/docker/standin-base.sh --rebuild  # build it again
# Prints the image's name on its last line.
set -euo pipefail

TAG=${STANDIN_BASE:-localhost/mnist-argo-standin-python:3.11-bookworm}
SUITE=bookworm
MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
engine=$("$(dirname "$0")/engine.sh")
ca_bundle=${REQUESTS_CA_BUNDLE:-}
ca_digest=none
if [ -n "$ca_bundle" ]; then
    [ -r "$ca_bundle" ] || { echo "REQUESTS_CA_BUNDLE names a file that cannot be read: $ca_bundle" >&2; exit 2; }
    ca_digest=$(sha256sum "$ca_bundle" | cut -d' ' -f1)
fi

if [ "${1:-}" != "--rebuild" ] && "$engine" image inspect "$TAG" >/dev/null 2>&1; then
    built_with=$("$engine" image inspect --format '{{index .Config.Labels "mnist-argo.stand-in.ca-bundle-sha256"}}' "$TAG")
    if [ "$built_with" = "$ca_digest" ]; then
        echo "stand-in base exists (not the official python image): $TAG" >&2
        echo "$TAG"
        exit 0
    fi
    echo "stand-in base was built with another CA bundle: rebuilding" >&2
fi

command -v debootstrap >/dev/null 2>&1 || [ -x /usr/sbin/debootstrap ] || {
    echo "debootstrap is missing: apt-get install debootstrap (or run infra/docker/install-podman.sh)" >&2
    exit 2
}
echo "building a STAND-IN base image (Debian $SUITE python3, not python:3.11.11-slim-bookworm): $TAG" >&2
root=$(mktemp -d)
trap 'rm -rf "$root"' EXIT
PATH=$PATH:/usr/sbin debootstrap --variant=minbase \
    --include=python3,python3-venv,python3-pip,ca-certificates \
    "$SUITE" "$root" "$MIRROR" >&2

# The official image's `python` and `pip` commands.
ln -s /usr/bin/python3 "$root/usr/local/bin/python"
if [ -n "$ca_bundle" ]; then
    cp "$ca_bundle" "$root/usr/local/share/ca-certificates/build-host-ca-bundle.crt"
    chroot "$root" update-ca-certificates >&2
fi
# pip uses its own bundled CA list unless told otherwise; point it (in every venv) at the system's.
printf '[global]\ncert = /etc/ssl/certs/ca-certificates.crt\n' >"$root/etc/pip.conf"
rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/* "$root"/var/log/*.log

python_version=$(chroot "$root" python3 -c 'import platform; print(platform.python_version())')
tar --numeric-owner -C "$root" -c . | "$engine" import \
    --change 'ENV PATH=/usr/local/bin:/usr/local/sbin:/usr/bin:/usr/sbin:/bin:/sbin' \
    --change 'ENV LANG=C.UTF-8' \
    --change 'CMD ["python3"]' \
    --change "LABEL mnist-argo.stand-in=true" \
    --change "LABEL mnist-argo.stand-in.for=python:3.11.11-slim-bookworm" \
    --change "LABEL mnist-argo.stand-in.python=$python_version" \
    --change "LABEL mnist-argo.stand-in.ca-bundle-sha256=$ca_digest" \
    --change "LABEL org.opencontainers.image.description=STAND-IN base: Debian $SUITE python3 $python_version, not the official python image" \
    - "$TAG" >&2
echo "stand-in base built (Debian $SUITE, Python $python_version; not the official python image): $TAG" >&2
echo "$TAG"
