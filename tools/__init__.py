"""Tools for the repository itself, not part of the pipeline or the page: make_samples writes samples/."""
