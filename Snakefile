# zoomeval: how much of a classifier's accuracy depends on zoom and on background.
# The logic lives in the zoomeval package (src/zoomeval); the rules below only wire files together.
from snakemake.utils import min_version

min_version("9.0")

if not config:

    configfile: "config/config.yaml"


include: "workflow/rules/common.smk"
include: "workflow/rules/datasets.smk"
include: "workflow/rules/masks.smk"
include: "workflow/rules/inference.smk"
include: "workflow/rules/analysis.smk"
include: "workflow/rules/tables.smk"


rule all:
    input:
        "results/table_a8.csv",
        "results/table_a8.md",
