"""Run by the Google Cloud CLI's own Python: each argv of a JSON list on stdin through one loaded gcloud
CLI, as `gcloud ARGV` would run it; writes [exit code, what it printed] per argv as JSON to stdout."""

import json
import os
import sys
import tempfile
import traceback

sys.path.insert(0, sys.argv[1])  # the SDK's lib/
import gcloud  # lib/gcloud.py, the `gcloud` command's entry point: sys.path, vendored modules

gcloud._fix_google_module()
cli = gcloud._import_gcloud_main().CreateCLI([])  # what gcloud_main.main() builds, then runs once


def execute(argv: list[str]) -> int:
    """gcloud_main.main()'s `gcloud_cli.Execute()` for ARGV: an argument error exits 2 (argparse)."""
    try:
        cli.Execute(argv)
        return 0
    except SystemExit as exit:
        return exit.code if isinstance(exit.code, int) else 1
    except BaseException:
        traceback.print_exc()
        return 1


answer = os.dup(1)
verdicts = []
for argv in json.load(sys.stdin):
    with tempfile.TemporaryFile() as printed:
        saved = os.dup(1), os.dup(2)
        os.dup2(printed.fileno(), 1)
        os.dup2(printed.fileno(), 2)
        code = execute(argv)
        sys.stdout.flush()
        sys.stderr.flush()
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        printed.seek(0)
        verdicts.append([code, printed.read().decode(errors="replace")])
os.write(answer, json.dumps(verdicts).encode())
