"""The local cluster's GCS emulator stopped (SIGTERM) or killed (SIGKILL) while a trainer's model is
uploading, then started again as docs/local-cluster.md says (`source .cluster/env`, `up.sh gcs-emulator`):
the run must still end Succeeded, every object in the bucket must match its recorded size and checksums,
none stored before may be lost or changed, and LATEST must name the run.

To be sure the upload is in flight when the emulator goes, the emulator is frozen (SIGSTOP) once the
trainer's main container runs (its inputs are loaded, and without a checkpoint store it writes nothing
until it ends); the trainer's executor then connects to it and sends its model's bytes, which wait unread
in the emulator's socket (`ss` shows them), and only then is the emulator stopped or killed."""

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
    """The trainer's command line without its checkpoint store: its pod then talks to the store only when
    its executor loads the inputs and, after main ends, uploads the outputs (the model first)."""
    train = next(t for t in workflow["spec"]["templates"] if t["name"] == "train")
    args = train["container"]["args"]
    kept = [
        arg
        for index, arg in enumerate(args)
        if arg not in CHECKPOINT_FLAGS and (index == 0 or args[index - 1] not in CHECKPOINT_FLAGS)
    ]
    train["container"]["args"] = kept
    return workflow


def unread_bytes(port: int, peer: str) -> int:
    """The bytes PEER has sent to the emulator's port that the emulator has not read (Recv-Q), over all
    of PEER's connections to it."""
    listing = subprocess.run(
        ["ss", "-tnH", "state", "established", f"( sport = :{port} )"],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    total = 0
    for line in listing.splitlines():
        received, _sent, _local, remote = line.split()[:4]
        if remote.rsplit(":", 1)[0] == peer:
            total += int(received)
    return total


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
    wrong = {}
    for key, recorded in after.items():
        actual = measured(bucket.blob(key).download_as_bytes(checksum=None))
        if actual != recorded:
            wrong[key] = (recorded, actual)
    assert wrong == {}, wrong
    assert cluster.read(LATEST_KEY).decode().strip() == name
