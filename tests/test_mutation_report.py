"""The mutation report (tests/mutation/run.py): how it counts, sorts survivors into known equivalents and the
rest, and names mutmut's mutants; and its settings (tests/mutation/mutation.toml) name files that exist. mutmut itself
runs in `make mutation`, not here."""

from __future__ import annotations

import pytest

from tests.mutation import run as mutation
from tests.mutation import sample as mutation_sample
from tests.support.project import ROOT, run_python

DIFF = """--- workflows/local/retries.py
+++ workflows/local/retries.py
@@ -1,3 +1,3 @@
 def decide(strategy, attempts):
-    if factor is not None and factor > 0:
+    if factor is not None and factor > 1:
         wait = 1
"""


def test_survivors_matching_a_listed_equivalent_are_not_counted_against_the_module() -> None:
    statuses = {
        "workflows.local.retries.x_decide__mutmut_1": "killed",
        "workflows.local.retries.x_decide__mutmut_2": "timeout",
        "workflows.local.retries.x_decide__mutmut_3": "survived",
        "workflows.local.retries.x_decide__mutmut_4": "survived",
        "workflows.local.retries.x_decide__mutmut_5": "no tests",
    }
    equivalent = mutation.Equivalent("decide", "if factor is not None and factor > 1:", "1^n is 1")
    stale = mutation.Equivalent("decide", "return None", "gone")
    report = mutation.classify(
        "workflows/local/retries.py",
        statuses,
        {"workflows.local.retries.x_decide__mutmut_3": DIFF},
        [equivalent, stale],
    )
    assert (report.killed, len(report.survivors), report.equivalent) == (2, 3, 1)
    assert report.score == 2 / 4  # killed, of the mutants that are not equivalent
    assert [s.why for s in report.survivors] == ["1^n is 1", "", ""]
    assert report.survivors[0].removed == ["if factor is not None and factor > 0:"]
    assert report.stale == [stale]
    text = mutation.render([report])
    assert (
        "workflows/local/retries.py  5        2       1             3         1           50.0%  (under 95%)"
        in text
    )
    assert "decide (3) equivalent: 1^n is 1" in text and "decide (5) NO TESTS" in text
    assert "listed as equivalent but no longer survives: return None" in text


def test_mutmut_names_map_to_functions_and_back() -> None:
    assert mutation.function_of("workflows.local.retries.x_decide__mutmut_12") == "decide"
    assert (
        mutation.function_of("workflows.local.retries.xǁ_Parserǁ_peek__mutmut_8") == "_Parser._peek"
    )
    assert mutation.mutant_patterns("steps/lib/npz.py", ["load", "Reader.*"]) == [
        "steps.lib.npz.x_load__mutmut_*",
        "steps.lib.npz.xǁReaderǁ*__mutmut_*",
    ]


def test_every_module_and_test_file_named_exists() -> None:
    config = mutation.read_config()
    assert {
        "workflows/local/plan.py",
        "workflows/local/retries.py",
        "steps/lib/averaging.py",
    } <= set(config)
    for module, entry in config.items():
        assert (ROOT / module).is_file(), module
        assert entry["tests"], module
        for test_file in entry["tests"]:
            assert (ROOT / test_file).is_file(), test_file
        for deselected in entry["pytest_args"][len(entry["tests"]) + 1 :: 2]:
            test_file, _, test = deselected.partition("::")
            assert f"def {test}(" in (ROOT / test_file).read_text(), deselected
        for equivalent in entry["equivalent"]:
            assert equivalent.why and equivalent.line, (module, equivalent)


def test_an_unknown_module_is_refused(capsys) -> None:
    assert mutation.main(["workflows/nothing.py"]) == 2
    assert capsys.readouterr().err.strip() == (
        "python -m tests.mutation: error: not in tests/mutation/mutation.toml: workflows/nothing.py"
    )


def test_the_command_runs_as_a_module_and_refuses_an_unknown_module() -> None:
    """`python -m tests.mutation` (make mutation) starts, and a module the settings do not name is one
    line and exit 2, before mutmut is reached."""
    result = run_python(
        "import runpy, sys; sys.argv = ['x', 'no/such.py']; "
        "runpy.run_module('tests.mutation.run', run_name='__main__', alter_sys=True)"
    )
    assert result.returncode == 2, result.stderr
    assert result.stderr.splitlines() == [
        "python -m tests.mutation: error: not in tests/mutation/mutation.toml: no/such.py"
    ]


SAMPLE_SOURCE = '''
def bound(x, limit=3):
    """A docstring is left alone."""
    if x > limit and x != 0:
        return x - limit
    return 0


def nothing():
    return None
'''


def test_the_sample_lists_each_single_operator_change_and_makes_exactly_it() -> None:
    mutants = mutation_sample.all_mutants(SAMPLE_SOURCE, [])
    changes = {(m.before, m.after) for m in mutants}
    assert ("x > limit", "x >= limit") in changes
    assert ("x != 0", "x == 0") in changes
    assert ("x > limit and x != 0", "x > limit or x != 0") in changes
    assert ("x - limit", "x + limit") in changes
    assert ("return x - limit", "return None") in changes
    assert not any("docstring" in m.before for m in mutants)
    assert not [m for m in mutants if m.function == "nothing"]  # return None as None: no change
    flipped = next(m for m in mutants if m.after == "x == 0")
    original: dict = {}
    exec(SAMPLE_SOURCE, original)
    mutated: dict = {}
    exec(mutation_sample.mutated_source(SAMPLE_SOURCE, [], flipped.index), mutated)
    assert (original["bound"](5), mutated["bound"](5)) == (2, 0)
    assert mutation_sample.all_mutants(SAMPLE_SOURCE, ["other"]) == []


def test_a_mutant_killed_by_its_time_limit_is_listed_with_its_change() -> None:
    """A timeout counts as killed only when the change makes a test hang: the report shows the
    change so that a reader can tell a hang from a slow test (and rerun with a larger multiplier)."""
    name = "workflows.retries.x_decide__mutmut_2"
    report = mutation.classify("workflows/local/retries.py", {name: "timeout"}, {name: DIFF}, [])
    assert (report.killed, report.survivors) == (1, [])
    assert [t.added for t in report.timeouts] == [["if factor is not None and factor > 1:"]]
    assert "decide (2) TIMEOUT, counted as killed" in mutation.render_survivors(report)
    assert "timeout_multiplier = 9\n" in mutation.mutmut_settings("steps/lib/npz.py", [], [], 9)


@pytest.mark.slow  # pytest in a fresh process
def test_a_mutant_that_timed_out_is_counted_by_its_tests_run_on_their_own(
    tmp_path, monkeypatch
) -> None:
    """mutmut's forked run can stop a mutant at its time limit when the fork, not the mutant, hangs
    (TensorFlow after fork): recheck runs the tests in a process of their own and counts what they
    say; only a mutant that hangs there too stays a timeout."""
    (tmp_path / "test_probe.py").write_text(
        "import os, time\n"
        "def test_probe():\n"
        "    name = os.environ['MUTANT_UNDER_TEST']\n"
        "    if name == 'hangs':\n"
        "        time.sleep(60)\n"
        "    assert name != 'wrong'\n"
    )
    monkeypatch.setattr(mutation, "RECHECK_MINIMUM", 3)
    names = ["same", "wrong", "hangs"]
    outcomes = mutation.recheck(tmp_path, names, ["test_probe.py"], 2)
    assert outcomes == {"same": "survived", "wrong": "killed", "hangs": "timeout"}
    assert mutation.recheck(tmp_path, [], ["test_probe.py"], 2) == {}
