"""The local engine: runs a compiled Workflow on this machine as Argo v4.1.2's controller and
executor would on a cluster.

runner.py drives a run; dag.py decides on a DAG's tasks and its phase (controller/dag.go); retries.py on a
failed try (operator.go); artifacts.py moves artifacts and progress.py reads steps' progress (the executor);
engines.py and containers.py start each try as a process or in a container; supported.py says what of a
spec this engine honours, ignores or refuses."""
