"""Reading the family index the way ``trncat check`` asks it: which file(s) hold it, and only the rows a check needs.

A check wants the rows of a handful of models (the checked one and its bases) and of one family (architecture,
model_type, task). The index is read into one Arrow table (columnar, no Python object per row), and each question
is answered by a vectorised filter over it: the model's own rows (and its bases') become Python dicts, and the
family is counted over the columns (:meth:`FamilyIndex.family_stat`, :mod:`pipeline.dataset.family_arrow`), a row
of it becoming a dict only when the verdict reads it. At 100,000 models a family holds a few thousand rows: none is
read whole (``benchmarks/check_scale.py``).

:func:`family_index_paths` is the one place that says which files of the dataset repo hold the index: a check
downloads exactly those.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from pipeline.dataset import family_arrow
from pipeline.dataset.family_arrow import family_mask, pylist, strings
from pipeline.dataset.layout import families_schema, read_table
from pipeline.dataset.read import require_dataset
from pipeline.dataset.shards import family_files
from pipeline.errors import DatasetError
from pipeline.records import FamilyStat


def folder_family_index(root: Path) -> FamilyIndex:
    """The family index of a local dataset folder.

    Raises:
        DatasetError: no such folder, it holds no dataset, or a file is unreadable.
    """
    root = require_dataset(root)
    return FamilyIndex.read(root, [path.relative_to(root).as_posix() for path in family_files(root)])


class FamilyIndex:
    """The family rows of one dataset as an Arrow table, asked by model id and by family.

    Model ids compare without case (the Hub resolves them so), as :func:`pipeline.records.rows_of` does; rows come
    back in the index's order (by key), as the whole list would give them.
    """

    def __init__(self, table: pa.Table) -> None:
        self._table = table.cast(families_schema()) if not table.schema.equals(families_schema()) else table
        self._ids = pc.utf8_lower(self._table.column("model_id"))

    def __len__(self) -> int:
        return self._table.num_rows

    @classmethod
    def read(cls, root: Path, paths: Iterable[str]) -> FamilyIndex:
        """The index held in ``paths`` under ``root`` (empty when they are none).

        Raises:
            DatasetError: a file is unreadable, or the files do not read as one table.
        """
        tables = [read_table(root / path) for path in paths]
        try:
            return cls(pa.concat_tables(tables) if tables else families_schema().empty_table())
        except pa.ArrowException as exc:
            raise DatasetError(f"{root}: the family index does not read as one table: {exc}") from exc

    def select(
        self, *, model_ids: Iterable[str] = (), family: tuple[str, str | None, str] | None = None
    ) -> list[dict[str, Any]]:
        """The rows of ``model_ids`` (any task) and of ``family`` = (architecture, model_type, task), each once.

        A ``model_type`` of None matches rows without one, as :func:`pipeline.records.family_stat` compares.
        """
        wanted = sorted({m.lower() for m in model_ids})
        # is_in against value sets without a null: never null itself, so the masks combine without a fill.
        mask = pc.is_in(self._ids, value_set=strings(wanted)) if wanted else None
        if family is not None:
            same = family_mask(self._table, *family)
            mask = same if mask is None else pc.or_(mask, same)
        if mask is None:
            return []
        return pylist(self._table.filter(mask))

    def family_stat(self, architecture: str, model_type: str | None, task: str) -> FamilyStat:
        """How the family (architecture, model_type, task) fared: :func:`pipeline.records.family_stat` of its
        rows, counted over the index's columns (:mod:`pipeline.dataset.family_arrow`)."""
        return family_arrow.family_stat(self._table, architecture=architecture, model_type=model_type, task=task)
