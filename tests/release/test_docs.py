"""The docs' tables the stage matrix uses, refreshed by the release watch (issue 49): vLLM Neuron's model recipes
(real excerpts, tests/fixtures/release/README.md) parse into runners/vllm-neuron-docs.yaml exactly; a recipe whose
table changed is a new yaml in the release PR; a page's text is validated, never trusted."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml

from pipeline.errors import ConfigError
from pipeline.release import DOCS_FILE, TOOLCHAIN_FILE, parse_recipe, refresh_docs
from pipeline.release.docs import dump_docs
from tests import FIXTURES, ROOT

DOCS = (ROOT / DOCS_FILE).read_text(encoding="utf-8")
TABLE = yaml.safe_load(DOCS)["architectures"]
PAGES = {name: (FIXTURES / "release" / f"{name}.md").read_text(encoding="utf-8") for name in ("llama-3", "gpt-oss")}
PAGES["qwen3"] = (FIXTURES / "release" / "qwen3.md").read_text(encoding="utf-8")
NEW = "a" * 40
PREFIX = "| | Prefix caching (APC) | ✅ |"


def _pinned(repo: str, path: str) -> tuple[str, str]:
    """The pages at the commits the yaml names (nothing changed)."""
    [source] = {e["source"] for e in TABLE.values() if e["source"].endswith(path)}
    return re.findall(r"[0-9a-f]{40}", source)[0], PAGES[path.rsplit("/", 1)[1].removesuffix(".md")]


def test_the_real_recipes_parse_into_the_docs_file_and_the_file_writes_back_the_same() -> None:
    for arch, entry in TABLE.items():
        name = entry["source"].rsplit("/", 1)[1].removesuffix(".md")
        assert parse_recipe(PAGES[name], source=entry["source"]) == entry, arch
    assert dump_docs(DOCS, TABLE) == DOCS
    assert refresh_docs(DOCS, _pinned) == (None, []), "nothing changed: no new file"


def test_a_recipe_whose_table_changed_is_a_new_docs_file_and_the_matrix_reads_it(tmp_path: Path) -> None:
    from pipeline.queue import load_support

    def fetch(repo: str, path: str) -> tuple[str, str]:
        commit, page = _pinned(repo, path)
        if path.endswith("llama-3.md"):  # a newer commit: prefix caching withdrawn, a later date
            assert PREFIX in page
            page = page.replace(PREFIX, "| | Prefix caching (APC) | ❌ |").replace("2026-08-17", "2026-12-01")
            return NEW, page
        return commit, page

    text, notes = refresh_docs(DOCS, fetch)
    assert text is not None and notes == ["docs/model-recipes/llama-3.md: 9fc042e -> aaaaaaa (as of 2026-12-01)"]
    changed = [line for line in text.splitlines() if line not in DOCS.splitlines()]
    assert [line.split(":")[0].strip() for line in changed] == ["source", "as_of", "trn2", "trn3"]  # Llama's only
    (tmp_path / "docs.yaml").write_text(text, encoding="utf-8")
    llama = load_support(tmp_path / "docs.yaml")["LlamaForCausalLM"]
    assert llama["source"].endswith(f"/blob/{NEW}/docs/model-recipes/llama-3.md") and llama["as_of"] == "2026-12-01"
    assert llama["trn2"]["prefix_caching"] == llama["trn3"]["prefix_caching"] == "not_supported"
    assert load_support(tmp_path / "docs.yaml")["Qwen3MoeForCausalLM"] == TABLE["Qwen3MoeForCausalLM"]


@pytest.mark.parametrize(
    ("edit", "said"),
    [
        ((PREFIX, "| | Prefix caching (APC) | supported`; $(rm -rf ~) |"), "is none of"),
        ((PREFIX, "| | Prefix caching (APC) | |"), "is none of"),
        (("<!-- meta: date_updated: 2026-08-17 -->", "<!-- meta: date_updated: today -->"), "not a model recipe"),
        (("Trainium2 (`trn2`) and Trainium3 (`trn3`) hardware", "GPUs"), "not a model recipe"),
    ],
)
def test_an_unknown_status_or_a_page_that_is_no_recipe_is_refused(edit: tuple[str, str], said: str) -> None:
    page = PAGES["llama-3"].replace(*edit)
    assert page != PAGES["llama-3"]
    with pytest.raises(ConfigError, match=re.escape(said)):
        parse_recipe(page, source=TABLE["LlamaForCausalLM"]["source"])


@pytest.mark.parametrize("commit", ["../../etc/passwd", "A" * 40, ""])
def test_a_fetcher_that_gives_no_commit_or_a_huge_page_is_refused(commit: str) -> None:
    with pytest.raises(ConfigError, match="no commit"):
        refresh_docs(DOCS, lambda repo, path: (commit, PAGES["llama-3"]))
    with pytest.raises(ConfigError, match="over"):
        refresh_docs(DOCS, lambda repo, path: (NEW, "x" * 1_000_001))


def test_a_docs_file_whose_source_is_no_recipe_at_a_commit_or_that_is_no_table_is_refused() -> None:
    with pytest.raises(ConfigError, match="no vLLM Neuron page at a commit"):
        refresh_docs(DOCS.replace("https://github.com/vllm-project", "https://evil.example/vllm-project"), _pinned)
    for broken in (DOCS.replace("architectures:", "models:"), DOCS.replace("    trn3: {", "    trn4: {"), "- a\n"):
        with pytest.raises(ConfigError, match="not the docs' tables"):
            refresh_docs(broken, _pinned)


def test_the_watch_puts_the_changed_docs_file_in_the_release_pr(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from pipeline.cli import main
    from pipeline.cli import matrix as cli_matrix
    from tests.release.test_watch import MANIFEST, REAL, SOURCE, _at_232, _files

    def fetch(repo: str, path: str) -> tuple[str, str]:
        commit, page = _pinned(repo, path)
        return (NEW, page.replace(PREFIX, "| | Prefix caching (APC) | ❌ |")) if "llama" in path else (commit, page)

    monkeypatch.setattr(cli_matrix, "recipe_fetcher", fetch)  # no network here: the page a newer commit would give
    for relative, text in {**_files(_at_232(REAL)), DOCS_FILE: DOCS}.items():
        (tmp_path / relative).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / relative).write_text(text, encoding="utf-8")
    args = ["release-watch", "--manifest", str(MANIFEST), "--source", SOURCE, "--root", str(tmp_path), "--json"]
    assert main([*args, "--docs", "--body", str(tmp_path / "pr.md")]) == 0
    assert DOCS_FILE in json.loads(capsys.readouterr().out)["files"]
    written = yaml.safe_load((tmp_path / DOCS_FILE).read_text(encoding="utf-8"))["architectures"]
    assert written["LlamaForCausalLM"]["trn2"]["prefix_caching"] == "not_supported"
    assert "llama-3.md: 9fc042e -> aaaaaaa" in (tmp_path / "pr.md").read_text(encoding="utf-8")
    assert (tmp_path / TOOLCHAIN_FILE).read_text(encoding="utf-8") != _at_232(REAL)


def test_a_watch_whose_docs_cannot_be_read_writes_nothing_and_says_why(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from pipeline.cli import main
    from pipeline.cli import matrix as cli_matrix
    from tests.release.test_watch import MANIFEST, REAL, SOURCE, _at_232, _files

    def offline(repo: str, path: str) -> tuple[str, str]:
        raise ConfigError(f"{repo} {path}: GitHub gave no newest commit and text: no network")

    monkeypatch.setattr(cli_matrix, "recipe_fetcher", offline)
    for relative, text in _files(_at_232(REAL)).items():
        (tmp_path / relative).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / relative).write_text(text, encoding="utf-8")
    args = ["release-watch", "--manifest", str(MANIFEST), "--source", SOURCE, "--root", str(tmp_path), "--docs"]
    assert main(args) != 0 and "vllm-neuron-docs.yaml: unreadable" in capsys.readouterr().err  # no docs file
    (tmp_path / DOCS_FILE).write_text(DOCS, encoding="utf-8")
    assert main(args) != 0 and "no network" in capsys.readouterr().err
    assert (tmp_path / TOOLCHAIN_FILE).read_text(encoding="utf-8") == _at_232(REAL), "nothing written"
