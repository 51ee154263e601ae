"""What the steps (and the page) share: file formats, the store, the model and its averaging."""
