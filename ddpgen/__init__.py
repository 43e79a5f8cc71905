"""ddpgen: generate PyTorch DistributedDataParallel training projects."""

__version__ = "0.1.0"

from ddpgen.errors import DdpgenError, TemplateError, UsageError  # noqa: E402
from ddpgen.render import Rendered, render_project  # noqa: E402
from ddpgen.spec import ProjectSpec, Template, make_spec  # noqa: E402

__all__ = [
    "DdpgenError",
    "ProjectSpec",
    "Rendered",
    "Template",
    "TemplateError",
    "UsageError",
    "make_spec",
    "render_project",
]
