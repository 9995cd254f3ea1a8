"""Is the subject masked in every frame of the edited variants of the real clips?  The subject's
face in each frame of the original clips (``../shared/media``, tracked once at default settings, the "mesh" schedule)
is carried through each variant's frame map (``bench/edited_variants.py``: a resize, crop, flip,
re-timing, cut, cross-fade) to where it lies in the variant; the variant is then tracked as
``build_subsets`` tracks it (``mime_fast.detect_subject``, default settings, CPU), and every frame
is checked against that geometry: the ellipse inscribed in the centre 80 % of the subject's face
box (his landmarks' box: eyes, nose, mouth and cheeks) must be at least 90 % inside the union of
the masks of the frame (below 50 %: his face shows, "unmasked"; in between: "partly").

The subject is the person of the variant's first frame (the clip's subject as selection picks
it in the original).  Where selection picks another person in the variant (a flip, a crop or a
letterbox moves who is central, largest, best seen), the variant has another subject and its
frames say nothing of this one's: it is listed (``same_subject`` false) and left out of the totals.  Frames of the other clip of a cut (``cut_hug_crowd``'s crowd, ``crowd_away_back``'s hug)
and faces under a cross-fade's weaker half (weight < 0.35) are not his: they are reported apart
("other"), as are the frames where more than one mask is drawn (over-masking costs the benchmark
faces it need not hide, never privacy).

**Bystanders** (the other direction of error: MIME keeps the scene's other faces clear): CenterFace,
a detector that is not the engine's, finds the faces of every frame of a variant (cached beside it,
``NAME.centerface.json``); a face that is not the subject's (its box overlaps his mapped face box by
less than IoU 0.2, and its centre lies outside it; in a frame of his own clip where the original's
tracking has no box for him, faces are not counted: nobody knows which is his) whose core is at
least half under the masks other than the subject's own hull (the faces the tracker could not tell
from him, or decided were him) is a masked bystander.  ``bystander_frames`` counts the frames with one,
from the 3rd frame of its shot on (the shots of the frame map: a change of source clip, framing or
a jump; the first two frames of a shot may be masked while the tracker cannot yet tell; frames of a
cross-fade are left out), ``bystander_faces`` the faces; ``adjacent_frames`` the frames where a
bystander's face is half under his own hull alone (someone beside him or crossing in front of
him: the mask's shape, not whose face it is).  Writes
bench/results/privacy_variants-cpu.json.

    python bench/privacy_variants.py [--variants /tmp/variants] [--reference OLD_CHECKOUT] [names ...]

``--audit DIR``: FM, FDM and FSM of every variant are built under ``DIR`` too (this version's and the
reference's) and audited with ``mime_fast.audit`` (this version's): CenterFace and dlib, models that
are not the engine's, count the frames where the subject is unmasked or a clear face reads as him.

``--reference``: another version (a ``git worktree`` of an older commit, its ``_core`` copied in) is
run on the same variants against the same ground truth, and both are printed and saved side by side.

``--undecided leave``: this version tracks with ``undecided="leave"`` (faces identity cannot tell
apart are not masked): what that option costs the subject's privacy.  Writes
bench/results/privacy_variants_leave-cpu.json.
"""

from __future__ import annotations

import argparse
import inspect
import json
import time
from pathlib import Path

import cv2
import numpy as np
from _harness import media_dir, save
from edited_variants import NAMES, SOURCES, var


from mime_fast.landmarks import faces_list
from mime_fast.subject import detect_subject

#: a frame's subject is masked when this much of the centre of his face box is under the mask; below
#: CLEAR his face shows (the failures), between the two it is partly masked (a mask fitted tighter than
#: in the original: a profile, another scale)
COVERED = 0.9
CLEAR = 0.5
#: the centre of the face box checked (the ellipse inscribed in this fraction of its width and height)
CORE = 0.8
#: under a cross-fade, a source seen with less weight than this is not counted
VISIBLE = 0.35


