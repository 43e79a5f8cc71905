"""{{ cookiecutter.project_name }}: DistributedDataParallel training."""
