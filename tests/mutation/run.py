"""Mutation testing of the modules that hold the project's rules (`make mutation`, or
`python -m tests.mutation [MODULE ...]`).

mutmut changes one module a little at a time (a flipped comparison, a constant +1, `and` for `or`, a
dropped argument) and runs the tests that cover the changed function after each change; a change no test
notices "survives". Each module runs on its own in a throwaway copy of the project, against only the test
files tests/mutation/mutation.toml names for it, so one module takes minutes. The report gives per module: mutants,
killed, survived, the survivors known to be equivalent (tests/mutation/mutation.toml says why for each), and the
share of the others killed; then every survivor with its change. A mutant mutmut stops at its time limit is
run again in a process of its own and counted by what its tests say there (see recheck). Exit 1 when a
module is under the target.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import tomllib
from dataclasses import dataclass, field
from fnmatch import fnmatch
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CONFIG = Path(__file__).with_name("mutation.toml")
MUTMUT = Path(sys.executable).with_name("mutmut")
TARGET = 0.95  # of the non-equivalent mutants, killed
TIMEOUT_MULTIPLIER = 5
DETECTED = ("killed", "timeout", "segfault", "caught by type check")
RESULT_LINE = re.compile(r"^\s*(?P<name>\S+): (?P<status>.+?)\s*$")
MUTANT_NAME = re.compile(r"\.x[_ǁ](?P<function>.+)__mutmut_\d+$")


class UsageError(Exception):
    """A module or setting the runner cannot use."""


@dataclass(frozen=True)
class Equivalent:
    """A survivor no test can tell from the original: the same behaviour, by the reason given."""

    function: str
    line: str  # the mutated line, as the mutant has it (stripped)
    why: str


@dataclass
class Survivor:
    name: str
    status: str
    function: str
    removed: list[str]
    added: list[str]
    why: str = ""  # set when it is a known equivalent


@dataclass
class ModuleReport:
    module: str
    statuses: dict[str, str] = field(default_factory=dict)
    survivors: list[Survivor] = field(default_factory=list)
    timeouts: list[Survivor] = field(
        default_factory=list
    )  # killed by the time limit, with their change
    stale: list[Equivalent] = field(default_factory=list)  # listed equivalents not seen surviving

    @property
    def killed(self) -> int:
        return sum(status in DETECTED for status in self.statuses.values())

    @property
    def equivalent(self) -> int:
        return sum(bool(survivor.why) for survivor in self.survivors)

    @property
    def score(self) -> float:
        """Killed, of the mutants that are not equivalent (1.0 when there are none)."""
        judged = len(self.statuses) - self.equivalent
        return self.killed / judged if judged else 1.0


def read_config(path: Path = CONFIG) -> dict[str, dict]:
    """{module: {"tests": [...], "pytest_args": [...], "functions": [...], "equivalent": [...]}} from
    tests/mutation/mutation.toml; no `functions` means every function of the module. pytest_args are the test
    files and a `--deselect` for each test of `deselect`."""
    modules = tomllib.loads(path.read_text())["modules"]
    return {
        module: {
            "tests": list(entry["tests"]),
            "pytest_args": [
                *entry["tests"],
                *(arg for test in entry.get("deselect", []) for arg in ("--deselect", test)),
            ],
            "functions": list(entry.get("functions", [])),
            "equivalent": [
                Equivalent(e["function"], e["line"].strip(), e["why"])
                for e in entry.get("equivalent", [])
            ],
        }
        for module, entry in modules.items()
    }


def project_files() -> list[str]:
    """The project's files as git sees them (tracked, and new ones not ignored), as they are on disk."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        check=True,
    ).stdout.decode()
    return [name for name in listed.split("\0") if name and (ROOT / name).is_file()]


