"""``zoomeval run``: a study from its config to Table A8 with a preflight and a progress display
(:mod:`zoomeval.run.launch`), reading Snakemake's output (:mod:`zoomeval.run.snakemake_log`) and the jobs' progress
lines (:mod:`zoomeval.core.progress`)."""
