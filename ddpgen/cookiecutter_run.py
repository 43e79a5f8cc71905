"""Run cookiecutter without side effects outside a scratch folder, and turn its
exceptions into one-line TemplateErrors that name the file."""

import contextlib
import logging
from pathlib import Path

from cookiecutter import exceptions
from cookiecutter.main import cookiecutter
from jinja2 import TemplateSyntaxError

from ddpgen.errors import TemplateError


def run_cookiecutter(template_dir, context, scratch):
    """Render into scratch/out; cookiecutter's replay and clone folders go to
    scratch too, never to the home folder."""
    config = {
        "replay_dir": str(scratch / "replay"),
        "cookiecutters_dir": str(scratch / "cookiecutters"),
    }
    failed_hook = FailedHookName()
    try:
        with failed_hook.recorded():
            project = cookiecutter(
                str(template_dir),
                no_input=True,
                extra_context=context,
                output_dir=str(scratch / "out"),
                default_config=config,
            )
    except TemplateSyntaxError as error:
        where = error.filename or error.name or "template"
        raise TemplateError(
            f"{where}:{error.lineno}: Jinja syntax error: {error.message}"
        ) from None
    except exceptions.UndefinedVariableInTemplate as error:
        raise TemplateError(
            f"{error.message}: undefined variable: {error.error.message}"
        ) from None
    except exceptions.FailedHookException as error:
        hook = failed_hook.name or "a hook"
        raise TemplateError(
            f"{template_dir}/hooks/{hook}: {error}; its output is above"
        ) from None
    except (exceptions.CookiecutterException, ValueError, OSError) as error:
        raise TemplateError(f"cannot render {template_dir}: {error}") from None
    return Path(project)


class FailedHookName(logging.Handler):
    """Cookiecutter names the failing hook only in a log record: keep the name.

    Handling cookiecutter's records here also keeps Python's last-resort
    handler from printing them, with a traceback, to the user's terminal.
    """

    def __init__(self):
        super().__init__(logging.ERROR)
        self.name = None

    def emit(self, record):
        if "hook script didn't exit successfully" in record.msg and record.args:
            self.name = f"{record.args[0]}.py"

    @contextlib.contextmanager
    def recorded(self):
        logger = logging.getLogger("cookiecutter")
        logger.addHandler(self)
        try:
            yield
        finally:
            logger.removeHandler(self)
