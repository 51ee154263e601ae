"""Mutation testing of the modules that hold the project's rules (`python -m tests.mutation`)."""
