"""Train with DistributedDataParallel; torchrun starts one process per GPU.

    torchrun --standalone --nproc-per-node 2 train.py --epochs 3
    python -m torch.distributed.launch --nproc-per-node 2 train.py  # legacy launcher
    python train.py  # one process, no launcher

Many nodes, Slurm and Kubernetes: see README.md.
"""

from torch.distributed.elastic.multiprocessing.errors import record

from launch_text_gpt.config import parse_args
from launch_text_gpt.distributed import placement_from_env
from launch_text_gpt.worker import run


@record  # torchrun's failure summary then shows the failing rank's traceback
def main(argv=None):
    config = parse_args(argv)
    run(config, placement_from_env(config.local_rank))


if __name__ == "__main__":
    main()
