"""The workflow's own files as package data: the Snakefile, ``workflow/`` (rules, scripts, the config schema, report
captions), ``config/`` (the presets), ``profiles/`` and ``envs/``. In the repository each entry here is a link to the
file or folder at the top level, where the design keeps them; a wheel holds copies of them (pyproject.toml's
package data). :func:`zoomeval.core.provenance.workflow_root` finds this folder through the import system, so an
editable install and an installed wheel find the workflow the same way."""
