"""ddpgen's own code meets the bar it sets for generated code."""

from pathlib import Path

from ddpgen.checks import check_black, check_ruff

ROOT = Path(__file__).parents[1]


def test_repository_is_black_and_ruff_clean():
    assert check_black(ROOT) == []
    assert check_ruff(ROOT) == []
