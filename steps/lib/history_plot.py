"""The training history as a picture (Pillow; the steps' image has no plotting library): accuracy and loss
over the run's epochs, each worker's training curve within each round, and the average's score on the
held-out digits at each round's end, rounds marked. The Argo UI shows it as the round's artifact."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from PIL import Image, ImageDraw, ImageFont

WIDTH, HEIGHT = 960, 430
PANEL_TOP, PANEL_BOTTOM = 70, 370  # the plot areas' vertical extent
INSET = 12  # pixels between a panel's frame and its first and last points
LEFT_MARGIN, GAP = 64, 80
WORKER_COLOURS = ("#4c78a8", "#f58518", "#54a24b", "#e45756", "#72b7b2", "#b279a2", "#9d755d")
AVERAGE_COLOUR = "#111111"
GRID = "#e3e3e3"
SHOWN_WORKERS = 6  # named in the legend
TICKS = 5

Point = tuple[float, float]
# load_default gives a bitmap font where Pillow was built without FreeType
Font = ImageFont.FreeTypeFont | ImageFont.ImageFont


@dataclass(frozen=True)
class Series:
    points: Sequence[Point]
    colour: str
    width: int
    dots: bool = False


def positions(rounds: Sequence[dict]) -> tuple[list[int], list[int]]:
    """Each round's first x position less one and its last: epochs over the run, or round numbers
    when no round says how many epochs it trained."""
    if not any(each["epochs"] for each in rounds):
        return [each["round"] - 1 for each in rounds], [each["round"] for each in rounds]
    starts, ends, at = [], [], 0
    for each in rounds:
        starts.append(at)
        at += each["epochs"]
        ends.append(at)
    return starts, ends


def panel_series(rounds: Sequence[dict], metric: str) -> list[Series]:
    """The workers' curves (one per worker and round) and the average's held-out line for `metric`."""
    starts, ends = positions(rounds)
    shards = sorted({shard for each in rounds for shard in each["workers"]}, key=_shard_order)
    colour = {shard: WORKER_COLOURS[i % len(WORKER_COLOURS)] for i, shard in enumerate(shards)}
    series = []
    for each, start in zip(rounds, starts, strict=True):
        for shard, entry in each["workers"].items():
            values = entry.get(metric, [])
            points = [(start + index + 1, value) for index, value in enumerate(values)]
            series.append(Series(points, colour[shard], 1, dots=len(points) == 1))
    held = [
        (end, each["held_out"][metric])
        for each, end in zip(rounds, ends, strict=True)
        if "held_out" in each
    ]
    series.append(Series(held, AVERAGE_COLOUR, 3, dots=True))
    return series


def _shard_order(shard: str) -> tuple[int, str]:
    return (int(shard), "") if shard.isdigit() else (1 << 30, shard)


def _span(values: Iterable[float], floor: float | None, ceiling: float | None) -> list[float]:
    """Round tick values covering `values` (a step of 1, 2 or 5 times a power of ten, about TICKS of
    them), kept within `floor` and `ceiling`."""
    values = list(values)
    low, high = (min(values), max(values)) if values else (0.0, 1.0)
    if high - low < 1e-9:
        low, high = low - 0.05, high + 0.05
    rough = (high - low) / (TICKS - 1)
    power = 10 ** math.floor(math.log10(rough))
    step = next(m * power for m in (1, 2, 5, 10) if m * power >= rough)
    first, last = math.floor(low / step), math.ceil(high / step)
    ticks = [index * step for index in range(first, last + 1)]
    kept = [
        t
        for t in ticks
        if (floor is None or t >= floor - 1e-9) and (ceiling is None or t <= ceiling + 1e-9)
    ]
    return kept if len(kept) >= 2 else ticks


def _draw_panel(
    draw: ImageDraw.ImageDraw,
    left: int,
    right: int,
    title: str,
    series: list[Series],
    x_range: tuple[float, float],
    ticks: list[float],
    spans: list[tuple[int, int, str]],
    font: Font,
) -> None:
    (x_low, x_high), (y_low, y_high) = x_range, (ticks[0], ticks[-1])

    def at(point: Point) -> Point:
        x, y = point
        return (
            left + INSET + (x - x_low) / ((x_high - x_low) or 1) * (right - left - 2 * INSET),
            PANEL_BOTTOM - (y - y_low) / ((y_high - y_low) or 1) * (PANEL_BOTTOM - PANEL_TOP),
        )

    draw.text((left, PANEL_TOP - 26), title, fill="black", font=font)
    for value in ticks:
        _, y = at((x_low, value))
        draw.line((left, y, right, y), fill=GRID)
        draw.text((left - 6, y), f"{value:.4g}", fill="#555555", font=font, anchor="rm")
    for start, end, label in spans:  # each round's end dashed, its name under its epochs
        (start_x, _), (end_x, _) = at((start, y_low)), at((end, y_low))
        for top in range(PANEL_TOP, PANEL_BOTTOM, 8):
            draw.line((end_x, top, end_x, min(top + 4, PANEL_BOTTOM)), fill="#bbbbbb")
        if end_x - start_x >= draw.textlength(label, font=font) or len(spans) == 1:
            middle = (start_x + end_x) / 2 if end - start > 1 else end_x
            draw.text((middle, PANEL_BOTTOM + 4), label, fill="#777777", font=font, anchor="ma")
    draw.rectangle((left, PANEL_TOP, right, PANEL_BOTTOM), outline="#999999")
    for each in series:
        points = [at(point) for point in each.points]
        if len(points) > 1:
            draw.line(points, fill=each.colour, width=each.width, joint="curve")
        if each.dots:
            radius = each.width + 1
            for x, y in points:
                draw.ellipse((x - radius, y - radius, x + radius, y + radius), fill=each.colour)


def draw_history(history: dict) -> Image.Image:
    """The history's accuracy (left) and loss (right) over the run, WIDTH x HEIGHT whatever it holds."""
    image = Image.new("RGB", (WIDTH, HEIGHT), "white")
    draw = ImageDraw.Draw(image)
    font = ImageFont.load_default(size=13)
    rounds = history["rounds"]
    starts, ends = positions(rounds)
    x_range = (min(starts, default=0), max(ends, default=1))
    epochs_axis = any(each["epochs"] for each in rounds)
    spans = [
        (start, end, f"round {each['round']}")
        for each, start, end in zip(rounds, starts, ends, strict=True)
    ]
    width = (WIDTH - LEFT_MARGIN - GAP - 20) // 2
    for index, (metric, floor, ceiling) in enumerate((("accuracy", 0.0, 1.0), ("loss", 0.0, None))):
        series = panel_series(rounds, metric)
        values = [y for each in series for _, y in each.points]
        left = LEFT_MARGIN + index * (width + GAP)
        _draw_panel(
            draw,
            left,
            left + width,
            metric,
            series,
            x_range,
            _span(values, floor, ceiling),
            spans,
            font,
        )
    axis = "epochs over the run" if epochs_axis else "rounds"
    draw.text((WIDTH // 2, PANEL_BOTTOM + 24), axis, fill="#555555", font=font, anchor="ma")
    _legend(draw, rounds, font)
    if not rounds:
        draw.text((WIDTH // 2, HEIGHT // 2), "no round yet", fill="#777777", font=font, anchor="mm")
    return image


def _legend(draw: ImageDraw.ImageDraw, rounds: Sequence[dict], font: Font) -> None:
    shards = sorted({shard for each in rounds for shard in each["workers"]}, key=_shard_order)
    digits = next((each["held_out"]["digits"] for each in rounds if "held_out" in each), None)
    entries = [(AVERAGE_COLOUR, f"the average, on {digits} held-out digits" if digits else "")]
    entries += [
        (WORKER_COLOURS[i % len(WORKER_COLOURS)], f"worker {shard} (training)")
        for i, shard in enumerate(shards[:SHOWN_WORKERS])
    ]
    if len(shards) > SHOWN_WORKERS:
        entries.append(("#777777", f"and {len(shards) - SHOWN_WORKERS} more workers"))
    x = LEFT_MARGIN
    for colour, label in entries:
        if not label:
            continue
        draw.line((x, 16, x + 18, 16), fill=colour, width=3)
        draw.text((x + 24, 16), label, fill="black", font=font, anchor="lm")
        x += 24 + int(draw.textlength(label, font=font)) + 18
