#!/usr/bin/env bash
# Print the container engine to use: $ENGINE if set, else podman, else docker, whichever answers.
# A docker client without a running daemon does not count. Exit 2 with one line when there is none.
set -euo pipefail

if [ -n "${ENGINE:-}" ]; then
    echo "$ENGINE"
    exit 0
fi
for candidate in podman docker; do
    if command -v "$candidate" >/dev/null 2>&1 && "$candidate" info >/dev/null 2>&1; then
        echo "$candidate"
        exit 0
    fi
done
echo "no container engine: install podman (infra/docker/install-podman.sh) or start docker" >&2
exit 2
