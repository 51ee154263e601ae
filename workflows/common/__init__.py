"""Argo's rules that both the lint and the local engine read, each kept once as Argo keeps them in
workflow/common/: depends.py (ancestry.go and the evaluation of `depends`), durations.py, numbers.py
(strconv.Atoi), retry_strategy.py (policies and retry variables), tags.py (`{{...}}` tags and their
substitution) and tokens.py (splitting an expression into tokens)."""
