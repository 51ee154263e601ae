"""workflows/common/depends.py against the Argo v4.1.2 rules it ports: how `depends` and `dependencies` are read
(common/ancestry.go:GetTaskDependencies and expandDependency; docs/enhanced-depends-logic.md) and evaluated
(controller/dag.go:evaluateDependsLogic with the results of TaskResults), and a fan-out's phase
(dag.go:executeDAGTask). Each case has results that only the rule itself gets right: a task whose phase is
each of the others, a fan-out whose children disagree."""

from __future__ import annotations

import pytest

from workflows.common import depends
from workflows.common.depends import All, Any_, DependsError, Not, TaskResults, Term, holds, parse
from workflows.local.dag import Dag, TaskOutcome, read_dag, should_run

PHASES = ("Succeeded", "Failed", "Error", "Skipped", "Omitted")


def one(phase: str, children: tuple[str, ...] | None = None) -> dict[str, TaskResults]:
    return {"a": TaskResults(phase, children)}


# ---- reading: the grammar of enhanced depends logic --------------------------------------------------


@pytest.mark.parametrize(
    ("text", "tree"),
    [
        ("a", Term("a", None)),
        ("a.Omitted", Term("a", "Omitted")),
        ("train-round-1.AnySucceeded", Term("train-round-1", "AnySucceeded")),
        ("a_b.AllFailed", Term("a_b", "AllFailed")),
        ("!a", Not(Term("a", None))),
        ("!!a.Failed", Not(Not(Term("a", "Failed")))),
        ("a && b && c", All((Term("a", None), Term("b", None), Term("c", None)))),
        ("a || b || c", Any_((Term("a", None), Term("b", None), Term("c", None)))),
        # && binds tighter than ||, on either side
        ("a && b || c", Any_((All((Term("a", None), Term("b", None))), Term("c", None)))),
        ("a || b && c", Any_((Term("a", None), All((Term("b", None), Term("c", None)))))),
        # parentheses, then more after them
        ("(a || b) && c", All((Any_((Term("a", None), Term("b", None))), Term("c", None)))),
        ("(a) || (b) && c", Any_((Term("a", None), All((Term("b", None), Term("c", None)))))),
        ("!(a && b) || c", Any_((Not(All((Term("a", None), Term("b", None)))), Term("c", None)))),
        ("((a))", Term("a", None)),
        # expr's words for the operators
        ("not a and b or c", Any_((All((Not(Term("a", None)), Term("b", None))), Term("c", None)))),
        ("a&&!b.Failed", All((Term("a", None), Not(Term("b", "Failed"))))),
        ("  a  ||b  ", Any_((Term("a", None), Term("b", None)))),
        ("", None),
        ("   ", None),
    ],
)
def test_depends_reads_as_argo_reads_it(text: str, tree: depends.Expression) -> None:
    assert parse(text) == tree


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("a &&", "depends 'a &&' ends too early"),
        ("!", "depends '!' ends too early"),
        ("a.Finished", "unknown task result 'Finished' in depends 'a.Finished'"),
        ("(a || b", "unbalanced parentheses in depends '(a || b'"),
        ("(a b)", "unbalanced parentheses in depends '(a b)'"),
        ("a b", "unexpected 'b' in depends 'a b'"),
        ("a b c", "unexpected 'b' in depends 'a b c'"),  # the first token left over
        ("a)", "unexpected ')' in depends 'a)'"),
        ("&& a", "unexpected '&&' in depends '&& a'"),
        ("a || )", "unexpected ')' in depends 'a || )'"),
        ("a $ b", "cannot read depends 'a $ b' at ' $ b'"),
        # inside parentheses the message still quotes the whole expression
        ("(a &&)", "unexpected ')' in depends '(a &&)'"),
        ("!(a ||", "depends '!(a ||' ends too early"),
    ],
)
def test_unreadable_depends_are_refused_with_where(text: str, message: str) -> None:
    with pytest.raises(DependsError) as raised:
        parse(text)
    assert str(raised.value) == message


def test_dependencies_are_anded_and_depends_wins() -> None:
    """GetTaskDependencies: `depends` when set, else the `dependencies` list joined by &&."""
    assert depends.expression_text({"dependencies": ["a", "b", "c"]}) == "a && b && c"
    assert depends.expression_text({"depends": "a.Failed", "dependencies": ["b"]}) == "a.Failed"
    assert depends.expression_text({"depends": "", "dependencies": ["b"]}) == "b"
    assert depends.expression_text({}) == ""
    assert depends.expression_text({"dependencies": None}) == ""


def test_every_task_named_is_waited_for() -> None:
    assert depends.tasks_named(parse("!(a.Failed && b) || c.AnySucceeded")) == {"a", "b", "c"}
    assert depends.tasks_named(parse("a || a.Failed")) == {"a"}
    assert depends.tasks_named(None) == set()


