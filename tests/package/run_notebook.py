"""Run a notebook in a kernel (nbclient) and export it to HTML (nbconvert).

Usage: python run_notebook.py NOTEBOOK.ipynb OUT.html. Run with the fresh venv's python,
so that the kernel (the same interpreter) imports the installed wheel.
"""

import sys

import nbformat
from nbclient import NotebookClient
from nbconvert import HTMLExporter


def main(source: str, target: str) -> None:
    notebook = nbformat.read(source, as_version=4)
    NotebookClient(notebook, timeout=300, kernel_name="python3").execute()
    nbformat.write(notebook, source)
    body, _ = HTMLExporter().from_notebook_node(notebook)
    with open(target, "w", encoding="utf-8") as fh:
        fh.write(body)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
