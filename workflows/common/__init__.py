"""Argo's rules that both the lint and the local engine read, kept once as Argo keeps them in
workflow/common/ (depends, durations, expression tokens, `{{...}}` tags)."""
