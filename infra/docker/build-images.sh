#!/usr/bin/env bash
# Build the three images with podman or docker (whichever answers; ENGINE= to choose), tagged
# mnist-argo-steps:VERSION (the steps that do not train, no TensorFlow), mnist-argo-train:VERSION (train, with
# TensorFlow) and mnist-argo-page:VERSION (VERSION from pyproject.toml; IMAGE_TAG= to change it; STEPS_IMAGE=,
# TRAIN_IMAGE=, PAGE_IMAGE= for whole names).
#
# The base is the official python:3.11.11-slim-bookworm (the Dockerfile's default), or BASE_IMAGE=... Where the
# official base can be neither found nor pulled (no registry reachable), the images are built on the stand-in
# base of infra/docker/standin-base.sh instead, and this says so: such images are for this machine only.
# Rebuilding reuses the engine's layer cache: only what changed is built again.
set -euo pipefail
cd "$(dirname "$0")/../.."

OFFICIAL_BASE=python:3.11.11-slim-bookworm
engine=$(infra/docker/engine.sh)
version=${IMAGE_TAG:-$(sed -n 's/^version = "\(.*\)"$/\1/p' pyproject.toml)}
declare -A images=(
    [steps]=${STEPS_IMAGE:-mnist-argo-steps:$version}
    [train]=${TRAIN_IMAGE:-mnist-argo-train:$version}
    [page]=${PAGE_IMAGE:-mnist-argo-page:$version}
)

base=${BASE_IMAGE:-}
if [ -z "$base" ]; then
    if "$engine" image inspect "$OFFICIAL_BASE" >/dev/null 2>&1 \
        || timeout 300 "$engine" pull "$OFFICIAL_BASE" >/dev/null 2>&1; then
        base=$OFFICIAL_BASE
    else
        echo "the official base $OFFICIAL_BASE cannot be pulled here (no registry reachable):" \
            "building on a STAND-IN base; these images are for this machine, not for a cluster" >&2
        base=$(infra/docker/standin-base.sh | tail -n 1)
    fi
fi

# podman writes OCI images by default, which have no HEALTHCHECK: keep the page's in the docker format.
format=()
[ "$(basename "$engine")" = podman ] && format=(--format docker)

for target in steps train page; do
    image=${images[$target]}
    echo "building $image (target $target, base $base) with $engine" >&2
    started=$(date +%s)
    # --network=host: pip reaches PyPI the way this machine does (some engines' build networks cannot).
    "$engine" build "${format[@]}" --network=host --file infra/docker/Dockerfile --target "$target" \
        --build-arg "BASE_IMAGE=$base" --label "mnist-argo.base=$base" --tag "$image" .
    size=$("$engine" image inspect --format '{{.Size}}' "$image")
    echo "built $image in $(($(date +%s) - started)) s: $((size / 1000000)) MB (base $base)" >&2
done
