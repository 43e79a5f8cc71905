"""generated_examples/ equals a fresh render through the CLI (`make examples`)."""

from pathlib import Path

from helpers import load_tool, tree

ROOT = Path(__file__).parents[1]


def test_generated_examples_match_a_fresh_render(tmp_path):
    make_examples = load_tool("make_examples")
    make_examples.render_examples(tmp_path / "fresh")
    committed, fresh = tree(ROOT / "generated_examples"), tree(tmp_path / "fresh")
    assert sorted(committed) == sorted(fresh), "run `make examples` and commit"
    stale = [name for name in fresh if committed[name] != fresh[name]]
    assert stale == [], f"run `make examples` and commit; stale: {stale}"
    assert {name.split("/")[0] for name in fresh} == set(make_examples.EXAMPLES)
