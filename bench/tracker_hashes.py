"""Hashes of the subject tracker's decisions on the real clips and their edited variants: the proof
that a change to the tracker's code changed no decision.  For each clip, pass 1 alone
(:func:`mime_fast.detect_subject` with the offline stack and default settings) is run and the
SHA-256 taken of every frame's track (kind, hull points, box, height, margin), of the undecided
faces' hulls, and of :class:`~mime_fast.subject.TrackingStats` (with ``faces="all"`` on one clip,
the other faces' tracks too).  Much faster than ``bench/output_hashes.py`` (no encode), and it
covers the variants that exercise cuts, returns, jumps, dissolves and dark footage.

    python bench/tracker_hashes.py --out /tmp/before.json           # on the old commit
    python bench/tracker_hashes.py --out /tmp/after.json --compare /tmp/before.json

``--compare`` prints each clip whose hashes differ (with the stats that differ) and exits 1 when
one does.  ``--variants all`` runs every variant of ``bench/edited_variants.py``.  Needs the real
clips of ../shared/media (skipped, and said, where absent).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import tempfile
import time
from pathlib import Path

from _harness import media_dir

#: the variants run by default: one or more of each event the tracker decides on
DEFAULT_VARIANTS = ("arm_720", "crowd_away_back", "crowd_zoomcut", "crowd_away_closer", "cut_hug_flip_hug",
                    "dissolve_crowd_hug", "cut_mix", "cut_mix_dark", "wide_then_close", "hug_gray", "crowd_dark",
                    "hug_jump", "crowd_12fps")


def _h(*parts) -> str:
    d = hashlib.sha256()
    for p in parts:
        d.update(p if isinstance(p, bytes) else json.dumps(p, sort_keys=True, default=str).encode())
    return d.hexdigest()


def _track_bytes(t) -> bytes:
    import numpy as np

    parts = [t.kind.encode(), repr((t.height, t.margin)).encode()]
    for a in (t.points, t.box):
        parts.append(b"-" if a is None else np.ascontiguousarray(a).tobytes())
    return b"|".join(parts)


def clip_hashes(path: Path, stack, faces: str = "subject") -> dict:
    from dataclasses import asdict

    from mime_fast.subject import detect_subject

    t = time.perf_counter()
    prov = detect_subject(path, stack=stack, faces=faces)
    tracks = [_track_bytes(x) for x in prov.tracks]
    stats = asdict(prov.stats)
    out = {"frames": len(tracks), "tracks": _h(*tracks), "stats": _h(stats),
           "stats_values": json.loads(json.dumps(stats, default=str)),
           "seconds": round(time.perf_counter() - t, 2)}
    undecided = getattr(prov, "undecided", None)
    if undecided is not None:
        out["undecided"] = _h(*[b"".join(h.tobytes() for h in f) + b";" for f in undecided])
    others = getattr(prov, "others", None)
    if others is not None:
        out["others"] = _h(*[b"".join(h.tobytes() for h in f) + b";" for f in others])
    return out


def run(media: Path, variants, tmp: Path) -> dict:
    import edited_variants

    from mime_fast.detect import load_offline_stack

    stack = load_offline_stack()
    clips = {"hug_1080p": media / "two_people_hug_1080p.mp4", "arm_340x256": media / "arm_wrestling_340x256.mp4"}
    for name in variants:
        made = tmp / f"{name}.mp4"
        clips[name] = made if made.is_file() else edited_variants.var(name, tmp, media)
    out = {}
    for name, path in clips.items():
        out[name] = clip_hashes(path, stack)
        print(f"{name}: {out[name]['frames']} frames, {out[name]['seconds']} s", file=sys.stderr, flush=True)
    if "crowd_away_back" in clips:
        out["crowd_away_back/all"] = clip_hashes(clips["crowd_away_back"], stack, faces="all")
    return out


def compare(now: dict, before: dict) -> list[str]:
    diffs = []
    for name in sorted(set(now) | set(before)):
        a, b = now.get(name), before.get(name)
        if a is None or b is None:
            diffs.append(f"{name}: only in {'before' if a is None else 'now'}")
            continue
        # (a counter added since the earlier run is new, not a difference)
        sv = [f"{k}: {b['stats_values'][k]} -> {v}" for k, v in a["stats_values"].items()
              if k in b["stats_values"] and b["stats_values"][k] != v]
        keys = [k for k in ("frames", "tracks", "undecided", "others") if a.get(k) != b.get(k)] + (["stats"] if sv else [])
        if keys:
            diffs.append(f"{name}: {', '.join(keys)} differ; " + "; ".join(sv))
    return diffs


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, required=True, help="JSON file to write")
    ap.add_argument("--compare", type=Path, help="an earlier run's JSON: exit 1 on any difference")
    ap.add_argument("--variants", nargs="*", default=list(DEFAULT_VARIANTS),
                    help="edited variants to run (bench/edited_variants.py names, or 'all')")
    ap.add_argument("--media", type=Path, default=media_dir())
    ap.add_argument("--keep", type=Path, help="a folder to make the variants in and reuse them from (else a temporary one)")
    a = ap.parse_args()
    if not (a.media / "crowd_1080p.mp4").is_file():
        print(f"real clips not found in {a.media}: nothing to hash", file=sys.stderr)
        return 2
    import edited_variants

    variants = edited_variants.NAMES if a.variants == ["all"] else a.variants
    if a.keep:
        a.keep.mkdir(parents=True, exist_ok=True)
        now = run(a.media, variants, a.keep)
    else:
        with tempfile.TemporaryDirectory() as tmp:
            now = run(a.media, variants, Path(tmp))
    a.out.write_text(json.dumps(now, indent=1, sort_keys=True))
    if a.compare:
        diffs = compare(now, json.loads(a.compare.read_text()))
        for d in diffs:
            print(d)
        print(f"{len(diffs)} clip(s) differ" if diffs else "identical")
        return 1 if diffs else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
