"""Run cookiecutter without side effects outside a scratch folder, and turn its
exceptions into one-line TemplateErrors that name the file."""

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
    try:
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
        raise TemplateError(
            f"a template hook failed ({error}); its message is above"
        ) from None
    except (exceptions.CookiecutterException, ValueError, OSError) as error:
        raise TemplateError(f"cannot render {template_dir}: {error}") from None
    return Path(project)
