"""The cluster settings a workflow profile ships as placeholders (``profiles/slurm``: ``'CHANGE_ME'``), refused when
the workflow is parsed, so before any job is submitted (and by a dry run)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from zoomeval.core.config import ConfigError

#: What the shipped profile puts where the user's cluster must be named.
PLACEHOLDER = "CHANGE_ME"
#: The resources that name the cluster's partition and account, and where to look them up.
CLUSTER_SETTINGS = {
    "slurm_partition": "a partition of your cluster (`sinfo -s` lists them)",
    "slurm_account": "your account (`sacctmgr show associations user=$USER format=account`), or remove the key",
}


def refuse_placeholders(default: Mapping[str, Any] | None, per_rule: Mapping[str, Mapping[str, Any]]) -> None:
    """Refuse a partition or account still set to the profile's placeholder, naming the profile key.

    ``default`` and ``per_rule`` are Snakemake's ``default-resources`` and ``set-resources`` (values as given, or
    Snakemake's parsed resources, whose ``raw`` is the value as given)."""
    scopes = {"default-resources": default or {}, **{f"set-resources.{r}": v for r, v in per_rule.items()}}
    for scope, resources in scopes.items():
        for name, fix in CLUSTER_SETTINGS.items():
            raw = str(getattr(resources[name], "raw", resources[name])) if name in resources else ""
            if PLACEHOLDER in raw:
                raise ConfigError(
                    f"{scope}.{name}: {raw} is the workflow profile's placeholder; put {fix} there, in inner quotes "
                    "(\"'gpu'\"), e.g. in profiles/slurm/config.yaml, or give --default-resources / "
                    "--set-resources on the command line"
                )
