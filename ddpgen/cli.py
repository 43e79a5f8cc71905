"""The command line: parse flags, call the library, print. No logic lives here."""

import json
import shlex
from pathlib import Path

import click

from ddpgen import __version__
from ddpgen.checks import check_template
from ddpgen.errors import DdpgenError
from ddpgen.lint import chosen_rules, lint_paths, python_files
from ddpgen.lint.fixes import FIXABLE, fix_paths
from ddpgen.lint.formats import FORMATS
from ddpgen.render import render_project
from ddpgen.spec import Template, make_spec
from ddpgen.update import update_project


class Group(click.Group):
    """Turns every DdpgenError into Click's one-line `Error: ...` and exit code."""

    def invoke(self, ctx):
        try:
            return super().invoke(ctx)
        except DdpgenError as error:
            failure = click.ClickException(error.message)
            failure.exit_code = error.exit_code
            raise failure from None


@click.group(cls=Group)
@click.version_option(__version__, prog_name="ddpgen")
def main():
    """Generate PyTorch DistributedDataParallel training projects."""


def flag_name(variable):
    return variable.replace("_", "-")


def builtin_template_flags(command):
    """One flag per variable of the built-in template, declared in its
    cookiecutter.json; None means 'not given' so --template can tell."""
    for option in reversed(Template.load().options):
        dashed = flag_name(option.name)
        shown = f"{option.help} [default: {option.default}]"
        if option.kind == "bool":
            decls = [f"--{dashed}/--no-{dashed}"]
            command = click.option(*decls, option.name, default=None, help=shown)(
                command
            )
        else:
            kind = click.Choice(option.choices) if option.choices else str
            command = click.option(
                f"--{dashed}", option.name, type=kind, default=None, help=shown
            )(command)
    return command


@main.command()
@click.argument("name")
@builtin_template_flags
@click.option(
    "--output-dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("."),
    help="folder that NAME is relative to [default: .]",
)
@click.option(
    "--force",
    is_flag=True,
    help="write into a non-empty folder: replaces the template's files, "
    "never deletes yours",
)
@click.option("--dry-run", is_flag=True, help="print the files; write nothing")
@click.option(
    "--template",
    type=click.Path(path_type=Path),
    help="a cookiecutter template folder instead of the built-in one",
)
@click.option(
    "--set",
    "settings",
    multiple=True,
    metavar="KEY=VALUE",
    help="set a template variable (repeatable)",
)
def new(name, output_dir, force, dry_run, template, settings, **choices):
    """Generate the project NAME (a path; its last part names the package)."""
    answers = {key: value for key, value in choices.items() if value is not None}
    spec = make_spec(
        name,
        output_dir=output_dir,
        template=template,
        answers=answers,
        settings=settings,
    )
    rendered = render_project(spec, force=force, dry_run=dry_run)
    if dry_run:
        click.echo(
            f"would write {len(rendered.files)} files to {rendered.destination}:"
        )
        for file in rendered.files:
            click.echo(f"  {file}")
        return
    click.echo(f"wrote {len(rendered.files)} files to {rendered.destination}")
    for path in rendered.stale:
        click.echo(f"kept: {path} (an earlier render wrote it, this one does not)")
    if "README.md" in rendered.files:
        click.echo(
            f"next: cd {shlex.quote(str(rendered.destination))} && less README.md"
        )


@main.command()
@click.option("--json", "as_json", is_flag=True, help="machine-readable output")
@click.option("--template", type=click.Path(path_type=Path), help="another template")
def options(as_json, template):
    """List the template's variables: choices, default and help."""
    found = Template.load(template).options
    if as_json:
        rows = [
            {
                "name": option.name,
                "flag": option_flag(option, template),
                "kind": option.kind,
                "choices": list(option.choices),
                "default": option.default,
                "help": option.help,
            }
            for option in found
        ]
        click.echo(json.dumps(rows, indent=2))
        return
    for option in found:
        choices = "|".join(option.choices) if option.choices else option.kind
        click.echo(
            f"{option_flag(option, template)} {{{choices}}}  default: {option.default}"
        )
        click.echo(f"    {option.help}")


def option_flag(option, template):
    """How `ddpgen new` takes the option: the built-in template's variables have
    flags of their own; any other template's go through --set."""
    if template is None:
        return f"--{flag_name(option.name)}"
    return f"--set {option.name}=VALUE"


