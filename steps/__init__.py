"""The pipeline's six steps, split, init, train, aggregate, evaluate and publish: each a command line tool
(`python -m steps.<name>`) that reads and writes local files and knows nothing of Argo. What they share
(and the page with them) is the library in steps.lib."""
