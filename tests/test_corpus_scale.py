"""What makes a rerun of a large corpus start quickly, checked for its behaviour (never its timing):
the manifest read once and not rewritten when nothing changed, the settings text of each row
compared once, the outputs checked a chunk of clips per task in order, and the clips' real paths
found a folder at a time.  bench/bench_rerun.py measures the time at 40,000 clips."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from mime_fast import samples
from mime_fast.cli import main
from mime_fast.corpus import ClipSpec, find_inputs, inputs, resume, run
from mime_fast.manifest import (COLUMNS, MANIFEST_JSONL, MANIFEST_PARQUET, ManifestWriter, compact, read_manifest,
                                read_rows, write_compacted)
from mime_fast.options import Settings
from mime_fast.corpus.progress import Monitor

SMALL = ["--min-height", "0", "--min-duration", "0"]


def reference_read_rows(out: Path) -> list[dict]:
    """read_rows as it was before read_manifest: the behaviour every faster reading must keep."""
    path = out / MANIFEST_JSONL
    if not path.exists():
        return []
    rows = []
    for line in path.read_text(encoding="utf-8").splitlines():
        line = line.strip()
        if not line:
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(obj, dict) and "clip_id" in obj:
            rows.append({c: obj.get(c) for c in COLUMNS})
    return rows


def row(clip: str, subset: str | None = "FM", run_id: str = "r1", **more) -> dict:
    return {"clip_id": clip, "subset": subset, "status": "ok" if subset else "failed", "run": run_id,
            "path": f"{subset}/{clip}.mp4" if subset else f"/in/{clip}.mp4", **more}


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> tuple[Path, Path]:
    """Two tiny clips (landmarks beside them) built into an output folder."""
    root = tmp_path_factory.mktemp("scale")
    for k in range(2):
        samples.make_clip(root / "in" / f"c{k}.mp4", duration=0.4, fps=25, size=(160, 120), seed=k + 1)
    out = root / "out"
    assert main(["build", str(root / "in"), "--out", str(out), "--subsets", "FM,FSM", "--quiet", *SMALL]) == 0
    return root / "in", out


def settle(out: Path) -> None:
    """The parquet's time after the jsonl was replaced, as a real corpus's compaction leaves them
    (its parquet takes seconds to write; a tiny one's may be written within the same tick of the
    file system's clock, and is then rewritten by every rerun: safe, but not what is tested)."""
    parquet = out / MANIFEST_PARQUET
    os.utime(parquet, ns=(parquet.stat().st_atime_ns, (out / MANIFEST_JSONL).stat().st_ctime_ns + 1000))


def files_state(out: Path) -> dict:
    return {name: (st.st_ino, st.st_mtime_ns, (out / name).read_bytes())
            for name in (MANIFEST_JSONL, MANIFEST_PARQUET) for st in [(out / name).stat()]}


def test_read_manifest_reads_every_line_as_read_rows_did_and_says_whether_it_is_canonical(tmp_path: Path) -> None:
    out = tmp_path
    rows = [dict({c: None for c in COLUMNS}, **row(f"c{k}")) for k in range(3)]
    write_compacted(out, rows)
    known = read_manifest(out)
    assert known.canonical and known.rows == reference_read_rows(out) == rows and known.stat is not None
    assert [tuple(r) for r in known.rows] == [COLUMNS] * 3
    full = (out / MANIFEST_JSONL).read_text()
    lines = full.splitlines(keepends=True)
    odd = {
        "torn last line": full + lines[0][:40],
        "blank line": lines[0] + "\n" + "".join(lines[1:]),
        "spaces around a line": "  " + full,
        "CRLF": full.replace("\n", "\r\n"),
        "a column missing": json.dumps({k: v for k, v in rows[0].items() if k != "settings"}) + "\n" + full,
        "a foreign line": "[1, 2]\n" + full,
        "a line split by U+2028": full + json.dumps(dict(rows[0], reason="a\u2028b"), ensure_ascii=False) + "\n",
        "no newline at the end": full.rstrip("\n"),
    }
    for what, text in odd.items():
        (out / MANIFEST_JSONL).write_text(text, encoding="utf-8", newline="")
        got = read_manifest(out)
        assert got.rows == reference_read_rows(out) and not got.canonical, what
    (out / MANIFEST_JSONL).unlink()
    assert read_manifest(out).rows == [] and read_manifest(out).stat is None


def test_the_writer_knows_the_rows_while_only_it_appends(tmp_path: Path) -> None:
    write_compacted(tmp_path, [row("a"), row("b")])
    with open(tmp_path / MANIFEST_JSONL, "a") as f:
        f.write('{"clip_id": "torn", "sub')  # a kill mid-write: ended by the writer, read as before
    known = read_manifest(tmp_path)
    with ManifestWriter(tmp_path, known) as writer:
        assert writer.rows() == reference_read_rows(tmp_path)
        writer.append([row("c", run_id="r2"), row("a", "FSM", run_id="r2", reason="x\u2028y")])
        assert writer.rows() == reference_read_rows(tmp_path) and len(writer.appended) == 1  # (U+2028: torn, as read)
        with open(tmp_path / MANIFEST_JSONL, "a") as f:  # another process appends: read the file again
            f.write(json.dumps(row("d")) + "\n")
        assert writer.rows() is None
    # a file changed between the read and the writer: not known
    known = read_manifest(tmp_path)
    with open(tmp_path / MANIFEST_JSONL, "a") as f:
        f.write(json.dumps(row("e")) + "\n")
    with ManifestWriter(tmp_path, known) as writer:
        assert writer.rows() is None
    # a folder without a manifest yet
    fresh = tmp_path / "fresh"
    with ManifestWriter(fresh, read_manifest(fresh)) as writer:
        writer.append([row("a")])
        assert writer.rows() == reference_read_rows(fresh) == writer.appended


def test_a_jsonl_file_is_synced_to_the_disk_whole_before_it_is_renamed_into_place(tmp_path: Path, monkeypatch) -> None:
    """write_jsonl fsyncs the file it wrote, flushed, before atomic_write renames it into place: a
    crash or power cut just after the rename leaves the old manifest or the whole new one, never an
    empty or torn file under its name.  Its text is UTF-8, one object per line, non-ASCII as is."""
    from mime_fast import manifest
    from mime_fast.manifest import atomic_write, write_jsonl

    rows = [row("Zoë"), row("情", "FSM", reason="a «cut»"), {"clip_id": "😀", "n": [1, None, 2.5], "ok": True}]
    text = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows)
    dest = tmp_path / MANIFEST_JSONL
    real_fsync, synced = os.fsync, []

    def fsync(fd: int) -> None:  # (what the file holds and where it is when it is synced)
        st = os.fstat(fd)
        temporaries = [p for p in tmp_path.iterdir() if p != dest]
        synced.append((st.st_ino, st.st_size, dest.exists(), [(p.stat().st_ino, p.name) for p in temporaries]))
        real_fsync(fd)

    monkeypatch.setattr(manifest.os, "fsync", fsync)
    atomic_write(dest, lambda tmp: write_jsonl(rows, tmp))
    assert len(synced) == 1, synced
    ino, size, dest_there, temporaries = synced[0]
    assert not dest_there and temporaries == [(ino, f".{MANIFEST_JSONL}.tmp-{os.getpid()}")]
    assert size == len(text.encode("utf-8"))
    assert dest.stat().st_ino == ino and list(tmp_path.iterdir()) == [dest]
    data = dest.read_bytes()
    assert data == text.encode("utf-8") and "Zoë".encode() in data and b"\\u" not in data
    assert [json.loads(line) for line in data.decode("utf-8").split("\n")[:-1]] == rows


