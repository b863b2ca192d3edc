"""``zoomeval predict``: a saved zoom policy applied to image files, a CSV row each (:mod:`zoomeval.policy.apply`)."""

from __future__ import annotations

import argparse
import sys

from zoomeval.cli.common import add_shared, directory, output
from zoomeval.core.cells import terminal_text


def add(commands: argparse._SubParsersAction) -> None:
    predict = commands.add_parser(
        "predict",
        help="apply an exported zoom policy to image files and folders: a CSV "
        "row per image (class, confidence, the view that answered, passes)",
    )
    predict.add_argument("images", nargs="+", metavar="IMAGE", help="image files, and folders searched recursively")
    predict.add_argument("--policy", required=True, metavar="FILE", help="a file of zoomeval policy save")
    weights = predict.add_mutually_exclusive_group(required=True)
    weights.add_argument("--study", type=directory, metavar="DIR", help="the policy's study (weights in DIR/resources)")
    add_shared(weights, "--resources", "the folder holding the weights/ folder")
    predict.add_argument("--device", default="cpu", help="cpu (default), cuda, cuda:N or auto")
    predict.add_argument("--batch-size", type=int, default=64, metavar="N", help="crops per forward pass (default 64)")
    predict.add_argument("-o", "--output", metavar="FILE.csv", help="default: CSV on stdout")
    predict.set_defaults(run=execute)


def execute(args: argparse.Namespace) -> int:
    from zoomeval.core.io import csv_text, write_text
    from zoomeval.policy.apply import COLUMNS, image_paths, policy_wrapper, predict_rows

    path, paths = output(args), image_paths(args.images)
    resources = args.resources or args.study / "resources"
    text = csv_text(COLUMNS, predict_rows(policy_wrapper(args.policy, resources, args.device, args.batch_size), paths))
    if path:
        write_text(path, text)
        print(terminal_text(f"{args.output}: {len(paths)} images"), file=sys.stderr)
    else:
        print(terminal_text(text), end="")
    return 0
