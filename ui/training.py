"""The model card's training curves, from the run's history.json (steps.lib.history, checked when read):
each worker's loss and accuracy per epoch, at its place in the run, and the average's score on the
held-out digits at each round's end (pure data and charts; ui/app.py shows them)."""

from __future__ import annotations

import altair as alt
import pandas as pd

from steps.lib.history_plot import AVERAGE_COLOUR, WORKER_COLOURS

AVERAGE = "average, held out"
SHOWN_ROUNDS = 8  # rounds named in the card's line; more are elided in the middle
CHART_HEIGHT = 190  # pixels, its axes' titles included
# the charts' key, said once under them (a legend of the charts' own takes the sidebar's width)
KEY = (
    "Black: the average after each round, on the held-out digits; a colour per worker: its epochs."
)


def curve_points(history: dict, metric: str) -> pd.DataFrame:
    """Long-form points (round, epoch over the run, line, value) of `metric`: every worker's epochs and
    the average's held-out value at its round's last epoch."""
    rows, start = [], 0
    for each in history["rounds"]:
        for shard, worker in each["workers"].items():
            for offset, value in enumerate(worker.get(metric, []), start=1):
                rows.append((each["round"], start + offset, f"worker {shard}", value))
        end = start + max(each["epochs"], 1)
        if "held_out" in each:
            rows.append((each["round"], end, AVERAGE, each["held_out"][metric]))
        start = end
    return pd.DataFrame(rows, columns=["round", "epoch", "line", "value"])


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
