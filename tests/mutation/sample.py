"""An independent check of `make mutation`: a seeded random sample of small changes, made with Python's
own `ast` module instead of mutmut, each run against the same test files (`make mutation-sample`, or
`python -m tests.mutation.sample [--sample N] [--seed S] [MODULE ...]`).

For each module of tests/mutation/mutation.toml (within its `functions`, when it names some) every place one
operator can change is listed: a comparison flipped or its boundary moved, an arithmetic operator
swapped, `and` for `or`, a `not` dropped, a whole number ±1, a text changed, True for False, a return
value dropped, a branch's condition negated, a keyword argument left out. N of them are drawn with the
seed (printed, so a run can be repeated), each is written into a throwaway copy of the project, and the
module's test files run against it with `pytest -x`; a change they fail on, or that runs past the time
limit (a hang), is killed. The report gives per module the sample, killed, of which by the time limit,
and every survivor with its change, to be judged against tests/mutation/mutation.toml's equivalents.
"""

from __future__ import annotations

import argparse
import ast
import copy
import random
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass
from fnmatch import fnmatch
from pathlib import Path

from tests.mutation.run import CONFIG, ROOT, copy_project, read_config, run_pytest

SWAPPED_COMPARISONS: dict[type, type] = {
    ast.Lt: ast.LtE,
    ast.LtE: ast.Lt,
    ast.Gt: ast.GtE,
    ast.GtE: ast.Gt,
    ast.Eq: ast.NotEq,
    ast.NotEq: ast.Eq,
    ast.In: ast.NotIn,
    ast.NotIn: ast.In,
    ast.Is: ast.IsNot,
    ast.IsNot: ast.Is,
}
SWAPPED_ARITHMETIC: dict[type, type] = {
    ast.Add: ast.Sub,
    ast.Sub: ast.Add,
    ast.Mult: ast.Div,
    ast.Div: ast.Mult,
    ast.FloorDiv: ast.Div,
    ast.Mod: ast.Mult,
    ast.LShift: ast.RShift,
    ast.RShift: ast.LShift,
    ast.BitAnd: ast.BitOr,
    ast.BitOr: ast.BitAnd,
}
TIME_LIMIT_FACTOR = 5  # of the unchanged module's test time, as mutmut's timeout_multiplier
TIME_LIMIT_MIN = 30.0  # seconds: the time a loaded machine may add to a short run


@dataclass(frozen=True)
class Mutant:
    index: int  # the place's number in walk order
    function: str
    line: int
    before: str
    after: str


@dataclass
class Outcome:
    mutant: Mutant
    status: str  # "killed", "timeout" or "survived"
    seconds: float


def is_docstring(node: ast.AST, parent: ast.AST | None) -> bool:
    return (
        isinstance(node, ast.Expr)
        and isinstance(node.value, ast.Constant)
        and isinstance(node.value.value, str)
        and parent is not None
        and getattr(parent, "body", [None])[0] is node
    )


def changes(node: ast.AST) -> list[ast.AST]:
    """The nodes one operator change makes of `node` (none when it is not a place for one)."""
    made: list[ast.AST] = []
    if isinstance(node, ast.Compare):
        for position, op in enumerate(node.ops):
            if type(op) in SWAPPED_COMPARISONS:
                changed = copy.deepcopy(node)
                changed.ops[position] = SWAPPED_COMPARISONS[type(op)]()
                made.append(changed)
    elif isinstance(node, ast.BinOp) and type(node.op) in SWAPPED_ARITHMETIC:
        changed = copy.deepcopy(node)
        changed.op = SWAPPED_ARITHMETIC[type(node.op)]()
        made.append(changed)
    elif isinstance(node, ast.BoolOp):
        changed = copy.deepcopy(node)
        changed.op = ast.Or() if isinstance(node.op, ast.And) else ast.And()
        made.append(changed)
    elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        made.append(copy.deepcopy(node.operand))
    elif isinstance(node, ast.Constant):
        value = node.value
        if isinstance(value, bool):
            made.append(ast.Constant(not value))
        elif isinstance(value, int):
            made += [ast.Constant(value + 1), ast.Constant(value - 1)]
        elif isinstance(value, str) and value:
            made.append(ast.Constant(f"XX{value}XX"))
    elif isinstance(node, ast.Return) and not (
        node.value is None or (isinstance(node.value, ast.Constant) and node.value.value is None)
    ):
        made.append(ast.Return(ast.Constant(None)))
    elif isinstance(node, (ast.If, ast.While)):
        changed = copy.deepcopy(node)
        changed.test = ast.UnaryOp(ast.Not(), changed.test)
        made.append(changed)
    elif isinstance(node, ast.Call) and node.keywords:
        for position in range(len(node.keywords)):
            changed = copy.deepcopy(node)
            del changed.keywords[position]
            made.append(changed)
    return made


def functions_of(tree: ast.Module) -> list[tuple[str, ast.AST]]:
    """(qualified name, def) for every function and method of the module, outermost first."""
    found = []

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.ClassDef):
                visit(child, f"{prefix}{child.name}.")
            elif isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                found.append((f"{prefix}{child.name}", child))

    visit(tree, "")
    return found


