"""Import probe for the benchmark's pipeline runs: each Python process of a run records, as it exits,
when it started and ended (CLOCK_MONOTONIC, shared by every process of the machine), its command line,
and whether TensorFlow was loaded (not the trainers: they end without atexit handlers). Active only where
BENCH_PROBE_DIR is set; it never fails a process.

The benchmark puts this folder on PYTHONPATH, so Python imports this file at start-up (`site` module).
"""

import os

if os.environ.get("BENCH_PROBE_DIR"):
    import atexit
    import json
    import sys
    import time

    _started = time.monotonic()

    def _record() -> None:
        try:
            record = {
                "argv": sys.argv,
                "started": _started,
                "ended": time.monotonic(),
                "tensorflow": "tensorflow" in sys.modules,
            }
            path = os.path.join(os.environ["BENCH_PROBE_DIR"], f"{os.getpid()}.json")
            with open(path + ".tmp", "w") as stream:
                json.dump(record, stream)
            os.replace(path + ".tmp", path)
        except Exception:  # a probe must never change how a step ends
            pass

    atexit.register(_record)
