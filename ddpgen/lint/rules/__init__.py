"""Every rule, in code order: each module here named ddpNNN_* holds one RULE."""

import importlib
import pkgutil

RULES = [
    importlib.import_module(f"{__name__}.{found.name}").RULE
    for found in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name)
    if found.name.startswith("ddp")
]
CODES = {rule.code for rule in RULES}
