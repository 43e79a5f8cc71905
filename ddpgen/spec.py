"""What to generate: a template's options, the user's answers, derived names.

A template's variables are declared once, in its cookiecutter.json: a list is a
choice (first item the default), a boolean a flag, a string a text value;
`__prompts__` gives their help and `_constraints` the combinations it rejects.
"""

import fnmatch
import hashlib
import json
import keyword
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

from ddpgen.errors import TemplateError, UsageError
from ddpgen.files import is_litter, template_files

PACKAGE_DIR = Path(__file__).resolve().parent
NAME_VARIABLES = ("project_name", "project_slug", "package_name")
BUILTIN_SOURCE = "builtin:ddp"
# Names a generated package must not take: it would hide the real module.
SHADOWED_MODULES = frozenset(sys.stdlib_module_names) | {
    "torch",
    "torchvision",
    "tqdm",
    "numpy",
    "pytest",
    "setuptools",
    "yaml",  # --config files
    "matplotlib",  # the plot module
    "tensorboard",  # the trackers
    "wandb",
    "mlflow",
}
MAX_NAME_LENGTH = 40
TRUE_WORDS = {"1", "true", "yes", "y", "on"}
FALSE_WORDS = {"0", "false", "no", "n", "off"}


def builtin_template_dir():
    """The built-in template: inside the wheel, or beside the package in a checkout."""
    for root in (PACKAGE_DIR, PACKAGE_DIR.parent):
        candidate = root / "templates" / "ddp"
        if (candidate / "cookiecutter.json").is_file():
            return candidate
    raise TemplateError("the built-in template is missing from this installation")


@dataclass(frozen=True)
class Option:
    name: str
    default: object
    help: str
    choices: tuple = ()

    @property
    def kind(self):
        if self.choices:
            return "choice"
        return "bool" if isinstance(self.default, bool) else "text"

    def parse(self, text):
        """The typed value of `--set name=text`."""
        if self.kind == "bool":
            word = text.strip().lower()
            if word in TRUE_WORDS | FALSE_WORDS:
                return word in TRUE_WORDS
            raise UsageError(f"{self.name}={text}: expected true or false")
        return self.check(text)

    def check(self, value):
        if self.kind == "choice" and value not in self.choices:
            choices = ", ".join(self.choices)
            raise UsageError(f"{self.name}={value}: choose one of {choices}")
        if self.kind == "bool" and not isinstance(value, bool):
            raise UsageError(f"{self.name}={value}: expected true or false")
        return value


@dataclass(frozen=True)
class Template:
    path: Path
    context: dict = field(repr=False)
    source: str = ""

    @classmethod
    def load(cls, path=None):
        if path is None:
            return cls.load_dir(builtin_template_dir(), BUILTIN_SOURCE)
        path = Path(path).expanduser().resolve()
        if not path.is_dir():
            raise UsageError(f"template {path}: no such folder")
        return cls.load_dir(path, str(path))

    @classmethod
    def load_dir(cls, path, source):
        config = path / "cookiecutter.json"
        try:
            context = json.loads(config.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise TemplateError(
                f"{config}: missing (not a cookiecutter template)"
            ) from None
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
            raise TemplateError(f"{config}: invalid JSON: {error}") from None
        if not isinstance(context, dict):
            raise TemplateError(f"{config}: must hold a JSON object")
        problem = context_problem(context)
        if problem:
            raise TemplateError(f"{config}: {problem}")
        return cls(path=path, context=context, source=source)

    @property
    def options(self):
        """The variables a user chooses (names are derived from NAME instead)."""
        prompts = self.context.get("__prompts__", {})
        found = []
        for name, value in self.context.items():
            if name.startswith("_") or name in NAME_VARIABLES:
                continue
            if isinstance(value, str) and "{{" in value:
                continue  # derived from other variables
            help_text = prompts.get(name, "")
            if isinstance(help_text, dict):
                help_text = help_text.get("__prompt__", "")
            if isinstance(value, list):
                found.append(Option(name, value[0], help_text, tuple(value)))
            elif isinstance(value, (bool, str)):
                found.append(Option(name, value, help_text))
        return found

    def defaults(self):
        return {option.name: option.default for option in self.options}

    def option(self, name):
        for option in self.options:
            if option.name == name:
                return option
        known = ", ".join(option.name for option in self.options) or "none"
        raise UsageError(f"unknown template variable {name!r} (known: {known})")

    def violations(self, answers):
        """The template's `_constraints` that these answers break, as messages."""
        for rule in self.context.get("_constraints", []):
            if all(answers.get(key) == value for key, value in rule["if"].items()):
                for key, allowed in rule["require"].items():
                    if answers.get(key) not in allowed:
                        condition = ", ".join(f"{k}={v}" for k, v in rule["if"].items())
                        yield (
                            f"unsupported combination {condition} with "
                            f"{key}={answers.get(key)}: {rule['because']}"
                        )

    def package_collision(self, package):
        """Why a package of this name would clash with what the template writes
        beside it, or None: a file or folder of that name, or a .gitignore
        pattern that would leave the package out of the user's repository."""
        folder = self.project_folder()
        if folder is None:
            return None
        for entry in folder.iterdir():
            if "{{" in entry.name or is_litter(entry.name):
                continue
            module = entry.name.removesuffix(".py")
            if package == module:
                shown = entry.name + ("/" if entry.is_dir() else "")
                return (
                    f"package {package!r} would collide with {shown}, "
                    "which the template writes"
                )
        for pattern in ignore_patterns(folder / ".gitignore"):
            if fnmatch.fnmatchcase(package, pattern.strip("/")):
                return (
                    f"package {package!r} would be ignored by the project's "
                    f".gitignore ({pattern})"
                )
        return None

    def project_folder(self):
        """The template's `{{cookiecutter.…}}` folder that becomes the project."""
        folders = [p for p in self.path.iterdir() if p.is_dir() and "{{" in p.name]
        return folders[0] if len(folders) == 1 else None

    def fingerprint(self):
        """A hash of every file of the template: which version rendered a project."""
        digest = hashlib.sha256()
        for relative in template_files(self.path):
            digest.update(relative.as_posix().encode())
            try:
                digest.update((self.path / relative).read_bytes())
            except OSError as error:
                raise TemplateError(
                    f"{self.path / relative}: cannot read template file: "
                    f"{error.strerror or error}"
                ) from None
        return digest.hexdigest()[:16]


def context_problem(context):
    """What is malformed in a cookiecutter.json that ddpgen reads, or None."""
    prompts = context.get("__prompts__", {})
    if not isinstance(prompts, dict):
        return "__prompts__ must be an object of {variable: help text}"
    for name, value in context.items():
        if name.startswith("_") or not isinstance(value, list):
            continue
        if not value:
            return f"{name}: a choice needs at least one item"
        odd = [item for item in value if not isinstance(item, str)]
        if odd:
            return f"{name}: choices must be strings (write {json.dumps(str(odd[0]))})"
    return constraints_problem(context.get("_constraints", []))


def constraints_problem(constraints):
    shape = (
        'each a {"if": {variable: value}, "require": {variable: [values]}, '
        '"because": "why"}'
    )
    if not isinstance(constraints, list):
        return f"_constraints must be a list of rules, {shape}"
    for index, rule in enumerate(constraints):
        well_formed = (
            isinstance(rule, dict)
            and isinstance(rule.get("if"), dict)
            and isinstance(rule.get("require"), dict)
            and all(isinstance(v, list) for v in rule["require"].values())
            and isinstance(rule.get("because"), str)
        )
        if not well_formed:
            return f"_constraints[{index}] is malformed: rules are {shape}"
    return None


def ignore_patterns(gitignore):
    try:
        lines = gitignore.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError):
        return []
    return [
        line.strip()
        for line in lines
        if line.strip() and not line.startswith(("#", "!")) and "{{" not in line
    ]


