"""Train with DistributedDataParallel; this script spawns its own workers.

    python train.py  # one process per GPU, or 2 on CPU
    python train.py --nprocs 2 --epochs 3

Many nodes, Slurm and Kubernetes: see README.md.
"""

from mp_wandb.config import parse_args
from mp_wandb.spawn import spawn


def main(argv=None):
    spawn(parse_args(argv))


if __name__ == "__main__":
    main()
