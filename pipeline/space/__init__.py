"""The catalog Space (``trncat page``): a static Hub Space rebuilt from the dataset's merged main only.

- :mod:`~pipeline.space.tree`: the Space's tree from a dataset folder: the page, the scripts it links to, the
  Atom feed of the changes and the Space card (``sdk: static``); the one owner of that layout;
- :mod:`~pipeline.space.commit`: snapshot the dataset's ``main`` (never a pull request), build the tree, and commit
  to the Space only the files that changed.

May import: the top-level modules, :mod:`pipeline.hub`, :mod:`pipeline.dataset` (the snapshot read back),
:mod:`pipeline.page`, :mod:`pipeline.records` (the feed's verdicts on a release diff) and :mod:`pipeline.render`
(the Space card). Imported by: the CLI.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pipeline.registry import lazy_face

if TYPE_CHECKING:
    from pipeline.space.commit import DATASET_PATTERNS, SpaceResult, build_space, publish_space
    from pipeline.space.tree import (
        ATOM,
        FEED_ENTRIES,
        FEED_FILE,
        SPACE_CARD,
        SPACE_PAGE,
        SiteNames,
        feed_xml,
        write_site,
    )


lazy_face(__name__)
