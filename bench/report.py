"""Turn the benchmark's results into results.json, a markdown table and a PNG of accuracy against time."""

from __future__ import annotations

import json
from pathlib import Path

from PIL import Image, ImageDraw, ImageFont

TARGET_ACCURACY = 0.99
# (key in results["runs"], label in the table and the picture, line colour)
METHODS = [
    ("seed_method", "Seed's method", (200, 60, 60)),
    ("pipeline_seed_settings", "Pipeline, seed's settings", (230, 150, 30)),
    ("pipeline_default", "Pipeline, defaults", (40, 100, 200)),
    ("centralized", "Centralized", (40, 150, 70)),
]


def time_to(curve: list[dict], accuracy: float = TARGET_ACCURACY) -> float | None:
    """Seconds until the first point of `curve` at or above `accuracy`; None if never."""
    return next((point["seconds"] for point in curve if point["accuracy"] >= accuracy), None)


def _seconds(value: float | None) -> str:
    return "not reached" if value is None else f"{value:.0f} s"


def _share(value: float | None) -> str:
    return "" if value is None else f"{value:.0%}"


def table(results: dict) -> str:
    """The main comparison as a markdown table, with the load the machine was under for each run."""
    lines = [
        "| Method | Settings | Test accuracy | Time to 99% | Wall | CPU | Peak RSS (largest process) "
        "| Outside training | Load avg before → after |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for key, label, _ in METHODS:
        run = results["runs"].get(key)
        if run is None:
            continue
        load = f"{run['loadavg_before'][0]:.1f} → {run['loadavg_after'][0]:.1f}"
        lines.append(
            f"| {label} | {run['settings_text']} | {run['accuracy']:.2%} | "
            f"{_seconds(time_to(run['curve']))} | {run['wall_seconds']:.0f} s | "
            f"{run['cpu_seconds']:.0f} s | {run['peak_rss_mb']:.0f} MB | "
            f"{_share(run.get('outside_training_share'))} | {load} |"
        )
    return "\n".join(lines)


def targets_table(results: dict) -> str:
    lines = ["| Target | Measured | Met |", "|---|---|---|"]
    for target in results["targets"]:
        lines.append(
            f"| {target['target']} | {target['measured']} | {'yes' if target['met'] else 'no'} |"
        )
    return "\n".join(lines)


def sweeps_table(results: dict) -> str:
    sweeps = results.get("sweeps") or []
    if not sweeps:
        return ""
    lines = [
        "| Sweep | Settings | Test accuracy | Time to 99% | Wall | Outside training |",
        "|---|---|---|---|---|---|",
    ]
    for run in sweeps:
        lines.append(
            f"| {run['sweep']} | {run['settings_text']} | {run['accuracy']:.2%} | "
            f"{_seconds(time_to(run['curve']))} | {run['wall_seconds']:.0f} s | "
            f"{_share(run.get('outside_training_share'))} |"
        )
    return "\n".join(lines)


def markdown(results: dict) -> str:
    machine = results["machine"]
    parts = [
        f"MNIST, {results['train_samples']} training and 10000 test digits; {machine['cpu_count']} CPU "
        f"cores, no GPU; TensorFlow {machine['tensorflow']}; started {results['started']}.",
        "",
        table(results),
        "",
        targets_table(results),
    ]
    if sweeps := sweeps_table(results):
        parts += ["", sweeps]
    return "\n".join(parts) + "\n"


def draw_curves(results: dict, size: tuple[int, int] = (900, 560)) -> Image.Image:
    """Test accuracy against wall time: one line per method, the 99% target dashed."""
    width, height = size
    left, right, top, bottom = 70, 220, 30, 60
    image = Image.new("RGB", size, "white")
    draw = ImageDraw.Draw(image)
    font = ImageFont.load_default()
    runs = [
        (label, colour, results["runs"][key])
        for key, label, colour in METHODS
        if key in results["runs"]
    ]
    max_seconds = max((p["seconds"] for _, _, run in runs for p in run["curve"]), default=1.0)
    max_seconds = max(max_seconds * 1.05, 1.0)
    # the axis spans the pipeline and centralized curves; a point below it sits on the bottom edge
    # with its value written beside it
    focus = [
        p["accuracy"]
        for key, _, _ in METHODS[1:]
        for p in results["runs"].get(key, {}).get("curve", [])
    ]
    low = max(0.5, min([0.97, *focus]))
    tick = next(step for step in (0.01, 0.02, 0.05, 0.1) if (1.0 - low) / step <= 10)
    ticks = int((1.0 - low) / tick - 1e-9) + 1
    low = round(1.0 - ticks * tick, 2)

    def at(seconds: float, accuracy: float) -> tuple[float, float]:
        accuracy = max(accuracy, low)
        x = left + seconds / max_seconds * (width - left - right)
        y = top + (1.0 - accuracy) / (1.0 - low) * (height - top - bottom)
        return x, y

    draw.rectangle([left, top, width - right, height - bottom], outline="black")
    for index in range(ticks + 1):
        accuracy = low + tick * index
        x, y = at(0, accuracy)
        draw.line([x, y, width - right, y], fill=(230, 230, 230))
        draw.text((x - 40, y - 6), f"{accuracy:.0%}", fill="black", font=font)
    second_tick = next(
        step for step in (10, 20, 25, 50, 100, 200, 500, 1000) if max_seconds / step <= 8
    )
    for index in range(int(max_seconds // second_tick) + 1):
        seconds = second_tick * index
        x, y = at(seconds, low)
        draw.line([x, y, x, y + 4], fill="black")
        draw.text((x - 10, y + 8), f"{seconds:.0f}", fill="black", font=font)
    draw.text(
        (left + (width - left - right) / 2 - 60, height - 25),
        "wall time (s)",
        fill="black",
        font=font,
    )
    draw.text((5, 8), "test accuracy", fill="black", font=font)
    x0, y = at(0, TARGET_ACCURACY)
    for x in range(int(x0), int(width - right), 12):
        draw.line([x, y, x + 6, y], fill=(120, 120, 120))
    draw.text((width - right + 8, y - 6), "99% target", fill=(120, 120, 120), font=font)
    for row, (label, colour, run) in enumerate(runs):
        points = [at(p["seconds"], p["accuracy"]) for p in run["curve"]]
        if len(points) > 1:
            draw.line(points, fill=colour, width=3)
        for (x, y), point in zip(points, run["curve"], strict=True):
            draw.ellipse([x - 4, y - 4, x + 4, y + 4], fill=colour)
            if point["accuracy"] < low:
                draw.text(
                    (x + 8, y - 16), f"{point['accuracy']:.1%} (off scale)", fill=colour, font=font
                )
        legend_y = top + 30 + row * 22
        draw.line([width - right + 8, legend_y, width - right + 30, legend_y], fill=colour, width=3)
        draw.text((width - right + 36, legend_y - 6), label, fill="black", font=font)
    return image


def write_outputs(results: dict, out_dir: Path) -> str:
    """Write results.json, results.md and results.png into `out_dir`; return the markdown."""
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "results.json").write_text(json.dumps(results, indent=2) + "\n")
    text = markdown(results)
    (out_dir / "results.md").write_text(text)
    draw_curves(results).save(out_dir / "results.png", format="PNG")
    return text