def ground_truth(media: Path, name: str) -> list:
    """Per frame of source clip ``name``: the subject's face box (x0, y0, x1, y1: the box of his
    landmarks, before any margin; where his head is followed, its box) where the tracker masks him,
    else ``None``."""
    # (the "mesh" schedule: the detector on every frame his mesh does not follow him on, so that
    # the truth is the same whichever schedule is measured, and detected wherever it can be)
    det = detect_subject(media / SOURCES[name], schedule="mesh")
    out = []
    for t in det.tracks:
        if t.points is None:
            out.append(None)
        elif t.kind == "head":  # his head followed by its motion: the box (its mask is the grown ellipse)
            out.append([float(v) for v in t.box])
        else:
            p = np.asarray(t.points, np.float64)
            out.append([float(p[:, 0].min()), float(p[:, 1].min()), float(p[:, 0].max()), float(p[:, 1].max())])
    return out


def core(box, m) -> tuple[int, int, int, int]:
    ax, bx, ay, by = m
    xs = sorted((ax * box[0] + bx, ax * box[2] + bx))
    ys = sorted((ay * box[1] + by, ay * box[3] + by))
    w, h = xs[1] - xs[0], ys[1] - ys[0]
    f = (1 - CORE) / 2
    return (int(round(xs[0] + f * w)), int(round(ys[0] + f * h)), int(round(xs[1] - f * w)), int(round(ys[1] - f * h)))


#: a face of CenterFace's is the subject's when it overlaps his mapped face box by this IoU (or its centre lies inside)
SAME_FACE_IOU = 0.2
#: the first frames of each shot where masked bystanders are not counted
BYSTANDER_GRACE = 2


def centerface_faces(video: Path) -> list[list[list[float]]]:
    """CenterFace's face boxes in every frame of ``video`` (640 px, its default), cached beside it."""
    cache = video.with_suffix(".centerface.json")
    st = video.stat()
    key = [st.st_size, st.st_mtime_ns]
    if cache.is_file():
        got = json.loads(cache.read_text())
        if got.get("key") == key:
            return got["faces"]
    import av

    from mime_fast.detect import CenterFaceDetector

    det = CenterFaceDetector()
    out = []
    with av.open(str(video)) as c:
        for f in c.decode(video=0):
            out.append([[round(float(v), 1) for v in b] for b in det.detect(f.to_ndarray(format="rgb24")).boxes])
    cache.write_text(json.dumps({"key": key, "faces": out}))
    return out


def shot_starts(frames: list) -> list[int]:
    """Per frame of a variant's map, the first frame of its shot (``-1`` for a frame of a cross-fade
    or a blank one): a new shot where the source clip or its framing changes, or its frame jumps
    (a blank stretch inside one shot does not start one; a cross-fade does)."""
    out, start, prev = [], 0, None
    for i, srcs in enumerate(frames):
        if len(srcs) != 1:
            out.append(-1)
            if len(srcs) > 1:
                prev = None
            continue
        clip, k, m, _ = srcs[0]
        if prev is None or prev[0] != clip or prev[2] != m or abs(k - prev[1]) > 3:
            start = i
        out.append(start)
        prev = (clip, k, m)
    return out


def _box_iou(a, b) -> float:
    x0, y0, x1, y1 = max(a[0], b[0]), max(a[1], b[1]), min(a[2], b[2]), min(a[3], b[3])
    inter = max(0.0, x1 - x0) * max(0.0, y1 - y0)
    union = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter
    return inter / union if union > 0 else 0.0


def _mapped(box, m) -> list[float]:
    ax, bx, ay, by = m
    xs = sorted((ax * box[0] + bx, ax * box[2] + bx))
    ys = sorted((ay * box[1] + by, ay * box[3] + by))
    return [xs[0], ys[0], xs[1], ys[1]]


