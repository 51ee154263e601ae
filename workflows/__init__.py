"""Running the pipeline: submit.py (the command), preflight.py (every check before a run), run_end.py (the
lines that end a run, on either engine) and errors.py; the pipeline's Workflow in pipeline/, the Argo Server's
client in server/, the local runner in local/."""
