from zoomeval.core.checksums import sha256_file
from zoomeval.core.logs import to_file
from zoomeval.core.manifest import read_manifest
from zoomeval.datasets.inputs import local_path, plan_all
from zoomeval.datasets.multilabel import dataset_labels, read_annotations, write_dataset_labels
from zoomeval.registries import typed_config

sm = snakemake  # noqa: F821 (snakemake is injected by the script directive)
with to_file(sm.log[0]):
    config, dataset = typed_config(sm.config), sm.wildcards.dataset
    item = plan_all(config)["labels", "multilabel"]
    source = local_path(item)  # a local file is checked against a pinned sha256 here, a download when fetched
    digest = item.spec.sha256 or sha256_file(source)
    annotations = read_annotations(source)
    image_ids = [r.image_id for r in read_manifest(sm.input.manifest)]
    labels, coverage = dataset_labels(annotations, image_ids, config.datasets[dataset].adapter, dataset)
    write_dataset_labels(sm.output[0], labels, coverage, dataset, digest)
    print(f"{source} (sha256 {digest}): {len(annotations)} annotated images; dataset {dataset}: {coverage}")
