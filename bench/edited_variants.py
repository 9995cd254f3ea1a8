"""Variants of the real clips of ../shared/media edited the way corpus footage is: black frames
(a fade, a dropout), a white flash, cuts away and back (shot / reverse shot), a zoom cut, a
cross-fade away and back, greyscale, re-timed, rotated with metadata, flipped, letterboxed and
pillarboxed, tightly cropped.  The fixtures of the real-footage privacy checks: build them, then
``mime-fast audit`` (and a per-frame look at every face FM shows) must find the subject masked in
every frame of FDM and FSM.  Written with PyAV's libx264 (CRF 18) under ``--out``; the real clips
are only read (never commit the variants: they are made from clips nobody here made).

    python bench/edited_variants.py --out /tmp/variants crowd_black hug_flash crowd_away_back
    python bench/edited_variants.py --out /tmp/variants all
"""

from __future__ import annotations

import argparse
from fractions import Fraction
from pathlib import Path

import av
import cv2
import numpy as np

M = Path(__file__).resolve().parents[2] / "shared" / "media"
OUT = [Path("/tmp/variants")]  # (set by --out)
HUG = M / "two_people_hug_1080p.mp4"
CROWD = M / "crowd_1080p.mp4"
ARM = M / "arm_wrestling_340x256.mp4"


def frames(p):
    with av.open(str(p)) as c:
        s = c.streams.video[0]
        rate = s.average_rate
        out = [f.to_ndarray(format="rgb24") for f in c.decode(s)]
    return out, rate


def write(name, imgs, rate, rotation=None, crf=18):
    p = OUT[0] / name
    with av.open(str(p), "w") as c:
        s = c.add_stream("libx264", rate=Fraction(rate).limit_denominator(100000))
        h, w = imgs[0].shape[:2]
        s.width, s.height, s.pix_fmt = w, h, "yuv420p"
        s.options = {"crf": str(crf), "preset": "veryfast"}
        if rotation is not None:
            s.set_display_rotation(rotation)
        for im in imgs:
            for pkt in s.encode(av.VideoFrame.from_ndarray(np.ascontiguousarray(im), format="rgb24")):
                c.mux(pkt)
        for pkt in s.encode():
            c.mux(pkt)
    print("wrote", p, len(imgs), "frames", imgs[0].shape, "rate", float(rate))


def resize(imgs, w, h):
    return [cv2.resize(i, (w, h), interpolation=cv2.INTER_AREA) for i in imgs]


