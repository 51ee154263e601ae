"""What the steps share, and the page with them: the steps' command-line plumbing (arguments, entry_point,
errors, input_files, bounded_json, staged_outputs, defaults), the files they exchange (mnist, shards, npz,
model_file, hdf5_strings, checkpoint, published), the store and where runs are published in it (storage,
registry), the network (architecture declares it, inference runs it in numpy, keras_model trains it with
TensorFlow set up by tensorflow_setup; averaging and schedule serve FedAvg), evaluate's picture
(confusion_plot) and a task's progress in Argo's format (progress)."""
