"""Generated files from jinja2 templates (``templates/``): a row's ``run.py`` and ``requirements.txt``, the
dataset card and the Space card.

- :mod:`~pipeline.render.templating`: the environment (StrictUndefined) and the filters that make untrusted text
  safe in Python, Markdown and YAML;
- :mod:`~pipeline.render.scripts`: ``run.py`` per task (one install header for all) and ``requirements.txt``
  pinned to the record's versions;
- :mod:`~pipeline.render.card`: the dataset card.

May import: the top-level modules and :mod:`pipeline.backends` (each device's install lines and requirements).
Imported by: :mod:`pipeline.dataset` (scripts and card), :mod:`pipeline.space` (the Space card) and
:mod:`pipeline.publish` (the PR description's cells).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pipeline.registry import lazy_face

if TYPE_CHECKING:
    from pipeline.render.card import card_counts, dataset_card
    from pipeline.render.scripts import (
        requirement_lines,
        requirements,
        run_script,
        torchvision_for,
    )
    from pipeline.render.templating import environment, md_cell, py_literal, render, yaml_scalar


lazy_face(__name__)
