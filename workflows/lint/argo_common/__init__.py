"""Argo's rules the offline lint reads, as Argo keeps them in workflow/common/: depends.py (ancestry.go),
durations.py, numbers.py (strconv.Atoi), retry_strategy.py, tags.py (`{{...}}` tags) and tokens.py."""