def mutmut_settings(
    module: str,
    tests: list[str],
    top_level: list[str],
    timeout_multiplier: int = TIMEOUT_MULTIPLIER,
) -> str:
    """The [tool.mutmut] table for one module: mutate only it, select only its tests."""
    package = module.split("/")[0]
    others = sorted(name for name in top_level if name != package)

    def toml_list(values: list[str]) -> str:
        return "[" + ", ".join(f'"{value}"' for value in values) + "]"

    return (
        "\n[tool.mutmut]\n"
        f"source_paths = {toml_list([package])}\n"
        f"only_mutate = {toml_list([module])}\n"
        f"pytest_add_cli_args_test_selection = {toml_list(tests)}\n"
        f"also_copy = {toml_list(others)}\n"
        "use_git_change_detection = false\n"
        # a mutant that makes a test loop for ever is killed by its timeout: 5x the test's own time,
        # not mutmut's 15x, keeps a reader's hour of waiting to minutes
        f"timeout_multiplier = {timeout_multiplier}\n"
    )


def prepare(module: str, tests: list[str], workdir: Path, timeout_multiplier: int) -> None:
    """A copy of the project in `workdir` whose pyproject.toml tells mutmut what to do."""
    files = copy_project(workdir, shared_in=workdir)  # mutmut runs the tests in workdir/mutants
    top_level = sorted({name.split("/")[0] for name in files})
    pyproject = workdir / "pyproject.toml"
    settings = mutmut_settings(module, tests, top_level, timeout_multiplier)
    pyproject.write_text(pyproject.read_text() + settings)


def copy_project(workdir: Path, shared_in: Path) -> list[str]:
    """Copy the project's files into `workdir`, and link the tests' reference data (`shared/`, beside the
    project) into `shared_in`, the parent of the folder the tests run in. The files copied."""
    files = project_files()
    for name in files:
        target = workdir / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / name, target)
    shared = ROOT.parent / "shared"
    if shared.is_dir():
        (shared_in / "shared").symlink_to(shared)
    return files


def mutmut(workdir: Path, *arguments: str, log: Path | None = None) -> str:
    """Run mutmut in `workdir`; its output (or, with `log`, nothing: the output goes there)."""
    command = [str(MUTMUT), *arguments]
    if log is None:
        return subprocess.run(
            command, cwd=workdir, capture_output=True, text=True, check=True
        ).stdout
    with log.open("w") as out:
        subprocess.run(command, cwd=workdir, stdout=out, stderr=subprocess.STDOUT, check=True)
    return ""


def changed_lines(diff: str) -> tuple[list[str], list[str]]:
    """The removed and added lines of a unified diff, stripped."""
    lines = diff.splitlines()
    removed = [
        line[1:].strip() for line in lines if line.startswith("-") and not line.startswith("---")
    ]
    added = [
        line[1:].strip() for line in lines if line.startswith("+") and not line.startswith("+++")
    ]
    return removed, added


def mutant_patterns(module: str, functions: list[str]) -> list[str]:
    """mutmut's names for the mutants of these functions (`Class.method` for a method; `*` matches any)."""
    prefix = module.removesuffix(".py").replace("/", ".")
    patterns = []
    for function in functions:
        owner, _, method = function.rpartition(".")
        patterns.append(
            f"{prefix}.xǁ{owner}ǁ{method}__mutmut_*"
            if owner
            else f"{prefix}.x_{function}__mutmut_*"
        )
    return patterns


def function_of(name: str) -> str:
    """`workflows.local.retries.x_decide__mutmut_3` is `decide`; a method's is `Class.method`."""
    match = MUTANT_NAME.search(name)
    return match.group("function").replace("ǁ", ".") if match else name


def classify(
    module: str, statuses: dict[str, str], diffs: dict[str, str], equivalents: list[Equivalent]
) -> ModuleReport:
    """Sort the survivors into known equivalents (with their reason) and the rest."""
    report = ModuleReport(module, statuses)
    matched: set[Equivalent] = set()
    for name, status in statuses.items():
        if status == "timeout":
            removed, added = changed_lines(diffs.get(name, ""))
            report.timeouts.append(Survivor(name, status, function_of(name), removed, added))
        if status in DETECTED:
            continue
        removed, added = changed_lines(diffs.get(name, ""))
        survivor = Survivor(name, status, function_of(name), removed, added)
        for equivalent in equivalents:
            if equivalent.function == survivor.function and equivalent.line in added:
                survivor.why = equivalent.why
                matched.add(equivalent)
                break
        report.survivors.append(survivor)
    report.stale = [equivalent for equivalent in equivalents if equivalent not in matched]
    return report