def test_a_rerun_with_nothing_to_do_leaves_the_manifest_as_it_is(built: tuple[Path, Path], tmp_path: Path) -> None:
    inp, out = built
    args = ["build", str(inp), "--out", str(out), "--subsets", "FM,FSM", "--quiet", *SMALL]
    settle(out)
    before = files_state(out)
    assert main(args) == 0
    assert files_state(out) == before  # not rewritten: same files, same times
    # whatever the rerun would change is rewritten, to what a compaction of the file's rows writes
    jsonl, parquet = out / MANIFEST_JSONL, out / MANIFEST_PARQUET
    cases = {
        "parquet missing": lambda: parquet.unlink(),
        "parquet older than the jsonl": lambda: os.utime(parquet, ns=(0, jsonl.stat().st_ctime_ns - 10**9)),
        "jsonl not compacted (rows appended by a killed run)": lambda: jsonl.write_text(
            jsonl.read_text() + jsonl.read_text().splitlines(keepends=True)[0]),
        "jsonl restored from a copy (older time, newer change)": lambda: os.utime(jsonl, ns=(0, 10**9)),
    }
    for what, change in cases.items():
        change()
        expected = compact(reference_read_rows(out))
        assert main(args) == 0, what
        after = files_state(out)
        assert after[MANIFEST_JSONL][0] != before[MANIFEST_JSONL][0], what  # rewritten
        assert reference_read_rows(out) == expected and read_manifest(out).canonical, what
        import pyarrow.parquet as pq

        assert pq.read_table(parquet).to_pylist() == expected, what
        settle(out)
        before = files_state(out)
        assert main(args) == 0 and files_state(out) == before, what  # and left alone the next time


