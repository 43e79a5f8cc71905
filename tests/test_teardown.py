"""Leaving the process group really ends it: gloo's threads are joined while the
interpreter is whole, so none is left to abort the process as it exits."""

import re
import textwrap

from helpers import PYTHON, child_env, package, run

SCRIPT = textwrap.dedent("""
    import os

    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel

    from {package}.config import parse_args
    from {package}.distributed import process_group
    from {package}.spawn import spawn


    def threads():
        return len(os.listdir("/proc/self/task"))


    def entry(config, placement, store):
        torch.set_num_threads(1)  # no intra-op pool to blur the count
        before = threads()
        with process_group("gloo", placement, 60, store):
            model = DistributedDataParallel(torch.nn.Linear(4, 4))
            model(torch.randn(2, 4)).sum().backward()
            gathered = [None] * placement.world_size
            dist.all_gather_object(gathered, placement.rank)
            del model
        print(f"rank {{placement.rank}}: {{threads() - before}} threads left")


    if __name__ == "__main__":
        spawn(parse_args(["--nprocs", "2", "--device", "cpu"]), entry=entry)
    """)


def test_leaving_the_group_joins_its_threads_after_ddp(mp, tmp_path):
    script = tmp_path / "teardown.py"
    script.write_text(SCRIPT.format(package=package(mp)))
    env = child_env(PYTHONPATH=mp)
    result = run([PYTHON, str(script)], cwd=mp, env=env, timeout=120)
    # Two processes share the pipe: their lines may interleave, so find them.
    reports = re.findall(r"rank (\d): (\d+) threads left", result.stdout)
    assert sorted(reports) == [("0", "0"), ("1", "0")], result.output
