"""The benchmark: the seed's method, the pipeline and centralized training side by side (`make bench`)."""
