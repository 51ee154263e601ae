"""TensorFlow as the training steps want it: silent while it starts, with the thread pools it is told.

TensorFlow's C++ start-up lines (oneDNN, CUDA probing, CPU features) are written to the process's stderr
before its logging is set up, whatever TF_CPP_MIN_LOG_LEVEL says, so they would come before a step's one
error line. They are caught while TensorFlow loads and initialises its devices, and shown only if that
fails. TF_NUM_INTRAOP_THREADS / TF_NUM_INTEROP_THREADS, when set (the runner sizes them per task), are
applied through tf.config.threading before any operation runs. Keras and TensorFlow import pandas,
matplotlib, scipy and Pillow whenever they are installed (the project's own environment has them all, for
the page, the benchmark and evaluate's picture), for features no trainer uses: a process that only trains
keeps them out (`keep_out_unused_modules`; of the four, the steps image installs only Pillow), which
saves about 0.85 s of CPU each time Keras loads. Python's cyclic garbage collector is off while
TensorFlow loads: the import makes hundreds of thousands of objects that live as long as the process,
and the collector, run again and again as they pile up, took a quarter of the import's time (0.45 s
of 1.75 s here); once loaded they are frozen (`gc.freeze`), so later collections skip them. And it
ends without the interpreter's teardown (`exit_without_teardown`), in which TensorFlow spends most
of a second.
"""

from __future__ import annotations

import gc
import logging
import os
import sys
import tempfile
from collections.abc import Callable
from typing import NoReturn, TypeVar

from steps.lib.errors import StepError

THREAD_VARIABLES = {
    "TF_NUM_INTRAOP_THREADS": "set_intra_op_parallelism_threads",
    "TF_NUM_INTEROP_THREADS": "set_inter_op_parallelism_threads",
}
MAX_THREADS = 1024
# Imported by Keras or TensorFlow inside `try: ... except ImportError`, never used by a trainer: DataFrame
# inputs, plots, scipy's sparse matrices (TensorFlow's legacy tf.keras), image files (Keras's image utils).
UNUSED_OPTIONAL_MODULES = ("pandas", "matplotlib", "scipy", "PIL")
Result = TypeVar("Result")


def thread_settings(environ: dict[str, str] | os._Environ = os.environ) -> dict[str, int]:
    """The thread counts the environment asks for: {variable: count}; StepError for a bad value."""
    settings = {}
    for variable in THREAD_VARIABLES:
        text = environ.get(variable, "").strip()
        if not text:
            continue
        if not text.isdigit() or not 1 <= int(text) <= MAX_THREADS:
            raise StepError(
                f"{variable} must be a whole number in 1..{MAX_THREADS}, got {text[:20]!r}"
            )
        settings[variable] = int(text)
    return settings


def quietly(load: Callable[[], Result]) -> Result:
    """Run `load` with the process's stderr (file descriptor 2) caught; replay it if `load` fails."""
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as caught:
        os.dup2(caught.fileno(), 2)
        try:
            return load()
        except BaseException:
            os.dup2(saved, 2)
            caught.seek(0)
            sys.stderr.write(caught.read().decode(errors="replace"))
            raise
        finally:
            os.dup2(saved, 2)
            os.close(saved)


def keep_out_unused_modules() -> None:
    """Make importing UNUSED_OPTIONAL_MODULES raise ImportError in this process (unless already
    imported), so Keras skips them. Only for a process that does nothing else: call it in `__main__`."""
    for name in UNUSED_OPTIONAL_MODULES:
        # None in sys.modules makes `import name` raise ImportError (the import system's documented
        # rule), which typeshed's dict[str, ModuleType] leaves out
        sys.modules.setdefault(name, None)  # type: ignore[arg-type]


def exit_without_teardown(code: int) -> NoReturn:
    """End the process with `code` at once: standard streams flushed, no atexit handlers, no module
    teardown. Only for a `__main__` whose outputs are all closed and renamed into place. On the cluster
    the exit status is what counts: Argo's wait container blocks until the emissary's exit-code file says
    the main container ended (executor.go: Wait, waitMainContainers), then reads the outputs from disk."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def _load_keras():
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    threads = thread_settings()
    import tensorflow as tf

    for variable, count in threads.items():
        getattr(tf.config.threading, THREAD_VARIABLES[variable])(count)
    tf.config.list_physical_devices()  # device probing logs too: do it now, while stderr is caught
    import keras

    logging.getLogger("absl").setLevel(logging.ERROR)  # Keras warns HDF5 is "legacy" on every save
    return keras


def without_collector(load: Callable[[], Result]) -> Result:
    """Run `load` with the cyclic garbage collector off, then freeze what it made and turn it back on."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        return load()
    finally:
        gc.freeze()
        if was_enabled:
            gc.enable()


def import_keras():
    """Keras on TensorFlow, loaded once, quietly, with the environment's thread pools applied."""
    if "keras" in sys.modules and "tensorflow" in sys.modules:
        return sys.modules["keras"]
    thread_settings()  # a bad value is an error line, not a traceback from inside the import
    return quietly(lambda: without_collector(_load_keras))
