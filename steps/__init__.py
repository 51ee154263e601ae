"""The pipeline's steps: each module is a command line tool that reads and writes local files."""
