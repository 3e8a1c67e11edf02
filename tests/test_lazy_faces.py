"""Lazy package faces (:func:`pipeline.registry.lazy_face`): a name's module is imported on the name's first use,
the face's ``TYPE_CHECKING`` imports are the one list, and a name shared with a submodule stays the public one."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent

FACE = '''\
"""A face."""
from __future__ import annotations

from typing import TYPE_CHECKING

from pipeline.registry import lazy_face

if TYPE_CHECKING:
    from pkgx import helper
    from pkgx.build import build
    from pkgx.other import OTHER, renamed as alias

__all__ = ["OTHER", "alias", "build", "helper"]

lazy_face(__name__)
'''


@pytest.fixture
def package(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "pkgx"
    root.mkdir()
    (root / "__init__.py").write_text(FACE)
    (root / "build.py").write_text("def build():\n    return 'built'\n")
    (root / "other.py").write_text("import pkgx.build\nOTHER = 7\ndef renamed():\n    return 'renamed'\n")
    (root / "helper.py").write_text("VALUE = 'helper module'\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    yield root
    for name in [m for m in sys.modules if m == "pkgx" or m.startswith("pkgx.")]:
        del sys.modules[name]


def test_a_name_s_module_is_imported_on_first_use_only(package: Path) -> None:
    import pkgx

    assert "pkgx.other" not in sys.modules and "pkgx.build" not in sys.modules
    assert pkgx.OTHER == 7
    assert "pkgx.other" in sys.modules
    assert pkgx.alias() == "renamed"  # an ``as`` name is the face's name
    assert {"OTHER", "alias", "build", "helper"} <= set(dir(pkgx))


def test_a_name_shared_with_a_submodule_stays_the_public_object(package: Path) -> None:
    import pkgx

    _ = pkgx.OTHER  # pkgx.other imports pkgx.build: the import system binds the submodule on the face
    assert "pkgx.build" in sys.modules
    assert callable(pkgx.build) and pkgx.build() == "built"
    from pkgx import build

    assert build() == "built"


def test_a_face_can_list_a_submodule_itself(package: Path) -> None:
    import pkgx

    assert pkgx.helper.VALUE == "helper module"


def test_an_unknown_name_is_an_attribute_error(package: Path) -> None:
    import pkgx

    with pytest.raises(AttributeError, match="pkgx.*nope"):
        _ = pkgx.nope
    with pytest.raises(ImportError):
        exec("from pkgx import nope", {})


def test_check_starts_without_the_dataset_build_the_page_or_the_hub_library() -> None:
    # trncat check's start-up: its command and package import no heavy library and no module a check never uses
    code = textwrap.dedent("""
        import sys
        import pipeline.cli.check, pipeline.check
        heavy = ("pyarrow", "pandas", "huggingface_hub", "jinja2", "torch", "transformers", "numpy",
                 "pipeline.dataset.build", "pipeline.page.html", "pipeline.hub.client")
        print(sorted(m for m in heavy if m in sys.modules))
    """)
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"
