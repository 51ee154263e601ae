"""What several test modules share: the project's paths, crafted files, built images, schemas."""
