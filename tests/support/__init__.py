"""What several test modules share: the project's paths, crafted files and manifests, built images, schemas."""