RECHECK_MINIMUM = 60.0  # seconds: what a loaded machine may add to a short test run


def run_alone(mutants: Path, name: str, tests: list[str], limit: float) -> tuple[str, float]:
    """Run the tests in a fresh process with mutant `name` active (mutmut selects it by
    MUTANT_UNDER_TEST; a name of no mutant runs the original): "passed", "failed" or "timeout" after
    `limit` seconds, and the seconds taken."""
    return run_pytest(mutants, tests, limit, {"MUTANT_UNDER_TEST": name})


def run_pytest(
    folder: Path, tests: list[str], limit: float | None, environment: dict[str, str] | None = None
) -> tuple[str, float]:
    """Run the test files in `folder` with pytest -x, stopping at the first failure: "passed", "failed"
    or "timeout" (after `limit` seconds, the whole session killed), and the seconds it took."""
    command = [sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", *tests]
    started = time.monotonic()
    with subprocess.Popen(
        command,
        cwd=folder,
        env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1", **(environment or {})},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    ) as process:
        try:
            code = process.wait(timeout=limit)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)  # pytest's session: its children too
            process.wait()
            return "timeout", time.monotonic() - started
    return ("passed" if code == 0 else "failed"), time.monotonic() - started


def recheck(mutants: Path, names: list[str], tests: list[str], multiplier: int) -> dict[str, str]:
    """Run each mutant that timed out under mutmut again, in a fresh process of its own: "killed" when
    its tests fail, "survived" when they pass, "timeout" only when it runs past `multiplier` times the
    original's own time here too (at least RECHECK_MINIMUM seconds).

    mutmut forks each mutant's test run from a process that has already imported what the tests
    import; TensorFlow does not survive a fork (its thread pools are not copied), so a test that loads
    a model can hang in the fork whatever the mutant does. Such a mutant is not killed: its tests,
    run on their own, say what it is.
    """
    if not names:
        return {}
    status, base = run_alone(mutants, "none", tests, 3600)
    if status != "passed":
        raise UsageError(f"the tests of {tests} fail without a mutant")
    limit = max(multiplier * base, RECHECK_MINIMUM)
    verdicts = {"passed": "survived", "failed": "killed", "timeout": "timeout"}
    return {name: verdicts[run_alone(mutants, name, tests, limit)[0]] for name in names}


def run_module(
    module: str,
    tests: list[str],
    functions: list[str],
    equivalents: list[Equivalent],
    jobs: int,
    keep: bool,
    timeout_multiplier: int = TIMEOUT_MULTIPLIER,
) -> ModuleReport:
    workdir = Path(tempfile.mkdtemp(prefix="mutation-"))
    try:
        prepare(module, tests, workdir, timeout_multiplier)
        log = workdir / "mutmut.log"
        print(
            f"{module}: mutating against {' '.join(tests)} (log: {log})",
            file=sys.stderr,
            flush=True,
        )
        patterns = mutant_patterns(module, functions)
        try:
            mutmut(workdir, "run", "--max-children", str(jobs), *patterns, log=log)
        except subprocess.CalledProcessError:
            keep = True
            raise UsageError(f"mutmut failed on {module}; its log: {log}") from None
        statuses = {}
        for line in mutmut(workdir, "results", "--all", "true").splitlines():
            match = RESULT_LINE.match(line)
            name = match.group("name") if match else ""
            if match and (not patterns or any(fnmatch(name, p) for p in patterns)):
                statuses[name] = match.group("status")
        timed_out = [name for name, status in statuses.items() if status == "timeout"]
        statuses.update(recheck(workdir / "mutants", timed_out, tests, timeout_multiplier))
        diffs = {
            name: mutmut(workdir, "show", name)
            for name, status in statuses.items()
            if status not in DETECTED or status == "timeout"
        }
        return classify(module, statuses, diffs, equivalents)
    finally:
        if keep:
            print(f"{module}: kept {workdir}", file=sys.stderr)
        else:
            shutil.rmtree(workdir, ignore_errors=True)


def render_table(reports: list[ModuleReport]) -> str:
    """One row a module: mutants, killed (of which by a timeout: the mutant made a test hang), survived,
    equivalent, and the share of the rest killed."""
    rows = [
        (
            "module",
            "mutants",
            "killed",
            "(by timeout)",
            "survived",
            "equivalent",
            "killed of the rest",
        )
    ]
    for report in reports:
        rows.append(
            (
                report.module,
                str(len(report.statuses)),
                str(report.killed),
                str(sum(status == "timeout" for status in report.statuses.values())),
                str(len(report.survivors)),
                str(report.equivalent),
                f"{report.score:.1%}"
                + ("" if report.score >= TARGET else f"  (under {TARGET:.0%})"),
            )
        )
    widths = [max(len(row[column]) for row in rows) for column in range(len(rows[0]))]
    return "\n".join(
        "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
        for row in rows
    )


def render_survivors(report: ModuleReport) -> str:
    """Each survivor with its change (and why, for a known equivalent); listed equivalents not seen."""
    lines = []
    for survivor in report.survivors:
        label = f"equivalent: {survivor.why}" if survivor.why else survivor.status.upper()
        number = survivor.name.rsplit("_", 1)[-1]
        lines.append(f"{report.module} {survivor.function} ({number}) {label}")
        lines += [f"  - {line}" for line in survivor.removed]
        lines += [f"  + {line}" for line in survivor.added]
    for timeout in report.timeouts:  # counted as killed: read the change to be sure it hangs
        number = timeout.name.rsplit("_", 1)[-1]
        lines.append(f"{report.module} {timeout.function} ({number}) TIMEOUT, counted as killed")
        lines += [f"  - {line}" for line in timeout.removed]
        lines += [f"  + {line}" for line in timeout.added]
    for equivalent in report.stale:
        lines.append(
            f"{report.module} {equivalent.function}: listed as equivalent but no longer "
            f"survives: {equivalent.line}"
        )
    return "\n".join(lines)


def render(reports: list[ModuleReport]) -> str:
    """Every module's survivors, then the table."""
    parts = [render_survivors(report) for report in reports]
    return "\n\n".join([part for part in parts if part] + [render_table(reports)])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tests.mutation", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument(
        "modules",
        nargs="*",
        help="modules to mutate (default: every one in tests/mutation/mutation.toml)",
    )
    parser.add_argument("--jobs", type=int, default=2, help="mutants tested at once (default: 2)")
    parser.add_argument("--keep", action="store_true", help="keep each module's working copy")
    parser.add_argument(
        "--timeout-multiplier",
        type=int,
        default=TIMEOUT_MULTIPLIER,
        help="a mutant's time limit, in times its tests' own time (default: %(default)s); raise it "
        "to tell a mutant that hangs from one that is only slow",
    )
    args = parser.parse_args(argv)
    config = read_config()
    unknown = [module for module in args.modules if module not in config]
    if unknown or args.jobs < 1 or args.timeout_multiplier < 1:
        what = (
            f"not in {CONFIG.relative_to(ROOT)}: {', '.join(unknown)}"
            if unknown
            else "--jobs and --timeout-multiplier must be at least 1"
        )
        print(f"{parser.prog}: error: {what}", file=sys.stderr)
        return 2
    reports, failed = [], []
    for module in args.modules or list(config):
        entry = config[module]
        try:
            report = run_module(
                module,
                entry["pytest_args"],
                entry["functions"],
                entry["equivalent"],
                args.jobs,
                args.keep,
                args.timeout_multiplier,
            )
        except UsageError as error:
            print(f"{parser.prog}: error: {error}", file=sys.stderr, flush=True)
            failed.append(module)
            continue
        reports.append(report)
        survivors = render_survivors(report)
        print((survivors + "\n\n" if survivors else "") + render_table([report]) + "\n", flush=True)
    if len(reports) > 1:
        print(render_table(reports))
    if failed:
        return 2
    return 0 if all(report.score >= TARGET for report in reports) else 1


if __name__ == "__main__":
    sys.exit(main())
