"""docs/templates.md stays true: its example template renders and checks clean."""

from click.testing import CliRunner
from helpers import write_example_template

from ddpgen.cli import main


def test_the_example_template_renders_as_documented(tmp_path):
    template = write_example_template(tmp_path / "template")
    result = CliRunner().invoke(
        main,
        [
            "new",
            "my-demo",
            "--output-dir",
            str(tmp_path),
            "--template",
            str(template),
            "--set",
            "backend=nccl",
            "--set",
            "verbose=yes",
        ],
    )
    assert result.exit_code == 0, result.output
    package = (tmp_path / "my-demo" / "my_demo" / "__init__.py").read_text()
    assert package == 'BACKEND = "nccl"\nVERBOSE = True\n'
    options = CliRunner().invoke(main, ["options", "--template", str(template)]).output
    assert (
        "--set backend=VALUE {gloo|nccl}  default: gloo\n    process-group backend"
        in options
    )


def test_the_example_template_checks_clean(tmp_path):
    template = write_example_template(tmp_path / "template")
    result = CliRunner().invoke(main, ["check", str(template)])
    assert result.exit_code == 0, result.output
    assert result.output.startswith("checking all 4 supported combinations\n")


def test_check_tells_python_braces_from_leftover_jinja(tmp_path):
    template = write_example_template(tmp_path / "template")
    project = template / "{{cookiecutter.project_slug}}"
    (project / "settings.py").write_text(
        'NESTED = {"optim": {"lr": 0.1}}\nSETS = {frozenset({1}): {2}}\n'
    )
    assert CliRunner().invoke(main, ["check", str(template)]).exit_code == 0

    # A file copied without rendering keeps its Jinja: one finding per
    # combination, not a second one for the pristine copy in .ddpgen-base.json.
    (project / "unrendered.txt").write_text("name: {{ cookiecutter.project_name }}\n")
    config = template / "cookiecutter.json"
    keep_raw = '"verbose": false,\n  "_copy_without_render": ["*.txt"],'
    config.write_text(config.read_text().replace('"verbose": false,', keep_raw))
    result = CliRunner().invoke(main, ["check", str(template)])
    assert result.exit_code != 0
    assert result.output.count("leftover Jinja") == 4, result.output
    assert result.output.count("unrendered.txt:1: leftover Jinja") == 4
