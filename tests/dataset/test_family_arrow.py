"""The architecture rule counted over the family index's columns (issue 36) is the rule of the rows: on mixed
indexes (toolchains, hardware, Trainium3, CPU and cuda rows, errors, ties in time, ids in two cases, families
without a model_type) :meth:`FamilyIndex.family_stat` equals :func:`pipeline.records.family_stat` of the same rows,
and ``trncat check``'s verdict, reason, evidence and rows are the same either way."""

from __future__ import annotations

import datetime as dt
import random
import subprocess
import sys
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from pipeline.check import Base, decide
from pipeline.dataset import FamilyIndex
from pipeline.dataset.layout import families_schema
from pipeline.models import Family
from pipeline.records import FAMILY_COLUMNS, family_stat

TG = "text-generation"
FAMILIES = [("LlamaForCausalLM", "llama"), ("LlamaForCausalLM", None), ("MistralForCausalLM", "mistral")]
HARDWARE = {"neuron": ["trn2.48xlarge", "trn2.3xlarge", "trn3.48xlarge", None], "cpu": ["cpu-x86_64"], "cuda": ["g6"]}
TOOLCHAINS = [("2.21.0", "2.14.0"), ("2.20.0", "2.13.0"), (None, "2.14.0")]


def _row(rng: random.Random, i: int) -> dict[str, Any]:
    architecture, model_type = rng.choice(FAMILIES)
    device = rng.choice(["neuron", "neuron", "neuron", "cpu", "cuda"])
    status = rng.choice(["pass", "pass", "fail", "error"])
    cc, tnx = rng.choice(TOOLCHAINS)
    when = dt.datetime(2026, 11, rng.randint(1, 4), tzinfo=dt.UTC) + dt.timedelta(microseconds=rng.choice([0, 5]))
    row: dict[str, Any] = {name: None for name, _ in FAMILY_COLUMNS}
    row.update(
        model_id=rng.choice(["acme/a", "Acme/A", "acme/b", "org/c", "org/d", "org/e", f"x/m{i % 9}"]),
        task=rng.choice([TG, TG, TG, "sentence-embeddings"]), hardware=rng.choice(HARDWARE[device]), device=device,
        status=status, failure_code=rng.choice(["ncc_eoom001", "ncc_e002", "", None]) if status == "fail" else None,
        cores=rng.choice([1, 2, 8, None]), revision=f"{i:040x}", finished_at=when, source="ci",
        architecture=architecture, model_type=model_type, neuronx_cc_version=cc, torch_neuronx_version=tnx,
        transformers_version="5.0.0", torch_version="2.9.0", dtype="bfloat16",
    )  # fmt: skip
    return row


def _index(seed: int, n: int) -> tuple[FamilyIndex, list[dict[str, Any]]]:
    rng = random.Random(seed)
    rows = sorted((_row(rng, i) for i in range(n)), key=lambda r: (r["model_id"], r["task"], str(r["hardware"])))
    index = FamilyIndex(pa.Table.from_pylist(rows, schema=families_schema()))
    return index, index.select(model_ids={r["model_id"] for r in rows})  # the rows as the index gives them


@pytest.mark.parametrize("seed", range(40))
def test_the_columns_count_a_family_as_the_rows_do(seed: int) -> None:
    index, rows = _index(seed, 3 + seed * 2)
    for architecture, model_type in [*FAMILIES, ("GPT2LMHeadModel", "gpt2")]:
        for task in (TG, "sentence-embeddings"):
            old = family_stat(rows, architecture=architecture, model_type=model_type, task=task)
            new = index.family_stat(architecture, model_type, task)
            assert new == old
            assert list(new.rows) == list(old.rows) and list(new.ordered) == list(old.ordered)
            assert new.ordered[:1] == list(old.ordered[:1]) and (not new.rows or new.rows[-1] == old.rows[-1])


@pytest.mark.parametrize("seed", range(40))
def test_a_check_says_the_same_from_the_columns_as_from_the_rows(seed: int) -> None:
    index, rows = _index(seed, 3 + seed * 2)
    for architecture, model_type in [*FAMILIES, ("GPT2LMHeadModel", "gpt2")]:
        ft = [[Base("acme/b", "finetune", ("me/ft", "acme/b"))]]
        for model_id, hops in (("me/new", []), ("org/c", []), ("me/ft", ft)):
            args: dict[str, Any] = dict(model_id=model_id, revision="f" * 40, task=TG, hops=hops,
                                        family=Family(architecture, model_type))  # fmt: skip
            wanted = [model_id, *(b.model_id for hop in hops for b in hop)]
            # What trncat check gave the rules before (its own rows, its bases' and its family's), and now.
            old = decide(rows=index.select(model_ids=wanted, family=(architecture, model_type, TG)), **args)
            new = decide(rows=index.select(model_ids=wanted), stats=index.family_stat, **args)
            assert (new.verdict, new.reason, new.evidence) == (old.verdict, old.reason, old.evidence)
            assert list(new.rows) == list(old.rows)


def test_counting_a_family_imports_no_pandas(tmp_path: Path) -> None:
    import pyarrow.parquet as pq

    index, rows = _index(7, 40)
    pq.write_table(pa.Table.from_pylist(rows, schema=families_schema()), tmp_path / "families.parquet")
    code = (
        "import sys\n"
        "from pathlib import Path\n"
        "from pipeline.dataset import FamilyIndex\n"
        "from pipeline.dataset.layout import read_table\n"
        "index = FamilyIndex(read_table(Path(sys.argv[1])))\n"
        "for family in (('LlamaForCausalLM', 'llama'), ('LlamaForCausalLM', None), ('Novel', 'novel')):\n"
        "    stat = index.family_stat(*family, 'text-generation'); stat.evidence('architecture'); list(stat.ordered)\n"
        "print('pandas' in sys.modules)\n"
    )
    done = subprocess.run([sys.executable, "-c", code, str(tmp_path / "families.parquet")], capture_output=True,
                          text=True, check=True)  # fmt: skip
    assert done.stdout.strip() == "False", done.stderr
