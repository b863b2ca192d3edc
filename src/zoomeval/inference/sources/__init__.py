"""One module per model source; importing this package imports every module in it, so each registers itself in
:data:`zoomeval.inference.models.MODEL_SOURCES`. A new source is a new module here."""

from importlib import import_module
from pkgutil import iter_modules

for _module in iter_modules(__path__):
    import_module(f"{__name__}.{_module.name}")
