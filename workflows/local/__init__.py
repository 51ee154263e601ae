"""The local runner: runs the compiled Workflow on this machine as Argo v4.1.4 would on a cluster, and refuses,
before anything runs, whatever of Argo the pipeline does not compile.

In reading order, each importing only those after it: resume.py (takes up a cut-short run), runner.py (the
whole run), outcome.py (the result, summary.json), plan.py (depends, fan-outs, the DAG's phase), spec.py (what
it knows of a Workflow, `{{…}}` tags), retries.py (the retry rule), artifacts.py (inputs and outputs),
containers.py and engines.py (one try, in the image or as a process), console.py (what is shown)."""