@main.command()
@click.argument("template", type=click.Path(path_type=Path))
@click.option("--run", "run_tests", is_flag=True, help="also run each project's tests")
@click.option(
    "--max-combinations",
    type=click.IntRange(min=1),
    default=64,
    show_default=True,
    help="check a seeded sample when the matrix is larger",
)
@click.option(
    "--seed", type=int, default=0, show_default=True, help="seed of the sample"
)
def check(template, run_tests, max_combinations, seed):
    """Render every combination of TEMPLATE's choices and check each project."""
    loaded = Template.load(template)
    results, total = check_template(
        loaded, run_tests=run_tests, max_combinations=max_combinations, seed=seed
    )
    if total == 0:
        raise DdpgenError(
            f"{template}: its _constraints exclude every combination; nothing to check"
        )
    if len(results) < total:
        click.echo(
            f"checking a sample of {len(results)} of {total} combinations (seed {seed})"
        )
    else:
        click.echo(f"checking all {total} supported combinations")
    print_check_table(results)
    failed = [result for result in results if not result.ok]
    if failed:
        raise DdpgenError(f"{len(failed)} of {len(results)} combinations failed")


def combination_label(answers):
    return " ".join(f"{key}={value}" for key, value in answers.items())


def print_check_table(results):
    checks = list(results[0].problems) if results else []
    width = max(len(combination_label(r.answers)) for r in results) if results else 0
    click.echo(
        " ".join(["combination".ljust(width), *[name.ljust(8) for name in checks]])
    )
    for result in results:
        cells = [
            ("FAIL" if result.problems.get(name) else "ok").ljust(8) for name in checks
        ]
        click.echo(" ".join([combination_label(result.answers).ljust(width), *cells]))
    for result in results:
        for name, problems in result.problems.items():
            for problem in problems:
                click.echo(f"{combination_label(result.answers)}: {name}: {problem}")


NOTES = {
    "kept": " (binary, changed by you and the template: yours is kept)",
    "left": " (the template dropped it; you edited it, so it stays)",
}


@main.command()
@click.argument(
    "project", type=click.Path(file_okay=False, path_type=Path), default=Path(".")
)
@click.option("--template", type=click.Path(path_type=Path), help="another template")
@click.option(
    "--set",
    "settings",
    multiple=True,
    metavar="KEY=VALUE",
    help="change an answer (repeatable)",
)
@click.option("--dry-run", is_flag=True, help="print what would change; write nothing")
def update(project, template, settings, dry_run):
    """Merge the template's changes since PROJECT was rendered into it."""
    result = update_project(
        project, template=template, settings=settings, dry_run=dry_run
    )
    verb = "would change" if dry_run else "changed"
    if not result.changes:
        click.echo("up to date: the template has no changes to merge")
    for change in result.changes:
        note = NOTES.get(change.action, "")
        click.echo(f"{verb}: {change.action:8} {change.path}{note}")
    if result.conflicts:
        files = ", ".join(result.conflicts)
        if dry_run:
            raise DdpgenError(f"would conflict in: {files} (nothing was written)")
        raise DdpgenError(f"conflicts (resolve the <<<<<<< markers) in: {files}")


def codes(value):
    return [code.strip().upper() for code in value.split(",") if code.strip()]


@main.command()
@click.argument("paths", nargs=-1, required=True)
@click.option("--select", default="", help="only these rules (codes or prefixes)")
@click.option("--ignore", default="", help="not these rules (codes or prefixes)")
@click.option(
    "--format",
    "output",
    type=click.Choice(["text", *FORMATS]),
    default="text",
    help="text; json; github (Actions annotations); sarif (2.1.0, code scanning)",
)
@click.option(
    "--fix", is_flag=True, help=f"rewrite what has one safe fix ({', '.join(FIXABLE)})"
)
@click.option(
    "--diff", "show_diff", is_flag=True, help="show --fix's changes; write nothing"
)
@click.option(
    "--jobs",
    type=click.IntRange(min=0),
    default=0,
    show_default=True,
    help="processes for many files (0: one per core)",
)
def lint(paths, select, ignore, output, fix, show_diff, jobs):
    """Find DDP pitfalls in Python files and folders (rules: docs/lint.md)."""
    if fix or show_diff:
        rules = chosen_rules(codes(select), codes(ignore))
        diff, fixed = fix_paths(list(python_files(paths)), rules, write=not show_diff)
        if show_diff:
            click.echo(diff, nl=False)
            raise SystemExit(1 if fixed else 0)
        click.echo(f"fixed {fixed} finding{'s' * (fixed != 1)}", err=True)
    findings, files = lint_paths(paths, codes(select), codes(ignore), jobs)
    if output in FORMATS:
        click.echo(FORMATS[output](findings))
    else:
        for finding in findings:
            click.echo(finding.text())
        noun = "finding" if len(findings) == 1 else "findings"
        click.echo(f"{len(findings)} {noun} in {files} file{'s' * (files != 1)}")
    if findings:
        raise SystemExit(1)
