"""Average the workers' models into one (FedAvg: weights weighted by each shard's digit count), and add
the round to the run's training history: the workers' epochs, the average's score on the held-out digits,
the round's time.

Only h5py and numpy: every model file is checked against the known architecture's weight layout
(steps.lib.model_file), averaged, and written as a full Keras model. A model counts only with its stats file
(train writes it last, as its commit record): Argo saves a failed attempt's outputs too, so a model
without valid stats is treated as missing. Only the expected shards' models are averaged, weighed by
the digit counts split recorded (--shards {id: count}); a worker whose stats claim another count is
not counted, and any other model in the folder is ignored. The history is for people watching: a worker
whose stats hold no usable epochs, or a history that cannot be read, is said on stderr and never stops
the average; the round's summary goes to stdout.
"""

from __future__ import annotations

import argparse
import datetime as dt
import math
import os
import sys
from pathlib import Path

from steps.lib import history, inference
from steps.lib.arguments import add_pipeline_flag, non_negative_int, positive_int
from steps.lib.averaging import federated_average
from steps.lib.bounded_json import MAX_JSON_BYTES, parse_json, read_json_file, to_json
from steps.lib.entry_point import run
from steps.lib.errors import StepError
from steps.lib.history_plot import draw_history
from steps.lib.input_files import read_small_file
from steps.lib.mnist import MAX_SAMPLES, Digits
from steps.lib.model_file import read_model_file, write_model_file
from steps.lib.shards import read_shard
from steps.lib.staged_outputs import staged_outputs

MAX_SHARDS = 10_000
MAX_STATS_BYTES = MAX_JSON_BYTES  # a worker's epochs: ~30 bytes each
SHOWN_WORKERS = 8  # workers named in the round's summary line


def make_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m steps.aggregate", description=__doc__)
    parser.add_argument(
        "--models-dir",
        type=Path,
        required=True,
        help="folder of <shard>.h5 models, each with its <shard>.json from train",
    )
    parser.add_argument("--out", type=Path, required=True, help="the averaged model to write (.h5)")
    parser.add_argument(
        "--shards",
        help="the shards that should have delivered a model: a JSON object {id: digits in the "
        "shard}, as split's --sizes-out writes it, whose counts weigh the models; or a JSON list "
        "of ids, the models then weighed by their stats (default: the models present)",
    )
    add_pipeline_flag(
        parser,
        "--min-workers",
        "average when at least this many models are present; 0 = every shard",
        type=non_negative_int,
    )
    parser.add_argument(
        "--missing-out",
        type=Path,
        help="write the missing shards' ids here, comma-separated (empty when none is missing)",
    )
    parser.add_argument(
        "--round", type=positive_int, default=1, help="this round's number, from 1 (the history's)"
    )
    parser.add_argument(
        "--validation", type=Path, help="held-out digits (.npz) to score the average on"
    )
    parser.add_argument(
        "--history",
        type=Path,
        help="the run's history before this round (JSON, from init or the last round's aggregate)",
    )
    parser.add_argument(
        "--history-out", type=Path, help="write the history with this round added here (JSON)"
    )
    parser.add_argument("--plot-out", type=Path, help="draw that history here (PNG)")
    return parser


def expected_shards(text: str | None, present: list[str]) -> dict[str, int | None]:
    """The expected shards and, when split's counts are given, each one's digit count."""
    if text is None:
        return dict.fromkeys(present)
    shards = parse_json(text, "--shards")
    if isinstance(shards, dict):
        if not all(type(size) is int and 1 <= size <= MAX_SAMPLES for size in shards.values()):
            raise StepError(f"--shards: digit counts are integers in 1..{MAX_SAMPLES}")
        sizes: dict[str, int | None] = dict(shards)
    elif isinstance(shards, list):
        if not all(type(shard) in (int, str) for shard in shards):
            raise StepError(f"--shards: shard ids are numbers or text, got {text[:80]!r}")
        sizes = dict.fromkeys(map(str, shards))
    else:
        raise StepError(f"--shards must be a JSON list or object of shard ids, got {text[:80]!r}")
    if len(sizes) > MAX_SHARDS or not all(str(shard).isalnum() for shard in sizes):
        raise StepError(f"--shards: at most {MAX_SHARDS} ids of letters and digits")
    return sizes


