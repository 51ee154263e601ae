"""Record the stories (tests/support/stories.py) on an up cluster, for the Argo Server double:

    python -m tests.doubles.record_runs [STORY ...]      # every story when none is named

Each story is a real run through the Argo Server, read about once a second as the watch reads it."""

from __future__ import annotations

import argparse
import json
import secrets
import sys
import time
from contextlib import closing
from datetime import UTC, datetime

from tests.doubles import recordings
from tests.support.cluster import ENDED, Cluster, from_environment
from tests.support.stories import FIRST_TRY_LINE, OOM_LINE, STORIES, Story
from workflows.server.client import call, stop_workflow
from workflows.server.watch import CANNOT_PULL

POLL_SECONDS = 1.0


def stuck(status: dict) -> tuple[str, str] | None:
    """A Pod node pending because its image cannot be pulled: (its display name, why)."""
    for node in status["nodes"].values():
        message = node.get("message", "")
        if (
            node["type"] == "Pod"
            and node.get("phase") == "Pending"
            and message.startswith(CANNOT_PULL)
        ):
            return node["displayName"], message
    return None


def record(cluster: Cluster, story: Story) -> dict:
    """Run STORY on CLUSTER and read it to its end; the recording as a JSON document."""
    name = f"mnist-rec-{story.name}-{secrets.token_hex(3)}"
    cluster.create(story.workflow(cluster.env), name)
    previous: dict = {"nodes": {}}
    changes: list[dict] = []
    stopped, stuck_since = None, None
    while True:
        polled = time.monotonic()
        status = recordings.trimmed(
            call(cluster.argo_server, lambda argo: argo.get_workflow(name)).get("status", {})
        )
        read = datetime.now(UTC)
        if status != previous:
            change = recordings.changes(previous, status)
            changes.append({"read": read.isoformat(timespec="milliseconds"), **change})
            previous = status
            print(f"{name}: {len(changes)} statuses, {status.get('phase', '')}", file=sys.stderr)
        waiting = stuck(status)
        if story.stop_stuck_after and stopped is None and waiting:
            stuck_since = stuck_since or polled
            if polled - stuck_since >= story.stop_stuck_after:
                node, why = waiting
                stop_workflow(cluster.argo_server, name, f"{node} cannot start: {why}")
                stopped = len(changes)
        if status.get("phase") in ENDED:
            break
        time.sleep(max(0.0, POLL_SECONDS - (time.monotonic() - polled)))
    return {
        "story": story.name,
        "about": story.about,
        "flags": list(story.flags),
        "fault": {"shard": story.failing_shard, "command": story.fault} if story.fault else None,
        "train_image": story.train_image or None,
        "run": name,
        "versions": versions(cluster),
        "poll_seconds": POLL_SECONDS,
        "stopped": stopped,
        "changes": changes,
    }


def versions(cluster: Cluster) -> dict[str, str]:
    """The controller's image and the API server's version the run was recorded on."""
    image = cluster.kubectl(
        "-n", "argo", "get", "deployment", "workflow-controller", "-o",
        "jsonpath={.spec.template.spec.containers[0].image}",
    ).stdout.strip()  # fmt: skip
    server = json.loads(cluster.kubectl("version", "-o", "json").stdout)["serverVersion"]
    return {"workflow-controller": image, "kubernetes": server["gitVersion"]}


def messages(recording: recordings.Recording, step: str) -> list[str]:
    """The final message of each of a step's tries."""
    nodes = {node["displayName"]: node for node in recording.final["nodes"].values()}
    return [nodes[name].get("message", "") for name in recording.tries(step)]


def problems(recording: recordings.Recording) -> list[str]:
    """How the recorded run strayed from its story; none when it went as told."""
    phase = recording.final.get("phase")
    found = []
    expected = {"succeed": "Succeeded", "fail": "Failed", "min-workers": "Succeeded"}
    expected |= {"retry": "Succeeded", "cannot-pull": "Failed"}
    if phase != expected[recording.story]:
        found.append(f"the run ended {phase}, not {expected[recording.story]}")
    failing = "train-round-1(1:1)"
    if recording.story in ("fail", "min-workers"):
        oom = "main: OOMKilled (exit code 137): "
        said = messages(recording, failing)
        if len(said) != 3 or not all(m.startswith(oom) and OOM_LINE in m for m in said):
            found.append(f"{failing}'s tries were not all OOM-killed: {said}")
    if recording.story == "retry":
        said = messages(recording, "train-round-1(0:0)")
        if len(said) != 2 or not said[0].startswith("main: Error (exit code 1): "):
            found.append(f"train-round-1(0:0) did not fail once with exit code 1: {said}")
        elif FIRST_TRY_LINE not in said[0]:
            found.append(f"the first try's message lacks its last line: {said[0]}")
        for name in recording.tries("train-round-1(0:0)"):
            if len(recording.reports(name)) < 2:
                found.append(f"{name} showed fewer than 2 progress reports while running")
    if recording.story == "cannot-pull" and recording.stopped is None:
        found.append("the run was not stopped")
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tests.doubles.record_runs", description=__doc__
    )
    parser.add_argument("stories", nargs="*", metavar="STORY", help=", ".join(STORIES))
    chosen = parser.parse_args(argv).stories or list(STORIES)
    unknown = sorted(set(chosen) - set(STORIES))
    if unknown:
        parser.error(f"no story {', '.join(unknown)}; the stories: {', '.join(STORIES)}")
    failed = 0
    with closing(from_environment()) as cluster:
        for story in chosen:
            document = record(cluster, STORIES[story])
            path = recordings.path_of(story)
            written = path.with_suffix(".new")
            written.write_text(encoded(document))
            found = problems(recordings.read(written))
            if found:
                failed += 1
                print(f"{story}: not written ({written} kept): {'; '.join(found)}", file=sys.stderr)
                continue
            written.replace(path)
            print(f"{story}: {path} ({path.stat().st_size} bytes)", file=sys.stderr)
    return 1 if failed else 0


def encoded(document: dict) -> str:
    """The document as JSON, one recorded change a line."""
    head = {key: value for key, value in document.items() if key != "changes"}
    lines = [json.dumps(change, sort_keys=True) for change in document["changes"]]
    body = ",\n".join(lines)
    return json.dumps(head, indent=1)[:-2] + ',\n "changes": [\n' + body + "\n ]\n}\n"


if __name__ == "__main__":
    sys.exit(main())
