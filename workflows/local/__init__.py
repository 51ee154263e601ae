"""The local runner: runs the compiled Workflow on this machine as Argo v4.1.4 would on a cluster, and refuses,
before anything runs, whatever of Argo the pipeline does not compile. In reading order, each importing only
those after it: runner (a run, and taking one up), outcome (summary.json), plan (depends, fan-outs), spec (what it knows of a
Workflow), retries, artifacts, containers and engines (one try, in the image or as a process), console."""