def places(tree: ast.Module, patterns: list[str]) -> list[tuple[str, ast.AST, ast.AST, str]]:
    """(function, parent, node, field) of every place in the chosen functions' bodies, in walk order;
    annotations, decorators and docstrings are left alone."""
    found = []

    def walk(function: str, parent: ast.AST) -> None:
        for field, value in ast.iter_fields(parent):
            if field in ("annotation", "returns", "decorator_list", "type_comment"):
                continue
            children = value if isinstance(value, list) else [value]
            for child in children:
                if not isinstance(child, ast.AST) or is_docstring(child, parent):
                    continue
                if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                    continue  # a nested def is its own function
                if changes(child):
                    found.append((function, parent, child, field))
                walk(function, child)

    for name, definition in functions_of(tree):
        if not patterns or any(fnmatch(name, pattern) for pattern in patterns):
            walk(name, definition)
    return found


def all_mutants(source: str, patterns: list[str]) -> list[Mutant]:
    """Every single-operator change of the chosen functions, numbered in walk order."""
    tree = ast.parse(source)
    mutants = []
    for function, _parent, node, _field in places(tree, patterns):
        for changed in changes(node):
            mutants.append(
                Mutant(
                    len(mutants),
                    function,
                    node.lineno,
                    ast.unparse(node).splitlines()[0],
                    ast.unparse(changed).splitlines()[0],
                )
            )
    return mutants


def mutated_source(source: str, patterns: list[str], index: int) -> str:
    """The module with the index-th change made (the rest of the tree as it was)."""
    tree = ast.parse(source)
    number = 0
    for _function, parent, node, field in places(tree, patterns):
        for changed in changes(node):
            if number == index:
                value = getattr(parent, field)
                if isinstance(value, list):
                    value[value.index(node)] = ast.copy_location(changed, node)
                else:
                    setattr(parent, field, ast.copy_location(changed, node))
                return ast.unparse(ast.fix_missing_locations(tree)) + "\n"
            number += 1
    raise IndexError(index)


def run_tests(workdir: Path, tests: list[str], limit: float | None) -> tuple[str, float]:
    """Run the test files in the copy: "passed", "failed" or "timeout", and the seconds it took."""
    return run_pytest(workdir, tests, limit)


def sample_module(
    module: str, entry: dict, size: int, seed: int
) -> tuple[int, list[Outcome], float]:
    """Mutate a random sample of `module` in a copy of the project: (places, outcomes, base time)."""
    source = (ROOT / module).read_text()
    mutants = all_mutants(source, entry["functions"])
    chosen = random.Random(f"{seed}:{module}").sample(mutants, min(size, len(mutants)))
    folder = Path(tempfile.mkdtemp(prefix="mutation-sample-"))
    try:
        workdir = folder / "project"
        copy_project(workdir, shared_in=folder)
        status, base = run_tests(workdir, entry["pytest_args"], None)
        if status != "passed":
            raise SystemExit(f"{module}: its tests fail unchanged; nothing to compare against")
        limit = max(TIME_LIMIT_FACTOR * base, base + TIME_LIMIT_MIN)
        outcomes = []
        for mutant in sorted(chosen, key=lambda m: m.index):
            (workdir / module).write_text(mutated_source(source, entry["functions"], mutant.index))
            status, seconds = run_tests(workdir, entry["pytest_args"], limit)
            verdict = {"failed": "killed", "passed": "survived"}.get(status, status)
            outcomes.append(Outcome(mutant, verdict, seconds))
            print(
                f"  {module}:{mutant.line} {mutant.function}: {verdict} ({seconds:.0f} s)",
                file=sys.stderr,
                flush=True,
            )
        return len(mutants), outcomes, base
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tests.mutation.sample", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("modules", nargs="*", help="modules (default: every one in mutation.toml)")
    parser.add_argument("--sample", type=int, default=25, help="changes per module (default: 25)")
    parser.add_argument("--seed", type=int, help="the draw's seed (default: a new one, printed)")
    args = parser.parse_args(argv)
    config = read_config()
    unknown = [module for module in args.modules if module not in config]
    if unknown or args.sample < 1:
        what = (
            f"not in {CONFIG.relative_to(ROOT)}: {', '.join(unknown)}"
            if unknown
            else "--sample must be at least 1"
        )
        print(f"{parser.prog}: error: {what}", file=sys.stderr)
        return 2
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(10**6)
    print(f"seed {seed}, {args.sample} changes a module", flush=True)
    rows = [("module", "places", "sampled", "killed", "(by time limit)", "survived", "minutes")]
    for module in args.modules or list(config):
        started = time.monotonic()
        total, outcomes, _base = sample_module(module, config[module], args.sample, seed)
        killed = [o for o in outcomes if o.status in ("killed", "timeout")]
        for outcome in outcomes:
            if outcome.status == "survived":
                mutant = outcome.mutant
                print(f"{module}:{mutant.line} {mutant.function} SURVIVED")
                print(f"  - {mutant.before}\n  + {mutant.after}")
        rows.append(
            (
                module,
                str(total),
                str(len(outcomes)),
                str(len(killed)),
                str(sum(o.status == "timeout" for o in outcomes)),
                str(len(outcomes) - len(killed)),
                f"{(time.monotonic() - started) / 60:.1f}",
            )
        )
        print(f"{module}: {len(killed)} of {len(outcomes)} killed", flush=True)
    widths = [max(len(row[column]) for row in rows) for column in range(len(rows[0]))]
    for row in rows:
        print(
            "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
