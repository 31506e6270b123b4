"""Tools for working on attention-viz, shared by ``tests/`` and ``bench/``.

Not part of the installed package (``pyproject.toml`` ships ``app`` and
``attention_core`` only): it is imported from a source checkout, with the
repository root on ``sys.path`` (pytest's ``pythonpath``; the benches insert it).
"""
