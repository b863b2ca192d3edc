"""``python -m zoomeval`` and the ``zoomeval`` command: :mod:`zoomeval.cli`, or one line where the installation is
broken (its workflow files or a dependency missing), since that shows when the command's modules are imported."""

import sys

from zoomeval.core.provenance import MissingWorkflow


def main() -> int:
    try:
        from zoomeval.cli import main as command
    except MissingWorkflow as exc:
        print(f"zoomeval: {exc}", file=sys.stderr)
        return 2
    except ModuleNotFoundError as exc:
        if (exc.name or "").partition(".")[0] == "zoomeval":  # the package's own: a bug, with its traceback
            raise
        how = "install it with zoomeval's dependencies (pip install zoomeval-*.whl, or pip install -e . in a checkout)"
        print(f"zoomeval: {exc}: a dependency of zoomeval is missing; {how}", file=sys.stderr)
        return 2
    return command()


if __name__ == "__main__":
    raise SystemExit(main())
