"""The model card's training curves, from the run's history.json (steps.lib.history, checked when read):
each worker's loss and accuracy per epoch, at its place in the run, and the average's score on the
held-out digits at each round's end (pure data and charts; ui/app.py shows them)."""

from __future__ import annotations

from collections import Counter

import altair as alt
import pandas as pd

from steps.lib.history_plot import AVERAGE_COLOUR, WORKER_COLOURS

AVERAGE = "average, held out"
# Points a chart draws, in all: the largest run the docs allow (98 rounds of 10 workers of 30 epochs)
# has 29,400 a metric, and a full history.json (1 MiB) 130,000; as chart rows each over the page's
# 1 MB message bound. Every round's average is kept; each worker's epochs are thinned.
MAX_POINTS = 4000
SHOWN_ROUNDS = 8  # rounds named in the card's line; more are elided in the middle
CHART_HEIGHT = 190  # pixels, its axes' titles included
# the charts' key, said once under them (a legend of the charts' own takes the sidebar's width)
KEY = (
    "Black: the average after each round, on the held-out digits; a colour per worker: its epochs."
)


def curve_points(history: dict, metric: str) -> pd.DataFrame:
    """Long-form points (round, epoch over the run, line, value) of `metric`: the average's held-out
    value at every round's last epoch, and each worker's epochs, thinned so that the chart holds at
    most MAX_POINTS (worker_quotas, kept_epochs)."""
    rounds = history["rounds"]
    quotas = worker_quotas(rounds)
    rows, start, seen = [], 0, Counter[str]()
    for each in rounds:
        for shard, worker in each["workers"].items():
            values = worker.get(metric, [])
            for epoch in kept_epochs(len(values), quotas[shard][seen[shard]]):
                rows.append((each["round"], start + epoch, f"worker {shard}", values[epoch - 1]))
            seen[shard] += 1
        end = start + max(each["epochs"], 1)
        if "held_out" in each:
            rows.append((each["round"], end, AVERAGE, each["held_out"][metric]))
        start = end
    return pd.DataFrame(rows, columns=["round", "epoch", "line", "value"])


def worker_quotas(rounds: list[dict]) -> dict[str, list[int]]:
    """For each worker, how many of its epochs each of its rounds may draw: an even share of what
    MAX_POINTS leaves after every round's average; with fewer points than rounds, one in some
    rounds (evenly spaced) and none in the others."""
    takes = Counter(shard for each in rounds for shard in each["workers"])
    budget = max(0, MAX_POINTS - len(rounds)) // max(1, len(takes))
    quotas = {}
    for shard, count in takes.items():
        if budget >= count:
            quotas[shard] = [budget // count] * count
        else:
            chosen = {round(index * count / budget) for index in range(budget)}
            quotas[shard] = [int(index in chosen) for index in range(count)]
    return quotas


def kept_epochs(epochs: int, quota: int) -> list[int]:
    """Which of a worker's `epochs` in one round are drawn (1-based): all within `quota`, else
    `quota` of them evenly spaced, the first and last among them (the last alone for a quota of
    one: where the round ended)."""
    if quota <= 0:
        return []
    if epochs <= quota:
        return list(range(1, epochs + 1))
    if quota == 1:
        return [epochs]
    return sorted({1 + round(index * (epochs - 1) / (quota - 1)) for index in range(quota)})


def curve_chart(history: dict, metric: str) -> alt.Chart:
    """`metric` over the run's epochs: a line per worker and round, and the average's, with points (a
    round of one epoch is a point); the vertical axis spans the values, not 0 to 1."""
    points = curve_points(history, metric)
    lines = sorted(set(points["line"]) - {AVERAGE}, key=lambda line: (len(line), line))
    palette = [WORKER_COLOURS[index % len(WORKER_COLOURS)] for index in range(len(lines))]
    colours = alt.Scale(domain=[AVERAGE, *lines], range=[AVERAGE_COLOUR, *palette])
    base = alt.Chart(points).encode(
        # whole epochs: one epoch alone is a domain of one value, which Vega labels "1.000000"
        x=alt.X("epoch:Q", title="epoch over the run", axis=alt.Axis(tickMinStep=1, format="d")),
        y=alt.Y("value:Q", title=metric, scale=alt.Scale(zero=False)),
        color=alt.Color("line:N", scale=colours, legend=None),  # said in the caption
        tooltip=["round:Q", "epoch:Q", "line:N", alt.Tooltip("value:Q", format=".4f")],
    )
    workers = base.transform_filter(alt.datum.line != AVERAGE)
    average = base.transform_filter(alt.datum.line == AVERAGE)
    return (
        workers.mark_line(point=True, strokeWidth=1).encode(detail="round:N")
        + average.mark_line(point=True, strokeWidth=3)
    ).properties(height=CHART_HEIGHT)


def bar_chart(
    table: pd.DataFrame, y_label: str, height: int, width: int | None = None
) -> alt.Chart:
    """A bar per digit (the table's index) of its one column. Unlike st.bar_chart's, whose interval
    selection is bound to the scales (zoom and pan), the mouse wheel over it scrolls the page."""
    ((column, values),) = table.items()
    data = pd.DataFrame({"digit": table.index.astype(str), str(column): values.to_numpy()})
    value = alt.Y(field=str(column), type="quantitative", title=y_label)
    chart = (
        alt.Chart(data)
        .mark_bar()
        .encode(
            x=alt.X("digit:O", title="digit", axis=alt.Axis(labelAngle=0)),
            y=value,
            tooltip=["digit:O", alt.Tooltip(field=str(column), type="quantitative", format=".4g")],
        )
    )
    return chart.properties(height=height, **({"width": width} if width else {}))


def rounds_line(history: dict) -> str:
    """The rounds in a line: how many, their epochs, the held-out digits, each round's score and time."""
    rounds = history["rounds"]
    epochs = sorted({each["epochs"] for each in rounds})
    epochs_text = f" of {epochs[0]} epochs" if len(epochs) == 1 else ""
    scored = next((each["held_out"]["digits"] for each in rounds if "held_out" in each), None)
    held = f"; held out of training: {scored} digits" if scored else ""
    parts = [round_text(each) for each in rounds]
    if len(parts) > SHOWN_ROUNDS:
        parts = [*parts[:3], "…", *parts[-(SHOWN_ROUNDS - 4) :]]
    said = "; ".join(parts)
    plural = "s" if len(rounds) != 1 else ""
    return f"{len(rounds)} round{plural}{epochs_text}{held}. {said[:1].upper()}{said[1:]}."


def round_text(each: dict) -> str:
    score = f": {each['held_out']['accuracy']:.2%}" if "held_out" in each else ""
    took = f" in {each['seconds']:.0f} s" if each["seconds"] is not None else ""
    return f"round {each['round']}{score}{took}"
