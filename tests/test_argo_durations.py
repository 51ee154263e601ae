"""workflows/common/durations.py reads durations as Argo v4.1.2 does: wfv1.ParseStringToDuration
(pkg/apis/workflow/v1alpha1/utils.go) tries strconv.Atoi first (whole seconds, signed), then Go's
time.ParseDuration (a sign, then one or more decimal numbers each with a unit)."""

from __future__ import annotations

import pytest

from workflows.common.durations import DurationError, deadline_seconds, parse_duration


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("30", 30),
        (30, 30),
        ("0", 0),
        ("-30", -30),  # strconv.Atoi takes a sign
        ("+30", 30),
        ("-0", 0),
        ("15s", 15),
        ("1m30s", 90),
        ("1h2m3s", 3723),
        ("1.5h", 5400),
        (".5s", 0.5),
        ("1.s", 1),
        ("250ms", 0.25),
        ("3us", 3e-6),
        ("3µs", 3e-6),  # U+00B5 micro sign
        ("3μs", 3e-6),  # U+03BC Greek mu
        ("7ns", 7e-9),
        ("2m2m", 240),
        ("-1m", -60),
        ("+5s", 5),
        ("-1m30s", -90),  # the sign covers the whole duration
        ("0s", 0),
    ],
)
def test_durations_read_as_argo_reads_them(text: str | int, seconds: float) -> None:
    assert parse_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize(
    "text",
    [
        *("", "-", "+", "s", "5 minutes", "1d", "m", "1m-5s", "--5s", "+-5s", "5s-", ".s", "1e3s"),
        *(" 15s", "15s ", " 30", "30\n"),  # Go trims nothing: the spec would fail on the cluster
        *(
            "\u0663\u0660",
            "\u0663s",
            "3_0",
            "3_0s",
        ),  # Atoi and ParseDuration read ASCII digits only
        "9223372036854775808",  # beyond int64: Atoi refuses it, and a bare number has no unit
    ],
)
def test_what_go_refuses_is_refused(text: str) -> None:
    with pytest.raises(DurationError) as raised:
        parse_duration(text)
    assert str(raised.value) == f"time: invalid duration {text!r}"


@pytest.mark.parametrize(("value", "seconds"), [(None, None), ("", None), ("30", 30.0), (45, 45.0)])
def test_an_active_deadline_is_whole_seconds(
    value: str | int | None, seconds: float | None
) -> None:
    assert deadline_seconds(value) == seconds


@pytest.mark.parametrize("value", ["1m", "1.5", "x", " 30", "3_0", "\u0663\u0660", True])
def test_an_active_deadline_that_is_not_whole_seconds_is_refused(value: str | bool) -> None:
    """util/intstr.Int64: strconv.Atoi on a string; JSON true is no number."""
    with pytest.raises(DurationError) as raised:
        deadline_seconds(value)
    assert str(raised.value) == f"activeDeadlineSeconds must be a number of seconds, got {value!r}"