def _coverage(mask: np.ndarray, box) -> float | None:
    """The share of the ellipse inscribed in the centre CORE of ``box`` that ``mask`` covers."""
    H, W = mask.shape
    w, h = box[2] - box[0], box[3] - box[1]
    f = (1 - CORE) / 2
    x0, y0 = max(int(round(box[0] + f * w)), 0), max(int(round(box[1] + f * h)), 0)
    x1, y1 = min(int(round(box[2] - f * w)), W), min(int(round(box[3] - f * h)), H)
    if x1 <= x0 or y1 <= y0:
        return None
    ell = np.zeros((y1 - y0, x1 - x0), np.uint8)
    cv2.ellipse(ell, (((x1 - x0 - 1) / 2, (y1 - y0 - 1) / 2), (x1 - x0, y1 - y0), 0), 1, -1)
    return float(mask[y0:y1, x0:x1][ell > 0].mean())


def check(video: Path, fmap: dict, truth: dict, build: Path | None = None, undecided: str = "mask",
          schedule: str = "period") -> dict:
    """The variant ``video`` tracked and checked frame by frame against ``truth``; ``build``: its FM,
    FDM and FSM are also built there from that tracking (for the audit); ``undecided``,
    ``schedule``: the options' values."""
    t0 = time.perf_counter()
    # (a version before the option, a --reference, runs the "mesh" schedule and takes no keyword)
    scheduled = "schedule" in inspect.signature(detect_subject).parameters
    det = detect_subject(video, **({} if undecided == "mask" else {"undecided": undecided}),
                         **({"schedule": schedule} if scheduled else {}))
    secs = time.perf_counter() - t0
    if build is not None:
        from mime_fast import build_subsets

        build_subsets(video, build, landmarks=det, subsets=["FM", "FDM", "FSM"], clip_id=video.stem,
                      min_height=0, min_duration=0, **({} if undecided == "mask" else {"undecided": undecided}))
    W, H = fmap["size"]
    frames = fmap["frames"]
    subject_clip = next(s[0][0] for s in frames if s)
    if len(frames) != det.num_frames:
        raise SystemExit(f"{video}: {det.num_frames} frames decoded, map has {len(frames)}")
    unmasked, partly, other_unmasked, several, checked, worst = [], [], [], 0, 0, 1.0
    bystander_at, bystander_faces, adjacent_at = [], 0, []
    cf = centerface_faces(video)
    starts = shot_starts(frames)
    sel = det.stats.selected_frame
    same = None  # whether selection picked the original's subject (in the frame it selected in)
    for i, srcs in enumerate(frames):
        polys = faces_list(det, i)
        several += len(polys) > 1
        mask = np.zeros((H, W), np.uint8)
        for p in polys:
            cv2.fillPoly(mask, [np.round(np.asarray(p)).astype(np.int32)], 1)
        for clip, k, m, w in srcs:
            box = truth[clip][k]
            if box is None or w < VISIBLE:
                continue
            x0, y0, x1, y1 = core(box, m)
            x0, y0, x1, y1 = max(x0, 0), max(y0, 0), min(x1, W), min(y1, H)
            if x1 <= x0 or y1 <= y0:
                continue
            ell = np.zeros((y1 - y0, x1 - x0), np.uint8)
            cv2.ellipse(ell, (((x1 - x0 - 1) / 2, (y1 - y0 - 1) / 2), (x1 - x0, y1 - y0), 0), 1, -1)
            cov = float(mask[y0:y1, x0:x1][ell > 0].mean())
            if clip == subject_clip and i == sel:
                same = cov >= COVERED
            if clip == subject_clip:
                checked += 1
                worst = min(worst, cov)
                if cov < CLEAR:
                    unmasked.append(i)
                elif cov < COVERED:
                    partly.append(i)
            elif cov < CLEAR:
                other_unmasked.append(i)
        if starts[i] < 0 or i < starts[i] + BYSTANDER_GRACE or not polys:
            continue
        his = [_mapped(truth[c][k], m) for c, k, m, w in srcs if c == subject_clip and truth[c][k] is not None]
        if any(c == subject_clip and truth[c][k] is None for c, k, m, w in srcs):
            continue  # a frame of his clip where nobody knows which face is his
        own = det.points(i)  # his own hull (the first of faces_list's), where he is masked
        extra = np.zeros((H, W), np.uint8)
        for p in polys[1:] if own is not None else polys:
            cv2.fillPoly(extra, [np.round(np.asarray(p)).astype(np.int32)], 1)
        masked, adjacent = 0, False
        for b in cf[i] if i < len(cf) else []:
            cx, cy = (b[0] + b[2]) / 2, (b[1] + b[3]) / 2
            if any(_box_iou(b, h) >= SAME_FACE_IOU or (h[0] <= cx <= h[2] and h[1] <= cy <= h[3]) for h in his):
                continue
            cov = _coverage(extra, b)
            if cov is not None and cov >= CLEAR:
                masked += 1
            elif (_coverage(mask, b) or 0.0) >= CLEAR:
                adjacent = True
        if masked:
            bystander_at.append(i)
            bystander_faces += masked
        if adjacent:
            adjacent_at.append(i)
    st = det.stats
    return {"frames": len(frames), "same_subject": same, "subject_frames": checked, "unmasked": len(unmasked), "unmasked_at": unmasked,
            "partly": len(partly), "partly_at": partly,
            "worst_coverage": round(worst, 3), "other_unmasked": len(other_unmasked), "several_masks": several,
            "bystander_frames": len(bystander_at), "bystander_at": bystander_at, "bystander_faces": bystander_faces,
            "adjacent_frames": len(adjacent_at),
            "shots": st.shots, "undecided": getattr(st, "undecided", None), "without_subject": st.without_subject,
            "seconds": round(secs, 2)}


