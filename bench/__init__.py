"""The benchmark (`make bench`): the pipeline against its targets, centralized training and the replaced system."""
