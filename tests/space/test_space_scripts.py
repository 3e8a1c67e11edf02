"""The Space's scripts (issue 36): which models have scripts comes from one walk of the dataset's ``scripts/``, their
texts are read only when the page inlines them, the files are hard-linked into the Space rather than copied, and a
symlink in the dataset's ``scripts/`` never carries what it points at into the Space."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from pipeline import fsatomic
from pipeline.dataset import ScriptTexts, build, script_files
from pipeline.space import SiteNames, write_site
from tests.support.records import sample_record

NAMES = SiteNames(dataset_repo="trncat/results", space_repo="trncat/catalog")


def _dataset(root: Path) -> Path:
    build([sample_record(model_id="acme/one"), sample_record(model_id="acme/two")], root)
    return root


def test_script_texts_knows_which_models_have_scripts_and_reads_them_on_demand(tmp_path: Path) -> None:
    root = _dataset(tmp_path / "dataset")
    scripts = ScriptTexts(root)
    assert sorted(scripts) == ["acme/one", "acme/two"] and len(scripts) == 2
    assert "acme/one" in scripts and "acme/none" not in scripts
    assert "../etc" not in scripts and 7 not in scripts  # no valid id: no folder, no error
    texts = scripts["acme/one"]
    assert set(texts) == {"run.py", "requirements.txt"} and "acme/one" in texts["run.py"]
    assert scripts.get("acme/none") is None
    with pytest.raises(KeyError):
        scripts["acme/none"]
    (root / "scripts/acme/two/run.py").unlink()
    (root / "scripts/acme/two/requirements.txt").unlink()
    assert "acme/two" not in ScriptTexts(root)  # a folder without a script is no model with scripts


def test_a_symlinked_script_carries_nothing_into_the_space(tmp_path: Path) -> None:
    """The attack: a dataset snapshot whose scripts/ holds a symlink to a runner's secret. Copying files by
    following links put the secret's bytes into the Space, public; now a link is no script."""
    root = _dataset(tmp_path / "dataset")
    secret = tmp_path / "secret"
    secret.write_text("hf_TOKEN_never_published", encoding="utf-8")
    run = root / "scripts/acme/one/run.py"
    run.unlink()
    run.symlink_to(secret)
    (root / "scripts/acme/evil").symlink_to(tmp_path, target_is_directory=True)
    assert "scripts/acme/one/run.py" not in script_files(root)
    assert ScriptTexts(root)["acme/one"].keys() == {"requirements.txt"}
    write_site(root, tmp_path / "space", names=NAMES)
    space = tmp_path / "space"
    held = [p for p in space.rglob("*") if p.is_file()]
    assert not any("hf_TOKEN" in p.read_text(encoding="utf-8", errors="replace") for p in held)
    assert not (space / "scripts/acme/one/run.py").exists() and not (space / "scripts/acme/evil").exists()
    assert (space / "scripts/acme/two/run.py").is_file()


def test_the_space_links_the_datasets_scripts_and_rebuilds_them_whole(tmp_path: Path) -> None:
    root = _dataset(tmp_path / "dataset")
    space = tmp_path / "space"
    write_site(root, space, names=NAMES)
    for name in ("acme/one", "acme/two"):
        for file in ("run.py", "requirements.txt"):
            ours, theirs = space / "scripts" / name / file, root / "scripts" / name / file
            assert ours.read_bytes() == theirs.read_bytes()
            assert os.stat(ours).st_ino == os.stat(theirs).st_ino  # a link: no data copied
    (root / "scripts/acme/two/run.py").unlink()
    (root / "scripts/acme/two/requirements.txt").unlink()
    write_site(root, space, names=NAMES)  # again, over the first: a script the dataset dropped is gone
    assert not (space / "scripts/acme/two").exists() and (space / "scripts/acme/one/run.py").is_file()


def test_link_files_copies_where_no_link_can_be_made(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    source, target = tmp_path / "source", tmp_path / "target"
    (source / "a/b").mkdir(parents=True)
    (source / "a/b/run.py").write_text("print(1)\n", encoding="utf-8")
    (target / "a/b").mkdir(parents=True)
    (target / "a/b/run.py").write_text("old\n", encoding="utf-8")  # replaced, never written through

    def cross_device(*args: object, **kwargs: object) -> None:
        raise OSError(errno.EXDEV, "Invalid cross-device link")

    monkeypatch.setattr(os, "link", cross_device)
    fsatomic.link_files(source, target, ["a/b/run.py"])
    assert (target / "a/b/run.py").read_text(encoding="utf-8") == "print(1)\n"
    assert os.stat(target / "a/b/run.py").st_ino != os.stat(source / "a/b/run.py").st_ino


def test_link_files_says_what_stands_in_the_way(tmp_path: Path) -> None:
    source, target = tmp_path / "source", tmp_path / "target"
    (source / "a").mkdir(parents=True)
    (source / "a/run.py").write_text("x\n", encoding="utf-8")
    target.mkdir()
    (target / "a").write_text("a file where a folder must be\n", encoding="utf-8")
    with pytest.raises(fsatomic.InTheWay, match="a file where a folder must be"):
        fsatomic.link_files(source, target, ["a/run.py"])
    (target / "a").unlink()
    (target / "a/run.py").mkdir(parents=True)
    with pytest.raises(fsatomic.InTheWay, match="a folder where a file must be"):
        fsatomic.link_files(source, target, ["a/run.py"])