def _line(n: str, r: dict) -> str:
    return (f"{n:20s} {'' if r['same_subject'] else '(another subject selected) '}frames {r['frames']:4d} "
            f"subject {r['subject_frames']:4d} unmasked {r['unmasked']:3d} partly {r['partly']:3d} "
            f"(worst {r['worst_coverage']:.2f}) other-unmasked {r['other_unmasked']:3d} several {r['several_masks']:3d} "
            f"bystanders {r.get('bystander_frames', '-'):>3} adjacent {r.get('adjacent_frames', '-'):>3} "
            f"shots {r['shots']} undecided {r['undecided']} {r['seconds']:.1f}s  {r['unmasked_at'][:12]}")


def _totals(rows: dict) -> dict:
    # a variant where selection picked another person (a flip or a crop moves who is central,
    # largest, best seen) has another subject: its frames say nothing of this one's
    totals = {k: sum(r[k] for r in rows.values() if r["same_subject"])
              for k in ("frames", "subject_frames", "unmasked", "partly", "other_unmasked", "several_masks",
                        "bystander_frames", "bystander_faces", "adjacent_frames") if all(k in r for r in rows.values())}
    for s in ("FDM", "FSM"):
        for k in ("unmasked_frames", "identity_frames"):
            vals = [r["audit"][s][k] or 0 for r in rows.values() if r["same_subject"] and s in r.get("audit", {})]
            if vals:
                totals[f"audit_{s}_{k}"] = sum(vals)
    totals["other_subject_selected"] = sorted(n for n, r in rows.items() if not r["same_subject"])
    return totals


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--media", type=Path, default=media_dir())
    ap.add_argument("--variants", type=Path, default=Path("/tmp/variants"),
                    help="where the variants are (made there when missing; default %(default)s)")
    ap.add_argument("--reference", type=Path,
                    help="a checkout of another version (its python/ folder is imported, its _core built): each "
                         "variant is checked with it too, against the same ground truth, side by side")
    ap.add_argument("--audit", type=Path, metavar="DIR",
                    help="also build FM, FDM and FSM of each variant under DIR (and the reference's) and run "
                         "mime_fast.audit on them: an independent detector and two recognisers (CenterFace; dlib, SFace) "
                         "count the frames where the subject is unmasked or a clear face is re-identified as him")
    ap.add_argument("--every", type=int, default=2, help="with --audit: audit every N-th frame (default 2)")
    ap.add_argument("--undecided", choices=("mask", "leave"), default="mask",
                    help="this version's undecided option (default mask; leave: what turning it off costs)")
    ap.add_argument("--schedule", choices=("mesh", "period"), default="period",
                    help="this version's detection schedule (default period; mesh: the detector on every frame his "
                         "mesh does not follow him on)")
    ap.add_argument("--no-save", action="store_true", help="print only")
    ap.add_argument("--truth", type=Path, help=argparse.SUPPRESS)  # (the reference's run: truth given, rows written)
    ap.add_argument("--rows", type=Path, help=argparse.SUPPRESS)
    ap.add_argument("names", nargs="*", help="variants (default: all)")
    args = ap.parse_args()
    names = args.names or list(NAMES)
    args.variants.mkdir(parents=True, exist_ok=True)
    truth = json.loads(args.truth.read_text()) if args.truth else {}
    maps = {}
    for n in names:
        video, mp = args.variants / f"{n}.mp4", args.variants / f"{n}.map.json"
        if not (video.is_file() and mp.is_file()):
            var(n, args.variants, args.media)
        maps[n] = json.loads(mp.read_text())
        for clip in {s[0] for f in maps[n]["frames"] for s in f}:
            if clip not in truth:
                truth[clip] = ground_truth(args.media, clip)
    reference = None
    if args.reference is not None:
        import os
        import subprocess
        import sys
        import tempfile

        with tempfile.TemporaryDirectory() as tmp:
            tf, rf = Path(tmp) / "truth.json", Path(tmp) / "rows.json"
            tf.write_text(json.dumps(truth))
            env = {**os.environ, "PYTHONPATH": str(args.reference.resolve() / "python")}
            audit = ["--audit", str(args.audit / "reference")] if args.audit else []
            subprocess.run([sys.executable, __file__, "--media", str(args.media), "--variants", str(args.variants),
                            "--truth", str(tf), "--rows", str(rf), *audit, *names], env=env, check=True)
            reference = json.loads(rf.read_text())
    rows = {}
    for n in names:
        build = None if args.audit is None else args.audit if args.rows else args.audit / "this"
        rows[n] = r = check(args.variants / f"{n}.mp4", maps[n], truth, build, args.undecided, args.schedule)
        if reference is not None:
            print("reference ", _line(n, reference[n]))
        if args.rows is None:
            print("this      " if reference is not None else "", _line(n, r), sep="", flush=True)
    if args.rows:
        args.rows.write_text(json.dumps(rows))
        return
    if args.audit is not None:  # the audit of this version's outputs and the reference's, with this audit
        import mime_fast

        for who, folder, table in (("this", args.audit / "this", rows), ("reference", args.audit / "reference", reference)):
            if table is None:
                continue
            for a in mime_fast.audit(folder, every=args.every, write=False).rows:
                if a["status"] == "ok" and a["clip_id"] in table:
                    table[a["clip_id"]].setdefault("audit", {})[a["subset"]] = {
                        k: a[k] for k in ("subject_frames", "unmasked_frames", "identity_frames", "reidentified")}
        for n in names:
            for who, table in (("reference", reference), ("this", rows)):
                if table is not None and "audit" in table[n]:
                    au = table[n]["audit"]
                    print(f"audit {who:9s} {n:20s} " + "  ".join(
                        f"{s}: unmasked {au[s]['unmasked_frames']} identity {au[s]['identity_frames']}" for s in sorted(au)))
    totals = _totals(rows)
    payload = {"covered": COVERED, "clear": CLEAR, "core": CORE, "visible": VISIBLE, "undecided": args.undecided,
               "schedule": args.schedule,
               "totals": totals}
    print("totals", totals)
    if reference is not None:
        payload["reference"] = {"path": str(args.reference), "totals": _totals(reference), "variants": reference}
        print("reference totals", payload["reference"]["totals"])
    payload["variants"] = rows
    if not args.no_save:
        print(save("privacy_variants" + ("_leave" if args.undecided == "leave" else "")
                   + ("_mesh" if args.schedule == "mesh" else ""), payload))


if __name__ == "__main__":
    main()
