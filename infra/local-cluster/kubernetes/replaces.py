"""Write (or --check) this module's replace lines for the staging modules of the pinned k8s.io/kubernetes.

k8s.io/kubernetes replaces its staging modules (k8s.io/api, k8s.io/client-go, ...) with ./staging/src/...,
which a module depending on it cannot see: each needs `replace k8s.io/<name> => k8s.io/<name> v0.<minor>.<patch>`.
The list is read from the pinned release's own go.mod (from the Go module proxy), never typed. To pin another
release: `go mod edit -require k8s.io/kubernetes@v1.X.Y && python3 replaces.py && go mod tidy`.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


def go_json(*args: str, cwd: Path = HERE) -> dict:
    done = subprocess.run(["go", *args], cwd=cwd, check=True, capture_output=True, text=True)
    return json.loads(done.stdout)


def pinned_version() -> str:
    required = go_json("mod", "edit", "-json")["Require"]
    return next(r["Version"] for r in required if r["Path"] == "k8s.io/kubernetes")


def wanted_replaces(version: str) -> dict[str, str]:
    """Each staging module of k8s.io/kubernetes@version, and the version it is replaced with."""
    release = re.fullmatch(r"v1\.(\d+)\.(\d+)", version)
    if not release:
        sys.exit(f"error: k8s.io/kubernetes {version} is not a release v1.MINOR.PATCH")
    staging_version = f"v0.{release[1]}.{release[2]}"
    upstream_mod = go_json("mod", "download", "-json", f"k8s.io/kubernetes@{version}")["GoMod"]
    upstream = go_json("mod", "edit", "-json", upstream_mod)
    staging = sorted(
        r["Old"]["Path"]
        for r in upstream.get("Replace") or []
        if r["New"]["Path"].startswith("./staging/")
    )
    if not staging:
        sys.exit(f"error: no staging replace in k8s.io/kubernetes@{version}'s go.mod")
    return dict.fromkeys(staging, staging_version)


def present_replaces() -> dict[str, str]:
    replaces = go_json("mod", "edit", "-json").get("Replace") or []
    return {r["Old"]["Path"]: f"{r['New']['Path']}@{r['New'].get('Version', '')}" for r in replaces}


def main() -> int:
    version = pinned_version()
    wanted = wanted_replaces(version)
    as_written = {name: f"{name}@{staging}" for name, staging in wanted.items()}
    present = present_replaces()
    if sys.argv[1:] == ["--check"]:
        if present != as_written:
            print(
                f"error: go.mod's replace lines are not the {len(wanted)} staging modules of "
                f"k8s.io/kubernetes@{version}: run python3 infra/local-cluster/kubernetes/replaces.py",
                file=sys.stderr,
            )
            return 1
        print(f"go.mod replaces the {len(wanted)} staging modules of k8s.io/kubernetes@{version}")
        return 0
    edits = [f"-dropreplace={name}" for name in present]
    edits += [f"-replace={name}={target}" for name, target in as_written.items()]
    subprocess.run(["go", "mod", "edit", *edits], cwd=HERE, check=True)
    print(f"go.mod: {len(wanted)} staging modules of k8s.io/kubernetes@{version} replaced")
    return 0


if __name__ == "__main__":
    sys.exit(main())
