"""Stand-ins for what cannot run here: the Argo Server and controller, GCS's preconditions, the
cloud command-line tools. Each says what it models and where it differs."""