def read_stats(stats_path: Path) -> dict:
    """A worker's stats file, whose `samples` is an integer in 1..MAX_SAMPLES."""
    if not stats_path.is_file():
        raise StepError(f"stats file not found: {stats_path} (written by train after its model)")
    stats = read_json_file(stats_path, "stats file", MAX_STATS_BYTES)
    samples = stats.get("samples") if isinstance(stats, dict) else None
    if not isinstance(stats, dict) or type(samples) is not int or not 1 <= samples <= MAX_SAMPLES:
        raise StepError(
            f"{stats_path}: 'samples' must be an integer in 1..{MAX_SAMPLES}, got {str(samples)[:40]}"
        )
    return stats


def sample_count(stats_path: Path) -> int:
    """The `samples` field of a worker's stats file: an integer in 1..MAX_SAMPLES."""
    return read_stats(stats_path)["samples"]


def list_models(folder: Path) -> dict[str, Path]:
    """The .h5 files in `folder` by shard id; no folder means no worker delivered."""
    try:
        names = sorted(entry.name for entry in os.scandir(folder))
    except FileNotFoundError:
        return {}
    except OSError as error:  # e.g. argoexec's 0700 root-owned input folder, read by uid 10001
        raise StepError(
            f"cannot read the models folder {folder}: {error.strerror} "
            f"(the step runs as uid {os.getuid()})"
        ) from None
    return {
        name.removesuffix(".h5"): folder / name
        for name in names
        if name.endswith(".h5") and not name.startswith(".")
    }


def committed(
    paths: dict[str, Path], sizes: dict[str, int | None]
) -> tuple[dict[str, tuple[Path, dict]], dict[str, str]]:
    """The expected shards' models with valid stats, {shard: (path, stats)}, and why the others do
    not count. The weight is split's digit count when known, and the stats must agree with it."""
    counted, ignored = {}, {}
    for shard, size in sizes.items():
        if shard not in paths:
            continue
        try:
            stats = read_stats(paths[shard].with_suffix(".json"))
            if size is not None and stats["samples"] != size:
                raise StepError(f"its stats claim {stats['samples']} samples; split made {size}")
            counted[shard] = (paths[shard], stats)
        except StepError as error:
            ignored[shard] = str(error)
    return counted, ignored


def worker_epochs(shard: str, stats: dict) -> dict:
    """A counted worker as the history keeps it: its samples, and its epochs if its stats hold them
    whole (a stderr line says why not otherwise)."""
    entry = {"samples": stats["samples"]}
    if "history" not in stats:
        return entry
    try:
        return entry | history.check_epochs(stats["history"], "its history", stated_epochs(stats))
    except StepError as error:
        print(f"leaving {shard}.json's epochs out of the history: {error}", file=sys.stderr)
        return entry


def history_before(path: Path | None, now: dt.datetime) -> tuple[dict, bool]:
    """The history this round is added to, and whether it is the run's own (a new one starting now
    when none is given, or it cannot be read: said on stderr)."""
    if path is None:
        return history.new_history(now), False
    try:
        before = history.read_history(read_small_file(path, "history", history.MAX_HISTORY_BYTES))
        return before, True
    except StepError as error:
        print(f"starting a new history: {path}: {error}", file=sys.stderr)
        return history.new_history(now), False


def stated_epochs(stats: dict) -> int:
    """The epochs a worker's stats say it trained (0 when they say nothing usable)."""
    epochs = stats.get("epochs")
    return epochs if type(epochs) is int and 0 <= epochs <= history.MAX_EPOCHS else 0


def held_out_score(digits: Digits, weights: list) -> dict | None:
    """The averaged model's accuracy and loss on the held-out digits (None, said on stderr, for a
    model that overflows: evaluate refuses it at the end)."""
    scored = inference.score(weights, digits)
    if not math.isfinite(scored.loss):
        print(f"the average's held-out loss is {scored.loss}: not scored", file=sys.stderr)
        return None
    return {"digits": len(digits), "accuracy": scored.accuracy, "loss": scored.loss}


