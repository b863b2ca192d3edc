from pathlib import Path

from zoomeval.core.layout import run_layout
from zoomeval.core.logs import to_file
from zoomeval.report.leaderboard import leaderboard, study_rows, write_board

sm = snakemake  # noqa: F821 (snakemake is injected by the script directive)
with to_file(sm.log[0]):
    # this study's rows (the config's models, datasets and variants), named after its directory
    metrics = [Path(p) for p in sm.input.metrics]
    board = leaderboard(study_rows(Path("."), Path.cwd().name, metrics, run_layout(sm.params.limit).root))
    for path in sm.output:
        write_board(board, Path(path))