def var(name):
    if name == "hug_480p":
        f, r = frames(HUG); write(name + ".mp4", resize(f, 854, 480), r)
    elif name == "crowd_480p":
        f, r = frames(CROWD); write(name + ".mp4", resize(f, 854, 480), r)
    elif name == "hug_flip":
        f, r = frames(HUG); write(name + ".mp4", [i[:, ::-1] for i in f], r)
    elif name == "crowd_flip":
        f, r = frames(CROWD); write(name + ".mp4", [i[:, ::-1] for i in f], r)
    elif name == "hug_rot90":  # stored rotated (portrait pixels), display matrix rotates back to landscape
        f, r = frames(HUG); write(name + ".mp4", [np.rot90(i, 1) for i in resize(f, 1280, 720)], r, rotation=-90)
    elif name == "hug_portrait":  # phone footage: portrait pixels, no metadata, crop center 9:16
        f, r = frames(HUG); write(name + ".mp4", [i[:, 656:1264] for i in f], r)
    elif name == "crowd_rot90":
        f, r = frames(CROWD); write(name + ".mp4", [np.rot90(i, 1) for i in resize(f, 1280, 720)], r, rotation=-90)
    elif name == "hug_25fps":  # frames re-timed (slowed down) to 25 fps
        f, r = frames(HUG); write(name + ".mp4", f, 25)
    elif name == "hug_60fps":  # sped up: same frames at 60 fps (1.2 s clip)
        f, r = frames(HUG); write(name + ".mp4", f, 60)
    elif name == "crowd_12fps":  # every other frame at 12.5 fps (fast motion between frames)
        f, r = frames(CROWD); write(name + ".mp4", f[::2], Fraction(25, 2))
    elif name == "crowd_8fps":  # every 3rd frame
        f, r = frames(CROWD); write(name + ".mp4", f[::3], Fraction(25, 3))
    elif name == "hug_pillar":  # 4:3 content pillarboxed in 16:9
        f, r = frames(HUG)
        out = []
        for i in resize(f, 960, 720):
            c = np.zeros((720, 1280, 3), np.uint8); c[:, 160:1120] = i; out.append(c)
        write(name + ".mp4", out, r)
    elif name == "crowd_letter":  # 16:9 letterboxed in 4:3 frame
        f, r = frames(CROWD)
        out = []
        for i in resize(f, 960, 540):
            c = np.zeros((720, 960, 3), np.uint8); c[90:630] = i; out.append(c)
        write(name + ".mp4", out, r)
    elif name == "crowd_tight":  # tight crop on the central subject's face area (upscaled)
        f, r = frames(CROWD)
        out = [cv2.resize(i[300:780, 700:1340], (854, 640), interpolation=cv2.INTER_CUBIC) for i in f]
        write(name + ".mp4", out, r)
    elif name == "hug_tight":
        f, r = frames(HUG)
        out = [cv2.resize(i[150:750, 500:1300], (854, 640), interpolation=cv2.INTER_CUBIC) for i in f]
        write(name + ".mp4", out, r)
    elif name == "cut_hug_crowd":  # hard cut between two clips, both at 1280x720 25fps
        a, _ = frames(HUG); b, _ = frames(CROWD)
        write(name + ".mp4", resize(a, 1280, 720) + resize(b, 1280, 720), 25)
    elif name == "cut_crowd_hug":
        a, _ = frames(HUG); b, _ = frames(CROWD)
        write(name + ".mp4", resize(b, 1280, 720) + resize(a, 1280, 720), 25)
    elif name == "cut_hug_flip_hug":  # cut from the hug to its mirror image (same people, other positions)
        a, _ = frames(HUG); a = resize(a, 1280, 720)
        write(name + ".mp4", a[:40] + [i[:, ::-1] for i in a[40:]], 25)
    elif name == "cut_abab":  # fast cuts: hug / crowd alternating every 12 frames
        a, _ = frames(HUG); b, _ = frames(CROWD)
        a, b = resize(a, 1280, 720), resize(b, 1280, 720)
        out = []
        for k in range(6):
            out += a[12 * k:12 * k + 12] + b[12 * k:12 * k + 12]
        write(name + ".mp4", out, 25)
    elif name == "hug_black":  # 4 black frames at 20 and 45
        f, r = frames(HUG)
        blk = [np.zeros_like(f[0])] * 4
        write(name + ".mp4", f[:20] + blk + f[20:45] + blk + f[45:], r)
    elif name == "hug_black1":  # a single black frame at 45 (a dropped/blank frame)
        f, r = frames(HUG)
        write(name + ".mp4", f[:45] + [np.zeros_like(f[0])] + f[45:], r)
    elif name == "hug_jump":  # jump cut inside the same shot: source frames 40..49 removed
        f, r = frames(HUG)
        write(name + ".mp4", f[:40] + f[50:], r)
    elif name == "hug_flash":  # a white flash frame at 45
        f, r = frames(HUG)
        write(name + ".mp4", f[:45] + [np.full_like(f[0], 255)] + f[45:], r)
    elif name == "crowd_away_back":  # cut away to another scene and back (shot / reverse shot), 1280x720 25 fps
        a, _ = frames(CROWD); b, _ = frames(HUG)
        a, b = resize(a, 1280, 720), resize(b, 1280, 720)
        write(name + ".mp4", a[:35] + b[:30] + a[35:], 25)
    elif name == "crowd_zoomcut":  # cut to a closer framing of the same scene at frame 50 (1.6x zoom on the centre)
        a, r = frames(CROWD)
        a = resize(a, 1280, 720)
        z = [cv2.resize(i[200:650, 240:1040], (1280, 720), interpolation=cv2.INTER_CUBIC) for i in a[50:]]
        write(name + ".mp4", a[:50] + z, r)
    elif name == "crowd_jump":  # jump cut: frames 40..59 removed
        a, r = frames(CROWD)
        write(name + ".mp4", a[:40] + a[60:], r)
    elif name == "dissolve_crowd_hug":  # crowd, 12-frame cross-fade into the hug, then back by cross-fade (720p 25 fps)
        a, _ = frames(CROWD); b, _ = frames(HUG)
        a, b = resize(a, 1280, 720), resize(b, 1280, 720)
        n = 12
        mix = lambda x, y, t: (x.astype(np.float32) * (1 - t) + y.astype(np.float32) * t).round().astype(np.uint8)
        out = a[:40] + [mix(a[40 + k], b[k], (k + 1) / (n + 1)) for k in range(n)] + b[n:50]
        out += [mix(b[50 + k], a[52 + k], (k + 1) / (n + 1)) for k in range(n)] + a[52 + n:]
        write(name + ".mp4", out, 25)
    elif name == "crowd_black":
        f, r = frames(CROWD)
        blk = [np.zeros_like(f[0])] * 3
        write(name + ".mp4", f[:30] + blk + f[30:70] + blk + f[70:], r)
    elif name == "crowd_dark":  # underexposed (x0.35) + noise
        f, r = frames(CROWD)
        rng = np.random.default_rng(0)
        out = [np.clip(i.astype(np.float32) * 0.35 + rng.normal(0, 4, i.shape), 0, 255).astype(np.uint8) for i in f]
        write(name + ".mp4", out, r)
    elif name == "arm_720":
        f, r = frames(ARM)
        write(name + ".mp4", [cv2.resize(i, (956, 720), interpolation=cv2.INTER_CUBIC) for i in f], r)
    elif name == "hug_gray":
        f, r = frames(HUG)
        write(name + ".mp4", [np.repeat(cv2.cvtColor(i, cv2.COLOR_RGB2GRAY)[..., None], 3, 2) for i in f], r)
    elif name == "hug_reverse":  # played backwards: the hug at the start, then they separate
        f, r = frames(HUG); write(name + ".mp4", f[::-1], r)
    else:
        raise SystemExit("unknown " + name)


#: Every variant ``var`` makes.
NAMES = ("hug_480p", "crowd_480p", "hug_flip", "crowd_flip", "hug_rot90", "hug_portrait", "crowd_rot90", "hug_25fps",
         "hug_60fps", "crowd_12fps", "crowd_8fps", "hug_pillar", "crowd_letter", "crowd_tight", "hug_tight",
         "cut_hug_crowd", "cut_crowd_hug", "cut_hug_flip_hug", "cut_abab", "hug_black", "hug_black1", "hug_jump",
         "hug_flash", "crowd_away_back", "crowd_zoomcut", "crowd_jump", "dissolve_crowd_hug", "crowd_black",
         "crowd_dark", "arm_720", "hug_gray", "hug_reverse")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, default=OUT[0], help="folder for the variants (default %(default)s)")
    ap.add_argument("names", nargs="+", help=f"variants, or all: {', '.join(NAMES)}")
    args = ap.parse_args()
    OUT[0] = args.out
    args.out.mkdir(parents=True, exist_ok=True)
    for n in (NAMES if args.names == ["all"] else args.names):
        var(n)
        print(args.out / f"{n}.mp4")


if __name__ == "__main__":
    main()
