"""The command line: parse flags, call the library, print. No logic lives here."""

import json
from pathlib import Path

import click

from ddpgen import __version__
from ddpgen.errors import DdpgenError
from ddpgen.render import render_project
from ddpgen.spec import Template, make_spec


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
        click.echo(f"would write {len(rendered.files)} files to {rendered.destination}:")
        for file in rendered.files:
            click.echo(f"  {file}")
        return
    click.echo(f"wrote {len(rendered.files)} files to {rendered.destination}")
    click.echo(f"next: cd {rendered.destination} && less README.md")


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
                "flag": f"--{flag_name(option.name)}",
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
        click.echo(f"--{flag_name(option.name)} {{{choices}}}  default: {option.default}")
        click.echo(f"    {option.help}")
