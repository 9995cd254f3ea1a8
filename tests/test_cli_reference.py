"""The docs: the committed CLI reference (docs/cli.md) is what the parser gives, the benchmark tables
come from bench/results, README keeps the newcomer's essentials, and pytest's header says where the
real clips are."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

from mime_fast.cli import COMMANDS, parser
from mime_fast.cli.reference import REGENERATE, markdown

from conftest import pytest_report_header

ROOT = Path(__file__).resolve().parents[1]


def test_committed_cli_reference_is_what_the_parser_gives() -> None:
    committed = (ROOT / "docs" / "cli.md").read_text()
    assert committed == markdown(), (
        f"docs/cli.md differs from mime_fast.cli.parser(): regenerate it with `{REGENERATE}` and commit it")


def test_cli_reference_names_every_command_and_option() -> None:
    page = markdown()
    for command in COMMANDS:
        assert f"## `mime-fast {command}`" in page
    build = parser().parse_args(["build", "x", "--out", "o", "--crf", "20"])  # options the page must show
    assert build.crf == 20
    for option in ("--out DIR", "--workers N", "--crf", "--device", "--list-skipped", "--faces"):
        assert option in page, option
    assert REGENERATE in page  # the page says how to regenerate it


def _gen_bench():
    spec = importlib.util.spec_from_file_location("gen_bench", ROOT / "docs" / "gen_bench.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_benchmark_tables_are_made_from_the_committed_results() -> None:
    gen = _gen_bench()
    page = (ROOT / "docs" / "benchmarks.md").read_text()
    rendered = gen.render(page)
    assert "<!-- bench-table:" not in rendered
    ref = json.loads((ROOT / "bench" / "results" / "vs_reference-cpu.json").read_text())
    assert f"**`speedup_vs_reference` = {ref['speedup_vs_reference']:.2f}×**" in rendered
    for clip, c in ref["clips"].items():
        assert f"| {clip} ({c['source_frames']} frames) | {c['reference_s']:.1f} s |" in rendered
    assert all(f"`{p.name}`" in rendered for p in (ROOT / "bench" / "results").glob("*.json"))
    mkdocs = (ROOT / "mkdocs.yml").read_text()
    assert "docs/gen_bench.py" in mkdocs  # the hook that renders them when the site is built


def test_readme_is_short_and_keeps_the_ci_test_command() -> None:
    readme = (ROOT / "README.md").read_text()
    assert len(readme.splitlines()) <= 200
    ci = (ROOT / ".ci" / "run").read_text()
    install = next(line for line in ci.splitlines() if line.startswith('python -m pip install ".['))
    no_deps = next(line for line in ci.splitlines() if line.startswith("python -m pip install --no-deps"))
    extras = install.split('"')[1]
    command = (f'pip install "{extras}" && {no_deps.removeprefix("python -m ")} && python -m pytest')
    assert command in readme, "README's test command must be the one .ci/run runs"
    for page in ("docs/cli.md", "docs/testing.md", "docs/benchmarks.md", "docs/privacy-audit.md"):
        assert f"({page}" in readme


def test_pytest_header_says_where_the_real_clips_are(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("MIME_FAST_SHARED_MEDIA", str(tmp_path))
    line = pytest_report_header(None)
    assert f"not found in {tmp_path.resolve()}" in line and "skip" in line
    (tmp_path / "crowd_1080p.mp4").write_bytes(b"")
    assert pytest_report_header(None) == f"real test clips: {tmp_path.resolve()}"
