#!/bin/sh
# Remove from the page's virtual environment what the page never runs, in its image's build stage (after
# trim-venv.sh). Each cut is a feature the page does not use; the page image's tests run the page itself in
# the image (tests/test_containers_page.py: its script under Streamlit's AppTest, the health check, ui.predict).
#   trim-page.sh /opt/venv
set -eu
site=$(echo "$1"/lib/python3*/site-packages)
before=$(du -sm "$1" | cut -f1)

# pyarrow (Streamlit sends tables to the browser as Arrow): Arrow Flight (an RPC framework) and Arrow's S3
# filesystem; the page reads its models through google-cloud-storage, never through Arrow. pyarrow.fs
# treats a missing S3 module as "built without S3"; only `import pyarrow.flight` would fail. Also the Cython
# sources, C++ headers and the C++ test module, which nothing imports.
if [ -d "$site/pyarrow" ]; then
    rm -f "$site"/pyarrow/libarrow_flight.so* "$site"/pyarrow/libarrow_python_flight.so* \
        "$site"/pyarrow/_flight.cpython-*.so "$site"/pyarrow/libarrow_s3.so* \
        "$site"/pyarrow/_s3fs.cpython-*.so "$site"/pyarrow/_pyarrow_cpp_tests.cpython-*.so
    rm -rf "$site/pyarrow/include" "$site/pyarrow/src"
    find "$site/pyarrow" -type f \( -name '*.pyx' -o -name '*.pxd' -o -name '*.pxi' -o -name '*.h' \
        -o -name '*.cc' \) -delete
fi
# SciPy: the page's preprocessing (ui/preprocess.py) uses scipy.ndimage alone, which imports scipy.special
# and scipy._lib; the other subpackages (stats, optimize, sparse, linalg, signal, io, ...) and their compiled
# code stay out. The shared libraries in scipy.libs stay (scipy.special links OpenBLAS).
if [ -d "$site/scipy" ]; then
    find "$site/scipy" -mindepth 1 -maxdepth 1 -type d \
        ! -name _lib ! -name ndimage ! -name special ! -name __pycache__ -exec rm -rf {} +
fi
# pydeck (Streamlit requires it for maps, which the page draws none of): its Jupyter notebook extension's
# JavaScript bundle and source map; the Python module that names the extension stays.
rm -rf "$site/pydeck/nbextension/static"

echo "trimmed the page's $1: ${before} MB -> $(du -sm "$1" | cut -f1) MB"
