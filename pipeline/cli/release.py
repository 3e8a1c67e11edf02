"""Neuron releases: ``trncat release-watch`` (a new release -> the bump's files and pull request description) and
``trncat diff --toolchain OLD NEW`` (what a toolchain change did to the catalog, model by model), and the release diff
``trncat publish --release-diff OLD NEW`` adds to its pull request."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from pipeline.cli.registry import command, dataset_folder, in_file, in_folder, out_file
from pipeline.errors import ConfigError

# -- release-watch --------------------------------------------------------------------------------------


def _watch_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--manifest", type=in_file, required=True, metavar="FILE", help="the Neuron release manifest (JSON)")
    p.add_argument("--source", required=True, metavar="URL", help="where the manifest was read from (named in the PR)")
    p.add_argument("--root", type=in_folder, default=Path("."), metavar="DIR", help="the repository (default: .)")
    p.add_argument("--body", type=out_file, metavar="FILE", help="write the pull request's description here")
    p.add_argument("--json", action="store_true", help="print {new, old, title, branch, files} (or {new: null})")
    p.add_argument("--docs", action="store_true", help="also read runners/vllm-neuron-docs.yaml's recipes again at "
                   "their newest commits (GitHub): changed tables join the bump")  # fmt: skip


@command(
    "release-watch",
    help="A Neuron release newer than runners/toolchain.yaml's: rewrite its pins, apt pins and the runner image tag "
    "from the release manifest, and write the pull request's description (nothing new: no change).",
    example="trncat release-watch --manifest n2-manifest.json --source https://example.org/n2-manifest.json "
    "--body pr.md",
    arguments=_watch_args,
)
def _release_watch(args: argparse.Namespace) -> int:
    from pipeline import fsatomic
    from pipeline.release import TOOLCHAIN_FILE, parse_manifest, plan_bump

    try:
        manifest_text = args.manifest.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{args.manifest}: unreadable: {exc}") from None
    manifest = parse_manifest(manifest_text)
    named = (TOOLCHAIN_FILE, "runners/Dockerfile", "runners/arc-values.yaml")
    files = {name: (args.root / name).read_text(encoding="utf-8") for name in named if (args.root / name).is_file()}
    if TOOLCHAIN_FILE not in files:
        raise ConfigError(f"{args.root / TOOLCHAIN_FILE}: no such file")
    bump = plan_bump(files, manifest, source=args.source)
    if bump is None:
        if args.json:
            print(json.dumps({"new": None}))
        else:
            print(f"no new Neuron release: the manifest's latest for trn2 is not newer than {TOOLCHAIN_FILE}'s")
        return 0
    if args.docs:  # the docs' tables the stage matrix uses: a change is a diff in the release PR (issue 49)
        from pipeline.cli.matrix import recipe_fetcher
        from pipeline.release import DOCS_FILE, refresh_docs

        try:  # kept to put back if the bump fails
            files[DOCS_FILE] = (args.root / DOCS_FILE).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise ConfigError(f"{args.root / DOCS_FILE}: unreadable: {exc}") from None
        docs, notes = refresh_docs(files[DOCS_FILE], recipe_fetcher)
        if docs is not None:
            bump.files[DOCS_FILE] = docs
            said = f"\nvLLM Neuron's docs tables changed (`{DOCS_FILE}`, the stage matrix's `documented` column):\n\n"
            bump.body += said + "".join(f"- {note}\n" for note in notes)
    for relative, text in bump.files.items():
        fsatomic.write_text(args.root / relative, text)
    _load_back(args.root, bump, files)
    if args.body is not None:
        fsatomic.write_text(args.body, bump.body)
    if args.json:
        info = {key: getattr(bump, key) for key in ("new", "old", "title", "branch")}
        print(json.dumps({**info, "files": sorted(bump.files)}))
    else:
        print(bump.title)
        print(bump.body)
    return 0


def _load_back(root: Path, bump: Any, before: dict[str, str]) -> None:
    """Load the toolchain file the bump wrote (issue 47.6): it must parse as YAML and name the new release and each
    new pin; otherwise every file is put back as it was and the watch stops before its pull request."""
    import yaml

    from pipeline import fsatomic
    from pipeline.release import TOOLCHAIN_FILE, current_release

    path = root / TOOLCHAIN_FILE
    try:
        text = path.read_text(encoding="utf-8")
        data = yaml.safe_load(text)
        if not isinstance(data, dict) or not isinstance(data.get("apt", {}), dict):
            raise ConfigError("not a mapping of pins with an apt: mapping")
        got = {**data, **{f"apt.{k}": v for k, v in data.get("apt", {}).items()}}
        wanted = {p.key: p.new for p in bump.pins if p.file == TOOLCHAIN_FILE}
        wrong = sorted(k for k, v in wanted.items() if got.get(k) != v)
        if current_release(text) != bump.new or wrong:
            raise ConfigError(f"the release or the pins {', '.join(wrong) or '(none)'} read back otherwise")
    except (ConfigError, yaml.YAMLError) as exc:
        for relative in bump.files:
            fsatomic.write_text(root / relative, before[relative])
        why = str(exc)[:200]
        raise ConfigError(f"{TOOLCHAIN_FILE} as bumped does not load back ({why}): nothing written") from None


# -- diff -----------------------------------------------------------------------------------------------


def _diff_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--toolchain", nargs=2, type=in_file, required=True, metavar=("OLD", "NEW"),
                   help="the two toolchain files (runners/toolchain.yaml before and after a bump)")  # fmt: skip
    p.add_argument(
        "--dataset", type=dataset_folder, required=True, metavar="DIR", help="a dataset folder (its data/results)"
    )
    p.add_argument("--write", action="store_true", help="keep it as DIR/data/releases/<old>--<new>.parquet")
    p.add_argument("--json", action="store_true", help="print the summary and the entries as JSON")


@command(
    "diff",
    help="What a toolchain change did, per model and task: newly passing, newly failing (with its code), still "
    "failing with another code, and the change in compile time, first-call time, speed and peak memory.",
    example="trncat diff --toolchain old-toolchain.yaml runners/toolchain.yaml --dataset dataset/ --write",
    arguments=_diff_args,
)
def _diff(args: argparse.Namespace) -> int:
    from pipeline.dataset import write_release_diff
    from pipeline.release import diff_dataset, diff_text, load_side

    old, old_pins = load_side(args.toolchain[0])
    new, new_pins = load_side(args.toolchain[1])
    diff = diff_dataset(args.dataset, old=old, new=new, old_pins=old_pins, new_pins=new_pins)
    if args.write:
        path = write_release_diff(args.dataset, old=old, new=new, entries=diff.entries)
        print(f"wrote {path}")
    if args.json:
        print(json.dumps({**diff.summary(), "entries": diff.entries}, default=str, indent=2))
    else:
        print(diff_text(diff))
    return 0


# -- the release diff of a publish (trncat publish --release-diff OLD NEW) -------------------------------


def release_diff_derived(old_file: Path, new_file: Path, records: list[dict[str, Any]]) -> tuple[Any, str]:
    """What ``trncat publish --release-diff OLD NEW`` adds to its commit: the release diff, as ``trncat diff
    --toolchain OLD NEW --write`` writes it, over the target's whole results history with the records built in.

    Returns:
        (a :class:`pipeline.publish.Derived`, or None when there is nothing to diff, and the line that says which).
        Nothing to diff: the two files name the same release or pin the same versions, or no record of this
        publish is a pass or fail measured at NEW's pins (no re-measured row: the diff would not change).

    Raises:
        ConfigError: an unreadable toolchain file.
    """
    from pipeline.dataset import release_path, write_release_diff
    from pipeline.publish import Derived
    from pipeline.records import flatten
    from pipeline.release import diff_dataset, diff_text, load_side, rows_at

    old, old_pins = load_side(old_file)
    new, new_pins = load_side(new_file)
    if old == new or old_pins == new_pins:
        return None, f"no release diff: {old_file} and {new_file} name the same release or pin the same versions"
    relative = release_path(old, new)  # checks both names before anything is fetched
    rows = [flatten(r) for r in records if r.get("status") in ("pass", "fail")]
    if not rows_at(rows, new_pins):
        return None, f"no release diff: no record of this publish was measured on {new}'s pins"

    def write(folder: Path) -> str:
        diff = diff_dataset(folder, old=old, new=new, old_pins=old_pins, new_pins=new_pins)
        write_release_diff(folder, old=old, new=new, entries=diff.entries)
        head, *counts = diff_text(diff).splitlines()[: 2 + sum(1 for c in diff.counts.values() if c)]
        return "\n".join([f"### Release diff `{relative}`", "", f"{head}:", *(f"-{c[1:]}" for c in counts)])

    return Derived(paths=lambda results: [*results, relative], write=write), f"release diff {old} -> {new}: {relative}"
