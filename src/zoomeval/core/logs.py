"""Send a job's logging, stdout and stderr to its Snakemake log file, and its progress records to the file beside it
(:mod:`zoomeval.core.progress`)."""

from __future__ import annotations

import contextlib
import logging
import os
import sys
from collections.abc import Iterator

from zoomeval.core.progress import RecordsHandler, records_path


@contextlib.contextmanager
def to_file(path: str | os.PathLike[str]) -> Iterator[None]:
    records = records_path(path)
    with contextlib.suppress(FileNotFoundError):
        os.remove(records)  # an earlier attempt's: never read as this job's
    with open(path, "w") as fh, contextlib.redirect_stdout(fh), contextlib.redirect_stderr(fh):
        handler = logging.StreamHandler(fh)
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
        progress = RecordsHandler(records)
        root = logging.getLogger()
        root.addHandler(handler)
        root.addHandler(progress)
        root.setLevel(logging.INFO)
        try:
            yield
        except BaseException:
            logging.exception("job failed")
            raise
        finally:
            root.removeHandler(handler)
            root.removeHandler(progress)
            progress.close()
            sys.stderr.flush()
