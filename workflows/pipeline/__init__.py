"""The pipeline compiled to an Argo Workflow with Hera: settings.py (each setting and its bounds, declared
once), templates.py (how a step becomes a container template), resources.py (the Kubernetes names, sizes,
deadlines and security it asks for), workflow.py (the DAG; compile_workflow and compile_template) and
manifests.py (the committed workflow.yaml and workflow-template.yaml beside them)."""
