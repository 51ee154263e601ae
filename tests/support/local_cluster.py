"""The local cluster (infra/local-cluster/) as this machine sees it: its daemons' PIDs, command lines and
TCP listeners; commands run as `nobody`, as another user of a shared machine would run them."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

from tests.support.project import ROOT

LOCAL_CLUSTER = ROOT / "infra" / "local-cluster"
STATE = ROOT / ".cluster"
# setpriv (util-linux): every ID of nobody's, no supplementary group of root's.
AS_NOBODY = ("setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups")
# One listening socket in `ss -ltnpH`: its local address and port, then the processes that hold it.
LISTENER = re.compile(
    r"^LISTEN\s+\d+\s+\d+\s+(?P<address>\S+):(?P<port>\d+)\s+\S+\s+users:(?P<users>.*)$"
)
PID = re.compile(r"pid=(\d+)")


# What another user's shell has: the system's programs (root's own PATH may lead into root's home).
SYSTEM_PATH = "/usr/local/bin:/usr/bin:/bin"


def as_nobody(*command: str, timeout: float = 60) -> subprocess.CompletedProcess:
    """COMMAND as nobody, from /, with the system's PATH and no other environment."""
    return subprocess.run(
        [*AS_NOBODY, *command],
        capture_output=True,
        text=True,
        cwd="/",
        env={"PATH": SYSTEM_PATH, "HOME": "/nonexistent"},
        timeout=timeout,
    )


def daemon_pid(name: str) -> int:
    """The PID up.sh recorded for the daemon NAME (.cluster/pids/NAME.pid: the PID, then the program)."""
    return int((STATE / "pids" / f"{name}.pid").read_text().split()[0])


def daemons() -> dict[int, str]:
    """Every daemon of the local cluster that runs: its PID and name."""
    pids = {daemon_pid(path.stem): path.stem for path in (STATE / "pids").glob("*.pid")}
    return {pid: name for pid, name in pids.items() if Path(f"/proc/{pid}").exists()}


def flag(pid: int, name: str) -> str:
    """The value of the flag NAME (`--name value` or `--name=value`) on process PID's command line."""
    arguments = Path(f"/proc/{pid}/cmdline").read_bytes().decode().split("\0")
    for index, argument in enumerate(arguments):
        if argument == name:
            return arguments[index + 1]
        if argument.startswith(f"{name}="):
            return argument.split("=", 1)[1]
    raise AssertionError(f"process {pid} was not started with {name}: {arguments}")


def listeners() -> dict[str, set[str]]:
    """Each daemon's TCP listeners on this machine's network, as `ss -ltnp` shows them: ADDRESS:PORT."""
    found: dict[str, set[str]] = {}
    names = daemons()
    listing = subprocess.run(["ss", "-ltnpH"], capture_output=True, text=True, check=True).stdout
    for line in listing.splitlines():
        match = LISTENER.match(line)
        if not match:
            continue
        for pid in map(int, PID.findall(match["users"])):
            if pid in names:
                address = match["address"].strip("[]")
                found.setdefault(names[pid], set()).add(f"{address}:{match['port']}")
    return found
