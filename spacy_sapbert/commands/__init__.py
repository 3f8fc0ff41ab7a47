"""What the command line runs, as functions: building an index and a pipeline, loading and linking with a saved
pipeline (:mod:`.pipeline`), checking saved folders in full (:mod:`.verify`)."""
