#!/usr/bin/env bash
# Does `tensorflow-cpu` train exactly as the full `tensorflow` wheel does, on the CPU? The images install
# tensorflow-cpu (no CUDA kernels: a smaller wheel); this trains the same shard from the same starting model
# with each build, in two fresh virtual environments, and compares every weight of the two models bit for bit.
# Prints each build's installed size and the comparison; exit 1 if the weights differ.
#
#   infra/docker/compare-tensorflow-builds.sh [MNIST_SOURCE] [TF_VERSION]
# (minutes: two installs of TensorFlow and two short trainings)
set -euo pipefail
cd "$(dirname "$0")/../.."
source=${1:-${MNIST_SOURCE:-../shared/data/mnist.npz}}
version=${2:-$(.venv/bin/python -c 'import importlib.metadata as m; print(m.version("tensorflow-cpu"))' 2>/dev/null || echo 2.21.0)}
python=${PYTHON:-python3}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

.venv/bin/python -m steps.split --source "$source" --workers 1 --limit 6000 \
    --shards-dir "$work/shards" --test-out "$work/test.npz" >/dev/null
.venv/bin/python -m steps.init --seed 0 --out "$work/init.h5"

for build in tensorflow tensorflow-cpu; do
    "$python" -m venv "$work/$build"
    "$work/$build/bin/pip" install --quiet "$build==$version" numpy pillow google-cloud-storage 2>&1 \
        | grep -v "is ignored" || true
    site=$("$work/$build/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
    echo "$build $version: tensorflow/ $(du -sh "$site/tensorflow" | cut -f1), all packages $(du -sh "$site" | cut -f1)"
    PYTHONPATH=$PWD "$work/$build/bin/python" -m steps.train --shard "$work/shards/0.npz" \
        --model "$work/init.h5" --epochs 1 --batch 100 --seed 0 \
        --out "$work/$build.h5" --stats-out "$work/$build.json" >"$work/$build.log" 2>&1
    echo "  trained: $(cat "$work/$build.json")"
done

.venv/bin/python - "$work/tensorflow.h5" "$work/tensorflow-cpu.h5" <<'EOF'
import sys

import h5py
import numpy as np


def weights(path):
    found = {}
    with h5py.File(path, "r") as f:
        f["model_weights"].visititems(
            lambda name, item: found.__setitem__(name, item[()]) if isinstance(item, h5py.Dataset) else None
        )
    return found


full, cpu = weights(sys.argv[1]), weights(sys.argv[2])
same = full.keys() == cpu.keys() and all(np.array_equal(full[k], cpu[k]) for k in full)
count = sum(v.size for v in full.values())
print(f"{len(full)} weight arrays, {count} weights: {'bit-identical' if same else 'DIFFERENT'}")
sys.exit(0 if same else 1)
EOF
