"""``zoomeval run``: a study from its config to its sealed tables, with a preflight and a progress display
(:mod:`zoomeval.run.launch`), driven by Snakemake's own events (:mod:`zoomeval.run.logger_plugin`,
:mod:`zoomeval.run.events`) and the jobs' progress records (:mod:`zoomeval.core.progress`)."""
