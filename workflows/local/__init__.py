"""The local engine: runs a compiled Workflow on this machine as Argo v4.1.2's controller and
executor would on a cluster."""
