"""Send a job's logging, stdout and stderr to its Snakemake log file."""

from __future__ import annotations

import contextlib
import logging
import os
import sys
from collections.abc import Iterator


@contextlib.contextmanager
def to_file(path: str | os.PathLike[str]) -> Iterator[None]:
    with open(path, "w") as fh, contextlib.redirect_stdout(fh), contextlib.redirect_stderr(fh):
        handler = logging.StreamHandler(fh)
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
        root = logging.getLogger()
        root.addHandler(handler)
        root.setLevel(logging.INFO)
        try:
            yield
        except BaseException:
            logging.exception("job failed")
            raise
        finally:
            root.removeHandler(handler)
            sys.stderr.flush()