# ---- evaluating: what each result means ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("result", "true_for"),
    [
        ("Succeeded", {"Succeeded"}),
        ("Failed", {"Failed"}),
        ("Errored", {"Error"}),
        ("Skipped", {"Skipped"}),
        ("Omitted", {"Omitted"}),
        ("Daemoned", set()),  # the pipeline has no daemon steps
    ],
)
def test_each_result_is_true_for_its_phase_only(result: str, true_for: set[str]) -> None:
    for phase in PHASES:
        assert holds(parse(f"a.{result}"), one(phase)) is (phase in true_for), phase


def test_a_bare_name_means_succeeded_skipped_or_daemoned() -> None:
    """expandDependency: `a` is `(a.Succeeded || a.Skipped || a.Daemoned)`."""
    assert {phase for phase in PHASES if holds(parse("a"), one(phase))} == {"Succeeded", "Skipped"}


@pytest.mark.parametrize(
    ("continue_on", "passes"),
    [
        ({}, {"Succeeded", "Skipped"}),
        ({"failed": True}, {"Succeeded", "Skipped", "Failed"}),
        ({"error": True}, {"Succeeded", "Skipped", "Error"}),
        ({"failed": True, "error": True}, {"Succeeded", "Skipped", "Failed", "Error"}),
        ({"failed": False, "error": False}, {"Succeeded", "Skipped"}),
    ],
)
def test_continue_on_widens_a_bare_name_by_what_it_names(continue_on: dict, passes: set) -> None:
    """expandDependency: continueOn.failed adds a.Failed, continueOn.error adds a.Errored; never Omitted."""
    passed = {phase for phase in PHASES if holds(parse("a"), one(phase), {"a": continue_on})}
    assert passed == passes


def test_continue_on_widens_a_bare_name_wherever_it_stands() -> None:
    """expandDependency rewrites every bare name, also under `!`, `&&` and `||`."""
    failed = {"a": TaskResults("Failed"), "b": TaskResults("Succeeded")}
    tolerant = {"a": {"failed": True}}
    assert holds(parse("a && b"), failed, tolerant) and not holds(parse("a && b"), failed)
    assert not holds(parse("!a"), failed, tolerant) and holds(parse("!a"), failed)
    assert holds(parse("(a || a.Omitted) && b"), failed, tolerant)


def test_continue_on_does_not_change_a_named_result() -> None:
    assert not holds(parse("a.Succeeded"), one("Failed"), {"a": {"failed": True}})
    assert not holds(parse("a"), {"a": TaskResults("Failed")}, {"b": {"failed": True}})


@pytest.mark.parametrize(
    ("children", "any_succeeded", "all_failed"),
    [
        (("Succeeded", "Failed"), True, False),
        (("Failed", "Succeeded"), True, False),
        (("Failed", "Failed", "Failed"), False, True),
        (("Failed", "Error"), False, False),  # allFailed && childPhase == NodeFailed
        (("Failed", "Skipped"), False, False),
        (("Succeeded",), True, False),
        ((), False, False),
    ],
)
def test_a_fan_outs_group_results_read_its_children(
    children: tuple[str, ...], any_succeeded: bool, all_failed: bool
) -> None:
    results = one(depends.group_phase(children), children)
    assert holds(parse("a.AnySucceeded"), results) is any_succeeded
    assert holds(parse("a.AllFailed"), results) is all_failed
    assert holds(parse("a.AnySucceeded || a.AllFailed"), results) is (any_succeeded or all_failed)


def test_a_single_node_has_no_group_results() -> None:
    for phase in PHASES:
        assert not TaskResults(phase).result("AnySucceeded")
        assert not TaskResults(phase).result("AllFailed")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("!a", False),
        ("!b", True),
        ("not b", True),
        ("a && b", False),
        ("a and b", False),
        ("a || b", True),
        ("a or b", True),
        ("b || a", True),
        ("b.Failed && !a.Failed", True),
        ("!(a && b)", True),
        ("(a || b) && b.Failed", True),
        ("(a || b) && c.Omitted", True),
        ("(a || b) && !c.Omitted", False),
        ("b.Failed || b.Errored && a.Failed", True),
        ("(b.Failed || b.Errored) && a.Failed", False),
        ("a && b.Failed && c.Omitted", True),
        ("a && b.Failed && c", False),
        ("c.Omitted || b", True),
        ("b || c", False),
    ],
)
def test_expressions_evaluate_by_each_tasks_results(text: str, expected: bool) -> None:
    results = {
        "a": TaskResults("Succeeded"),
        "b": TaskResults("Failed"),
        "c": TaskResults("Omitted"),
    }
    assert holds(parse(text), results) is expected


def test_an_empty_expression_holds() -> None:
    assert holds(None, {}) is True


