"""The local runner: runs the compiled Workflow on this machine as Argo v4.1.4's controller and executor would
on a cluster, and refuses, before anything runs, whatever of Argo the pipeline does not compile.

In the order a reader enters them, each importing only those after it: resume.py (takes up a run that failed
or was cut short), runner.py (LocalRunner.run, the whole run), outcome.py (the result and summary.json),
plan.py (depends, fan-outs, the DAG's phase), spec.py (what of a Workflow it knows, `{{…}}` tags), retries.py
(the template's retry rule, durations), artifacts.py (inputs and outputs in the store), containers.py and
engines.py (one try in the step's image or as a process), console.py (what is shown as it runs)."""
