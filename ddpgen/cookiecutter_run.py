"""Run cookiecutter without side effects outside a scratch folder, and turn its
exceptions into one-line TemplateErrors that name the file."""

import contextlib
import logging
import tempfile
from pathlib import Path

from cookiecutter import exceptions
from cookiecutter.main import cookiecutter
from jinja2 import TemplateSyntaxError, UndefinedError

from ddpgen.errors import TemplateError
from ddpgen.files import is_litter


def run_cookiecutter(template_dir, context, scratch, shown_as=None):
    """Render into scratch/out; cookiecutter's replay and clone folders go to
    scratch too, never to the home folder. Errors name `shown_as`, the template
    the user gave (template_dir may be a copy of it)."""
    shown_as = Path(shown_as or template_dir)
    config = {
        "replay_dir": str(scratch / "replay"),
        "cookiecutters_dir": str(scratch / "cookiecutters"),
    }
    failed_hook = HookTracker(Path(template_dir) / "hooks")
    try:
        with failed_hook.recorded(), temp_files_in(scratch):
            project = cookiecutter(
                str(template_dir),
                no_input=True,
                extra_context=context,
                output_dir=str(scratch / "out"),
                default_config=config,
            )
    except TemplateSyntaxError as error:
        where = error.filename or error.name or failed_hook.shown(shown_as)
        if where and str(template_dir) in where:
            where = where.replace(str(template_dir), str(shown_as))
        raise TemplateError(
            f"{where}:{error.lineno}: Jinja syntax error: {error.message}"
        ) from None
    except exceptions.UndefinedVariableInTemplate as error:
        raise TemplateError(
            f"{error.message}: undefined variable: {error.error.message}"
        ) from None
    except UndefinedError as error:  # raised by a hook's Jinja
        raise TemplateError(
            f"{failed_hook.shown(shown_as)}: undefined variable: {error.message}"
        ) from None
    except exceptions.FailedHookException as error:
        raise TemplateError(
            f"{failed_hook.shown(shown_as)}: {error}; its output is above"
        ) from None
    except (exceptions.CookiecutterException, ValueError, OSError) as error:
        message = str(error).replace(str(template_dir), str(shown_as))
        raise TemplateError(f"cannot render {shown_as}: {message}") from None
    return Path(project)


@contextlib.contextmanager
def temp_files_in(folder):
    """Cookiecutter writes each rendered hook to a temp file it never deletes:
    keep those in the render's scratch folder, which is removed."""
    saved = tempfile.tempdir
    tempfile.tempdir = str(folder)
    try:
        yield
    finally:
        tempfile.tempdir = saved


class HookTracker(logging.Handler):
    """Cookiecutter names the hook it runs only in log records: keep the name
    while the hook runs, to say which script failed.

    Handling cookiecutter's records here also keeps Python's last-resort
    handler from printing them, with a traceback, to the user's terminal.
    """

    def __init__(self, hooks_dir):
        super().__init__(logging.DEBUG)
        self.hooks_dir = hooks_dir
        self.running = None

    def emit(self, record):
        if record.msg == "Running hook %s" and record.args:
            self.running = record.args[0]
        elif "hook script didn't exit successfully" not in str(record.msg):
            self.running = None  # rendering files again

    def shown(self, template):
        """The running hook's file(s), under the user's template path."""
        if self.running is None:
            return str(template)
        scripts = sorted(
            path.name
            for path in self.hooks_dir.glob(f"{self.running}.*")
            if not is_litter(path.name)
        ) or [self.running]
        return ", ".join(f"{template}/hooks/{name}" for name in scripts)

    @contextlib.contextmanager
    def recorded(self):
        logger = logging.getLogger("cookiecutter")
        saved = logger.level, logger.propagate
        logger.addHandler(self)
        # Debug records name the running hook; they stay with this handler.
        logger.setLevel(logging.DEBUG)
        logger.propagate = False
        try:
            yield
        finally:
            logger.removeHandler(self)
            logger.setLevel(saved[0])  # also resets logging's enabled-for cache
            logger.propagate = saved[1]