def test_a_rerun_that_builds_compacts_the_rows_read_and_appended(built: tuple[Path, Path], tmp_path: Path) -> None:
    inp, out = built
    rebuilt = tmp_path / "out"
    assert main(["build", str(inp), "--out", str(rebuilt), "--subsets", "FM", "--quiet", *SMALL]) == 0
    assert main(["build", str(inp), "--out", str(rebuilt), "--subsets", "FM,FSM", "--quiet", *SMALL]) == 0
    rows = read_rows(rebuilt)
    assert read_manifest(rebuilt).canonical and rows == compact(rows)
    assert {(r["clip_id"], r["subset"]) for r in rows} == {(c, s) for c in ("c0", "c1") for s in ("FM", "FSM", "audio")}
    text = (rebuilt / MANIFEST_JSONL).read_bytes()
    write_compacted(rebuilt, compact(reference_read_rows(rebuilt)))
    assert (rebuilt / MANIFEST_JSONL).read_bytes() == text


def test_rows_another_process_appends_during_a_run_are_kept(built: tuple[Path, Path], tmp_path: Path) -> None:
    """The end of a run compacts the file's rows, read again when someone else wrote to it."""
    inp, _ = built
    out = tmp_path / "out"

    class Intruder(Monitor):
        def clip_done(self, clip_id, reason, frames):
            with open(out / MANIFEST_JSONL, "a", encoding="utf-8") as f:
                f.write(json.dumps(dict(row(f"zz-{clip_id}"), settings=None)) + "\n")

    specs = find_inputs([inp]).clips
    run.run_corpus(specs, out, subsets=["FM"], monitor=Intruder(), min_height=0, min_duration=0)
    rows = read_rows(out)
    assert [r["clip_id"] for r in rows if r["clip_id"].startswith("zz")] == ["zz-c0", "zz-c1"]
    assert rows == compact(rows) and read_manifest(out).canonical


def test_settings_changed_names_each_old_value_once_in_the_order_met(tmp_path: Path) -> None:
    settings = Settings.resolve(None, min_height=0, min_duration=0)
    new = json.loads(resume.settings_record(settings))
    texts = [json.dumps(dict(new, crf=c)) for c in (20, 18, 22)]
    rows = [{"status": "ok", "settings": texts[k % 3]} for k in range(30)]
    rows.insert(5, {"status": "ok", "settings": ["not", "text"]})  # (not text: ignored, as before)
    with pytest.raises(resume.SettingsChanged, match=r"crf 20/22 -> 18"):
        resume.check_same_settings(rows, settings, tmp_path)
    resume.check_same_settings([{"status": "ok", "settings": texts[1]}] * 5, settings, tmp_path)