@dataclass(frozen=True)
class ProjectSpec:
    destination: Path
    template: Template
    answers: dict

    @property
    def project_slug(self):
        return self.destination.name

    @property
    def package_name(self):
        return package_name_for(self.project_slug)

    def context(self):
        """Everything cookiecutter is told: the names, then every answer."""
        names = {
            "project_name": self.project_slug,
            "project_slug": self.project_slug,
            "package_name": self.package_name,
        }
        return names | self.answers


def package_name_for(slug):
    return slug.replace("-", "_").lower()


def name_problem(slug):
    """Why the last part of NAME cannot name a Python package, or None."""
    if not slug:
        return "it is empty"
    if slug[0].isdigit():
        return "it starts with a digit; a Python package name starts with a letter"
    if not re.fullmatch(r"[A-Za-z][A-Za-z0-9_-]*", slug):
        return "use letters, digits, '-' and '_' only, starting with a letter"
    if len(slug) > MAX_NAME_LENGTH:
        # Longer names push import lines past the 88 columns black and ruff allow.
        return f"it is longer than {MAX_NAME_LENGTH} characters"
    package = package_name_for(slug)
    if keyword.iskeyword(package) or keyword.issoftkeyword(package):
        return f"{package!r} is a Python keyword"
    if package in SHADOWED_MODULES:
        return f"package {package!r} would hide the module of the same name"
    return None


def make_spec(name, *, output_dir=".", template=None, answers=None, settings=()):
    """Validate NAME and the answers (typed values, then `key=value` strings)."""
    template = template if isinstance(template, Template) else Template.load(template)
    destination = Path(output_dir) / name
    slug = Path(name).name
    if name.strip() and slug in ("", ".", ".."):
        raise UsageError(
            f"invalid project name {name!r}: it does not end in a name; give the"
            " new project's name, as in `ddpgen new my-project`"
        )
    problem = name_problem(slug) or template.package_collision(package_name_for(slug))
    if problem:
        raise UsageError(f"invalid project name {name!r}: {problem}")
    chosen = template.defaults()
    for key, value in (answers or {}).items():
        chosen[key] = template.option(key).check(value)
    for setting in settings:
        key, separator, text = setting.partition("=")
        if not separator:
            raise UsageError(f"--set {setting}: expected KEY=VALUE")
        chosen[key.strip()] = template.option(key.strip()).parse(text)
    for violation in template.violations(chosen):
        raise UsageError(violation)
    return ProjectSpec(
        destination=destination.absolute(), template=template, answers=chosen
    )
