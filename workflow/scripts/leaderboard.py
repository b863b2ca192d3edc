from pathlib import Path

from zoomeval.core.layout import run_layout
from zoomeval.core.logs import to_file
from zoomeval.publish.leaderboard import leaderboard, study_rows, with_published, write_board

sm = snakemake  # noqa: F821 (snakemake is injected by the script directive)
with to_file(sm.log[0]):
    # this study's rows, read through its index as `zoomeval leaderboard` reads it, named after its directory
    rows, _ = study_rows(Path("."), Path.cwd().name, layout=run_layout(sm.params.limit))
    board = with_published(leaderboard(rows))  # as zoomeval leaderboard shows it
    for path in sm.output:
        write_board(board, Path(path))
