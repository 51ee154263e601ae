"""The pipeline itself: its settings, its step templates, the cluster it expects, and the Workflow
that wires them (defined with Hera)."""
