"""The Argo Server: client.py (lint, create, register, submit from the template, stop; Hera's client, every
failure one line) and watch.py (the live view of a run until it ends)."""
