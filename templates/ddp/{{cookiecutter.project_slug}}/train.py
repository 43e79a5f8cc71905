{%- if cookiecutter.mode == "launch" -%}
"""Train with DistributedDataParallel; torchrun starts one process per {{ 'GPU pair' if cookiecutter.model_parallel else 'GPU' }}.

    torchrun --standalone --nproc-per-node 2 train.py --epochs 3
    python -m torch.distributed.launch --nproc-per-node 2 train.py  # legacy launcher
    python train.py  # one process, no launcher

Many nodes, Slurm and Kubernetes: see README.md.
"""

from torch.distributed.elastic.multiprocessing.errors import record

from {{ cookiecutter.package_name }}.config import parse_args
from {{ cookiecutter.package_name }}.distributed import placement_from_env
from {{ cookiecutter.package_name }}.worker import run


@record  # torchrun's failure summary then shows the failing rank's traceback
def main(argv=None):
    config = parse_args(argv)
    run(config, placement_from_env(config.local_rank))
{%- else -%}
"""Train with DistributedDataParallel; this script spawns its own workers.

    python train.py  # one process per {{ 'GPU pair' if cookiecutter.model_parallel else 'GPU' }}, or 2 on CPU
    python train.py --nprocs 2 --epochs 3

Many nodes, Slurm and Kubernetes: see README.md.
"""

from {{ cookiecutter.package_name }}.config import parse_args
from {{ cookiecutter.package_name }}.spawn import spawn


def main(argv=None):
    spawn(parse_args(argv))
{%- endif %}


if __name__ == "__main__":
    main()
