"""The local cluster's GCS emulator stopped or killed mid-upload, then started as docs/local-cluster.md says:
the run still Succeeds, every object matches its recorded size and checksums, none stored before changed.
The emulator is frozen (SIGSTOP) while the trainer trains, so its model's bytes wait unread in the emulator's
socket (`ss` shows them) when it is stopped."""

from __future__ import annotations

import base64
import contextlib
import hashlib
import os
import secrets
import signal
import subprocess
import time
from dataclasses import replace
from pathlib import Path

import google_crc32c
import pytest

from steps.lib.registry import LATEST_KEY
from tests.support.cluster import Cluster, tries, wait_until
from tests.support.local_cluster import LOCAL_CLUSTER, daemon_pid
from tests.support.project import FIXTURE_SEED
from workflows.pipeline.workflow import compile_workflow

pytestmark = pytest.mark.cluster

FAULTS = {"stopped": signal.SIGTERM, "killed": signal.SIGKILL}
TRAINER = "train-round-1(0:0)"
CHECKPOINT_FLAGS = ("--checkpoint-store", "--checkpoint-key")


def without_checkpoints(workflow: dict) -> dict:
    """The trainer without its checkpoint store: its pod then writes to the store only its outputs."""
    train = next(t for t in workflow["spec"]["templates"] if t["name"] == "train")
    args = train["container"]["args"]
    for flag in CHECKPOINT_FLAGS:  # each followed by its value
        del args[args.index(flag) : args.index(flag) + 2]
    return workflow


def unread_bytes(port: int, peer: str) -> int:
    """The bytes PEER has sent to the emulator's port that it has not read (Recv-Q), over all connections."""
    listing = subprocess.run(
        ["ss", "-tnH", "state", "established", f"( sport = :{port} )"],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    rows = [line.split()[:4] for line in listing.splitlines()]  # Recv-Q, Send-Q, local, remote
    return sum(int(received) for received, _, _, remote in rows if remote.rsplit(":", 1)[0] == peer)


def objects(cluster: Cluster) -> dict[str, tuple[int, str, str]]:
    """Every object in the bucket: its size, MD5 and CRC32C as the emulator recorded them."""
    return {
        blob.name: (blob.size, blob.md5_hash, blob.crc32c)
        for blob in cluster.storage().list_blobs(cluster.bucket)
    }


def measured(data: bytes) -> tuple[int, str, str]:
    """DATA's size, MD5 and CRC32C, each as GCS writes it (base64 of the digest)."""
    crc = google_crc32c.Checksum(data).digest()
    md5 = hashlib.md5(data).digest()
    return len(data), base64.b64encode(md5).decode(), base64.b64encode(crc).decode()


def gone(pid: int) -> bool:
    """Whether PID has ended (a zombie has: its parent, init, has yet to reap it)."""
    try:
        return "(zombie)" in Path(f"/proc/{pid}/status").read_text()
    except FileNotFoundError:
        return True


@pytest.mark.parametrize("fault", FAULTS)
def test_the_emulator_stopped_mid_upload_loses_nothing(cluster: Cluster, fault: str) -> None:
    if not cluster.local:
        pytest.skip("the GCS emulator is a process of the local cluster only (make cluster-up)")
    name = f"mnist-emulator-{fault}-{secrets.token_hex(3)}"
    settings = cluster.settings(
        workers=1, rounds=1, epochs=1, limit=3000, seed=FIXTURE_SEED, serve="always"
    )
    before = objects(cluster)
    cluster.create(
        without_checkpoints(compile_workflow(replace(settings, retry_backoff="2s"))), name
    )
    pod = cluster.pod_of(name, TRAINER)  # Running: its inputs are loaded, main trains
    address = cluster.get("pod", pod, "-n", cluster.namespace)["status"]["podIP"]
    port = int(cluster.env["STORAGE_EMULATOR_HOST"].rsplit(":", 1)[1])
    emulator = daemon_pid("gcs-emulator")
    os.kill(emulator, signal.SIGSTOP)
    try:
        unread = wait_until(
            f"{pod}'s upload to reach the frozen emulator",
            lambda: unread_bytes(port, address),
            timeout=600,
            every=0.5,
        )
        os.kill(emulator, FAULTS[fault])
    finally:
        # A stopped process handles its SIGTERM once it runs again.
        with contextlib.suppress(ProcessLookupError):
            os.kill(emulator, signal.SIGCONT)
    wait_until(f"the emulator (PID {emulator}) to end", lambda: gone(emulator), 60, every=0.2)
    ended = time.monotonic()
    # As docs/local-cluster.md has it: after `source .cluster/env`, `up.sh gcs-emulator`.
    restart = subprocess.run(
        ["bash", "-c", f'source .cluster/env && "{LOCAL_CLUSTER}/up.sh" gcs-emulator'],
        cwd=LOCAL_CLUSTER.parents[1], capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert restart.returncode == 0, restart.stderr
    down = time.monotonic() - ended
    workflow = cluster.finished(name)
    trainer = tries(workflow, TRAINER)
    after = objects(cluster)
    print(
        f"\n{fault} with {unread} bytes of {pod}'s upload unread; emulator down {down:.1f} s; the run"
        f" {workflow['status']['phase']}; trainer tries {[n['phase'] for n in trainer]};"
        f" {len(after)} objects, {len(before)} before"
    )
    assert workflow["status"]["phase"] == "Succeeded", workflow["status"].get("message")
    # LATEST alone may change: the run moves it.
    lost = {key for key in before if key != LATEST_KEY and after.get(key) != before[key]}
    assert lost == set(), f"objects lost or changed: {sorted(lost)}"
    bucket = cluster.storage().bucket(cluster.bucket)
    assert {
        key: measured(bucket.blob(key).download_as_bytes(checksum=None)) for key in after
    } == after
    assert cluster.read(LATEST_KEY).decode().strip() == name