def test_completeness_is_yielded_in_order_a_chunk_at_a_time(tmp_path: Path, monkeypatch) -> None:
    n = run.VERIFY_CHUNK * 3 + 5
    specs = [ClipSpec(f"c{k}", tmp_path / f"c{k}.mp4", error="bad" if k % 7 == 3 else None) for k in range(n)]
    prev = {f"c{k}": [{"k": k}] for k in range(n) if k % 5}
    monkeypatch.setattr(run, "_complete", lambda rows, *a: rows[0]["k"] % 2 == 0)
    got = list(run._completed(specs, prev, tmp_path, ["FM"], "subject"))
    assert got == [k % 7 != 3 and k % 5 != 0 and k % 2 == 0 for k in range(n)]

    bad = next(k for k in range(run.VERIFY_CHUNK + 1, n) if k % 7 != 3 and k % 5)  # (in the second chunk)

    def complete(rows, *a):
        if rows[0]["k"] == bad:
            raise PermissionError("unreadable")
        return True

    monkeypatch.setattr(run, "_complete", complete)
    seen = []
    with pytest.raises(PermissionError):
        for done in run._completed(specs, prev, tmp_path, ["FM"], "subject"):
            seen.append(done)
    assert len(seen) == bad  # the clips before it, as when each was a task


def test_output_path_names_the_file_pathlib_names(tmp_path: Path) -> None:
    (tmp_path / "FM").mkdir()
    f = tmp_path / "FM" / "a.mp4"
    f.write_bytes(b"x")
    for rel in ("FM/a.mp4", "FM//a.mp4", "./FM/a.mp4", "FM/a.mp4/", "FM/a.mp4/.", str(f), "FM", ".", "",
                "x/../FM/a.mp4"):
        p = resume._output_path(str(tmp_path), tmp_path, rel)

        def stat(q):
            try:
                s = os.stat(q)
                return s.st_ino, s.st_mode
            except OSError as exc:
                return type(exc)

        assert stat(p) == stat(tmp_path / rel), rel


def test_clips_real_paths_are_found_a_folder_at_a_time(tmp_path: Path, monkeypatch) -> None:
    real = tmp_path / "data" / "clips"
    real.mkdir(parents=True)
    for name in ("a.mp4", "b.mp4"):
        (real / name).write_bytes(b"")
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "linked").symlink_to(real)
    (corpus / "c.mp4").symlink_to(real / "a.mp4")  # the same clip by a second name
    (corpus / "sub").mkdir()
    resolver = inputs._Resolver()
    paths = [real / "a.mp4", corpus / "linked" / "b.mp4", corpus / "c.mp4", corpus / "sub" / ".." / "c.mp4",
             corpus / "sub" / "missing.mp4", corpus / "sub" / "..", Path("relative.mp4")]
    for p in paths:
        assert resolver(p) == p.resolve(), p
    assert inputs._inside(real / "a.mp4", real) and inputs._inside(real, real) and inputs._inside(real, Path("/"))
    assert not inputs._inside(tmp_path / "data" / "clipsX" / "a.mp4", real)
    # what is found is what resolving each path in full finds
    runs = [([corpus, real / "b.mp4"], None), ([corpus, real / "b.mp4"], tmp_path / "data"),
            ([corpus / "c.mp4", corpus / "linked" / "a.mp4", real], corpus / "linked")]

    def found(sources, exclude):
        got = find_inputs(sources, exclude=exclude)
        return [(s.clip_id, s.path, s.error) for s in got.clips], got.in_out

    fast = [found(*r) for r in runs]
    monkeypatch.setattr(inputs, "_Resolver", lambda: Path.resolve)
    assert fast == [found(*r) for r in runs]
