#!/bin/sh
# Remove from a virtual environment what nothing runs, in an image's build stage (needs binutils' strip).
# Each cut is measured in docs/local-runner.md ("What the layers hold"); the images' tests run the steps
# and the page on what is left.
#   trim-venv.sh /opt/venv
set -eu
site=$(echo "$1"/lib/python3*/site-packages)
before=$(du -sm "$1" | cut -f1)

# TensorFlow's C++ headers: for compiling custom ops, never read when running.
rm -rf "$site/tensorflow/include"
# libclang's native library: TensorFlow requires the package (for its code generators), but nothing in the
# environment imports `clang` when running. Its Python bindings stay, so the package metadata stays true.
rm -f "$site/clang/native/libclang.so"
# The packages' own test suites (pandas, numpy, pyarrow): never imported by the code they test.
find "$site" -depth -type d -name tests -path "$site/*/tests" -exec rm -rf {} +
# Symbol tables of TensorFlow's shared libraries, which ship unstripped (0.2 GB of its libtensorflow_cc.so.2):
# only debuggers read them; the code and the dynamic symbols the loader uses stay. Other packages' libraries
# are left alone: they come stripped, and strip can damage the ones auditwheel rewrote with patchelf.
if [ -d "$site/tensorflow" ]; then
    find "$site/tensorflow" -type f -name '*.so*' -exec sh -c '
        for lib; do
            if readelf --section-headers "$lib" | grep -q "\.symtab"; then strip --strip-unneeded "$lib"; fi
        done' sh {} +
fi

echo "trimmed $1: ${before} MB -> $(du -sm "$1" | cut -f1) MB"
