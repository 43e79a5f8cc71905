"""DistributedDataParallel training: see README.md for how to run and edit it."""
