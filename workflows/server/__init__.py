"""Submitting to an Argo Server and watching a run there."""