def summary(record: dict) -> str:
    """The round in one line, for the person watching the run (`record` as round_record takes it)."""
    parts = [f"round {record['number']}:"]
    score = record["held_out"]
    if score is not None:
        parts.append(
            f"the average scores {score['accuracy']:.2%} on {score['digits']} held-out digits "
            f"(loss {score['loss']:.4f})"
        )
    else:
        parts.append("averaged")
    if record["seconds"] is not None:
        parts.append(f"after {record['seconds']:.1f} s;")
    workers = [
        f"{shard}: {entry['accuracy'][-1]:.2%} (loss {entry['loss'][-1]:.4f})"
        for shard, entry in record["workers"].items()
        if entry.get("accuracy")
    ]
    if workers:
        more = len(workers) - SHOWN_WORKERS
        shown = ", ".join(workers[:SHOWN_WORKERS]) + (f" and {more} more" if more > 0 else "")
        parts.append(f"each worker's last training epoch: {shown}")
    if record["missing"]:
        parts.append(f"(without shards {', '.join(record['missing'])})")
    return " ".join(parts).rstrip(";")


def main(args: argparse.Namespace) -> None:
    if not args.models_dir.is_dir() and args.shards is None:
        raise StepError(f"models folder not found: {args.models_dir}")
    if args.plot_out and not args.history_out:
        raise StepError("--plot-out draws the history: give --history-out too")
    with staged_outputs() as outputs:
        model_out = outputs.file(args.out)
        missing_out = outputs.file(args.missing_out) if args.missing_out else None
        history_out = outputs.file(args.history_out) if args.history_out else None
        plot_out = outputs.file(args.plot_out) if args.plot_out else None
        held_out = read_shard(args.validation) if args.validation else None
        paths = list_models(args.models_dir)
        expected = expected_shards(args.shards, list(paths))
        counted, ignored = committed(paths, expected)
        missing = [shard for shard in expected if shard not in counted]
        needed = args.min_workers or len(expected)
        if len(counted) < max(needed, 1):
            if not paths and not expected:
                raise StepError(f"no .h5 models in {args.models_dir}")
            why = "".join(f"; {shard}.h5 does not count: {ignored[shard]}" for shard in ignored)
            raise StepError(
                f"only {len(counted)} of {len(expected)} workers delivered a model, fewer than the "
                f"{needed} required; missing shards: {', '.join(missing)}{why}"
            )
        for shard, reason in ignored.items():
            print(f"ignoring {shard}.h5 as missing: {reason}", file=sys.stderr)
        for shard in sorted(set(paths) - set(expected)):
            print(f"ignoring {shard}.h5: not one of the expected shards", file=sys.stderr)
        shards = sorted(counted)
        models = [read_model_file(counted[shard][0]) for shard in shards]
        counts = [counted[shard][1]["samples"] for shard in shards]
        averaged = federated_average([model.weights for model in models], counts)
        write_model_file(model_out, models[0], averaged)
        if missing_out:
            missing_out.write_text(",".join(missing))
        if history_out:
            now = dt.datetime.now(dt.UTC)
            before, known = history_before(args.history, now)
            this_round = {
                "number": args.round,
                "ended_at": now,
                "seconds": history.round_seconds(before, now) if known else None,
                "epochs": max(stated_epochs(counted[shard][1]) for shard in shards),
                "held_out": None if held_out is None else held_out_score(held_out, averaged),
                "missing": missing,
                "workers": {shard: worker_epochs(shard, counted[shard][1]) for shard in shards},
            }
            after = history.add_round(before, history.round_record(**this_round))
            history_out.write_text(to_json(after))
            if plot_out:
                draw_history(after).save(plot_out, format="PNG")
            print(summary(this_round))
    if missing:
        print(
            f"going ahead without shards {', '.join(missing)} (--min-workers {needed})",
            file=sys.stderr,
        )
    shares = ", ".join(f"{shard}.h5: {counted[shard][1]['samples']}" for shard in shards)
    print(
        f"averaged {len(shards)} models weighted by their shards' digits ({shares}) → {args.out}",
        file=sys.stderr,
    )


if __name__ == "__main__":
    sys.exit(run(main, make_parser()))
