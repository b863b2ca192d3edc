# zoomeval: how much of a classifier's accuracy depends on zoom and on background.
# The logic lives in the zoomeval package (src/zoomeval); the rules below only wire files together.
import os
import sys

from snakemake.utils import min_version

min_version("9.0")

# This file's folder: the checkout, or the installed package's copy of the workflow. Not workflow.basedir, which is
# the main Snakefile's folder, a study directory's when this workflow is used as a module (zoomeval init); every file
# of the workflow's own is found from here.
ZOOMEVAL_ROOT = str(workflow.current_basedir)
# In a checkout, make its package importable here and in every job, installed or not (e.g. under --sdm conda); an
# installed wheel's workflow runs with the package installed beside it. PYTHONPATH is extended, not required, so it
# is no case for the envvars directive (update() keeps --lint from taking the assignment for a read).
SRC = os.path.join(ZOOMEVAL_ROOT, "src")
if os.path.isdir(os.path.join(SRC, "zoomeval")):
    sys.path.insert(0, SRC)
    os.environ.update(PYTHONPATH=os.pathsep.join(filter(None, [SRC, os.environ.get("PYTHONPATH")])))

from zoomeval.core.strict_yaml import check_config_file

# The demo config is the default; a --configfile replaces it (--config key=value edits it). It is read strictly
# first: Snakemake's loader would render a __use_yte__ template (running its expressions) and expand alias bombs, and
# stop at a syntax error, a deep or non-mapping file with a traceback.
if not workflow.overwrite_configfiles:
    check_config_file("config/config.yaml")

    configfile: "config/config.yaml"


report: "workflow/report/workflow.rst"


include: "workflow/rules/common.smk"
include: "workflow/rules/fetch.smk"
include: "workflow/rules/datasets.smk"
include: "workflow/rules/masks.smk"
include: "workflow/rules/inference.smk"
include: "workflow/rules/tta.smk"
include: "workflow/rules/analysis.smk"
include: "workflow/rules/statistics.smk"
include: "workflow/rules/tables.smk"
include: "workflow/rules/figures.smk"
include: "workflow/rules/browser.smk"
include: "workflow/rules/hard_set.smk"
include: "workflow/rules/multilabel.smk"
include: "workflow/rules/policies.smk"


# Checks that import torchvision, timm or open_clip run once when a run starts, before any job: not when the
# workflow is parsed, so `snakemake -n` (which runs no hook) checks the schema, the structure and the models' names
# (against the libraries' cached name lists, common.smk) only, and neither do the jobs, which Snakemake starts with
# --no-hooks. A study directory's Snakefile calls start_checks (common.smk) in its own onstart (a module's is not run).
onstart:
    start_checks()


rule all:
    input:
        final_outputs(),
        POLICY_OUTPUTS,
        STUDY_INDEX,


# zoomeval run's default target: every table and the sealed study index (what `zoomeval leaderboard` reads), without
# the figures, statistics, browser and hard sets of `all` (zoomeval.run.targets).
rule study:
    input:
        STUDY_TABLES,
        STUDY_INDEX,
