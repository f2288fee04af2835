"""What the notebook generators share: cells are collected with md() and
code(), then main() writes the notebook (without outputs) or, with --strip,
drops the per-cell timestamps nbconvert --execute records.

    cd notebooks && /usr/bin/python3 src/NAME.py            # writes NAME.ipynb
    PYTHONPATH=<lowp python package> jupyter nbconvert --to notebook --execute --inplace NAME.ipynb
    /usr/bin/python3 src/NAME.py --strip
"""
import os
import sys

import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

CELLS = []


def md(text):
    CELLS.append(new_markdown_cell(text.strip("\n")))


def code(text):
    CELLS.append(new_code_cell(text.strip("\n")))


def build(path):
    nb = new_notebook(cells=CELLS)
    nb.metadata["kernelspec"] = {"display_name": "Python 3 (ipykernel)", "language": "python", "name": "python3"}
    nb.metadata["language_info"] = {"name": "python"}
    nbformat.write(nb, path)


def strip(path):
    nb = nbformat.read(path, as_version=4)
    for cell in nb.cells:
        cell.metadata.pop("execution", None)
    nbformat.write(nb, path)


def main(name):
    """`name`: the notebook's file name, next to src/."""
    default = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", name)
    if sys.argv[1:2] == ["--strip"]:
        strip(sys.argv[2] if len(sys.argv) > 2 else default)
    else:
        build(sys.argv[1] if len(sys.argv) > 1 else default)
