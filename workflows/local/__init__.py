"""The local runner: runs the compiled Workflow on this machine as Argo v4.1.4's controller and executor would
on a cluster, and refuses, before anything runs, whatever of Argo the pipeline does not compile.

In the order a run reads them: runner.py (LocalRunner.run, the whole run), spec.py (what of a Workflow it
knows, `{{…}}` tags), retries.py (the template's retry rule, durations), plan.py (depends, fan-outs, the DAG's
phase), artifacts.py (inputs and outputs in the store), engines.py and containers.py (one try as a process
or in the step's image), console.py (what is shown as it runs), outcome.py (the result and summary.json).
resume.py takes up a run that failed or was cut short."""