@pytest.mark.parametrize(
    ("children", "phase"),
    [
        ((), "Succeeded"),
        (("Succeeded", "Skipped", "Omitted"), "Succeeded"),
        (("Error", "Failed"), "Failed"),  # the LAST child that failed or errored
        (("Failed", "Error", "Succeeded"), "Error"),
        (("Failed",), "Failed"),
    ],
)
def test_a_fan_outs_phase_is_its_last_failed_or_errored_child(children: tuple, phase: str) -> None:
    assert depends.group_phase(children) == phase


# ---- the `dependencies:` list form, through the DAG -------------------------------------------------


def dag_of(*tasks: dict) -> Dag:
    """A dag template of these tasks, as the runner reads it."""
    return read_dag({"name": "main", "dag": {"tasks": list(tasks)}})


def test_the_dependencies_list_form_waits_for_each_and_needs_all() -> None:
    dag = dag_of(
        {"name": "a"},
        {"name": "b"},
        {"name": "c", "dependencies": ["a", "b"]},
        {"name": "d", "dependencies": ["a"]},
    )
    assert dag.needs["c"] == {"a", "b"} and dag.targets == ("c", "d")
    outcomes = {"a": TaskOutcome("Succeeded")}
    assert should_run(dag, "c", outcomes) is None  # b has not ended
    assert should_run(dag, "d", outcomes) is True
    assert should_run(dag, "c", outcomes | {"b": TaskOutcome("Skipped")}) is True
    assert should_run(dag, "c", outcomes | {"b": TaskOutcome("Failed")}) is False


def test_the_dependencies_list_form_honours_continue_on() -> None:
    dag = dag_of(
        {"name": "a", "continueOn": {"error": True}},
        {"name": "b", "dependencies": ["a"]},
    )
    assert should_run(dag, "b", {"a": TaskOutcome("Error")}) is True
    assert should_run(dag, "b", {"a": TaskOutcome("Failed")}) is False


def test_continue_on_holds_for_each_of_several_dependencies() -> None:
    dag = dag_of(
        {"name": "a", "continueOn": {"failed": True}},
        {"name": "b"},
        {"name": "c", "dependencies": ["a", "b"]},
    )
    outcomes = {"a": TaskOutcome("Failed"), "b": TaskOutcome("Succeeded")}
    assert should_run(dag, "c", outcomes) is True
    assert should_run(dag, "c", outcomes | {"b": TaskOutcome("Failed")}) is False


# ---- ancestry.go as validation reads it: the same expansion the runner evaluates ------------------------


@pytest.mark.parametrize(
    "continue_on",
    [
        None,
        {},
        {"failed": True},
        {"error": True},
        {"failed": True, "error": True},
        {"error": False},
    ],
)
def test_the_expanded_text_means_what_the_bare_name_means(continue_on: dict | None) -> None:
    """One rule in one place: the text validation reads (expandDependency) and the runner's reading of a
    bare name with the same continueOn hold for exactly the same phases."""
    text = depends.expand_dependency("a", continue_on)
    for phase in PHASES:
        assert holds(parse(text), one(phase)) is holds(parse("a"), one(phase), {"a": continue_on})


def test_depends_logic_expands_dependencies_with_each_ones_continue_on() -> None:
    """getTaskDependsLogic: `depends` as written; else each dependency expanded with its own continueOn."""
    tasks = {"a": {"continueOn": {"error": True}}, "b": {}}
    task = {"dependencies": ["a", "b"]}
    assert depends.depends_logic(task, lambda name: tasks.get(name, {})) == (
        "(a.Succeeded || a.Skipped || a.Daemoned || a.Errored) && (b.Succeeded || b.Skipped || b.Daemoned)"
    )
    assert (
        depends.depends_logic({"depends": "a.Failed", "dependencies": ["b"]}, tasks.get)
        == "a.Failed"
    )
    assert depends.depends_logic({}, tasks.get) == ""


def test_task_dependencies_reads_names_as_the_regular_expression_does() -> None:
    """GetTaskDependencies: every task named, items-based (.AnySucceeded, .AllFailed) winning over the rest;
    words the expression language would not read still name tasks (validation never parses)."""
    assert depends.task_dependencies("a && b.AnySucceeded && (c.Failed || c.AllFailed) && !d") == {
        "a": False,
        "b": True,
        "c": True,
        "d": False,
    }
    assert depends.task_dependencies("c.AllFailed || c.Failed") == {"c": True}
    assert depends.task_dependencies("a.Succeeded || !b.Failed") == {"a": False, "b": False}
    assert depends.task_dependencies("a b") == {"a": False, "b": False}


def test_invalid_result_names_the_first_result_argo_does_not_know() -> None:
    """ValidateTaskResults: each `task.Result` must be one of the eight results."""
    assert depends.invalid_result("a.Succeeded && b.AllFailed || c") is None
    assert depends.invalid_result("a.Succeeded && b.Finished && c.Nope") == ("b", "Finished")
    assert depends.invalid_result("") is None
