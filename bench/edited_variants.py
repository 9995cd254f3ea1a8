"""Variants of the real clips of ../shared/media edited the way corpus footage is: black frames
(a fade, a dropout), a white flash, cuts away and back (shot / reverse shot), a zoom cut, a
cross-fade away and back, greyscale, re-timed, rotated with metadata, flipped, letterboxed and
pillarboxed, tightly cropped.  The fixtures of the real-footage privacy checks
(``bench/privacy_variants.py``): every frame of a variant comes with where it came from (clip,
frame, and the axis-aligned map from that frame's pixels to the variant's), so a subject's face
found in the original clip can be looked for in the variant.  Written with PyAV's libx264 (CRF 18)
under ``--out``, each beside ``NAME.map.json``; the real clips are only read (never commit the
variants: they are made from clips nobody here made).

    python bench/edited_variants.py --out /tmp/variants crowd_black hug_flash crowd_away_back
    python bench/edited_variants.py --out /tmp/variants all
"""

from __future__ import annotations

import argparse
import json
from fractions import Fraction
from pathlib import Path

import av
import cv2
import numpy as np

M = Path(__file__).resolve().parents[2] / "shared" / "media"
#: the source clips, by the short name a frame map gives
SOURCES = {"hug": "two_people_hug_1080p.mp4", "crowd": "crowd_1080p.mp4", "arm": "arm_wrestling_340x256.mp4"}


class Clip:
    """A source clip's frames, each with its origin: ``src[i]`` is a list of ``[clip, frame, [ax,
    bx, ay, by], weight]`` (a variant pixel ``x' = ax x + bx``, ``y' = ay y + by`` of that source
    frame, seen with that weight: a cross-fade has two), empty for a frame of nothing (black)."""

    def __init__(self, imgs, rate, src):
        self.imgs, self.rate, self.src = list(imgs), rate, [list(s) for s in src]

    @classmethod
    def load(cls, name: str, media: Path = M) -> "Clip":
        with av.open(str(media / SOURCES[name])) as c:
            s = c.streams.video[0]
            rate = s.average_rate
            imgs = [f.to_ndarray(format="rgb24") for f in c.decode(s)]
        return cls(imgs, rate, [[[name, i, [1.0, 0.0, 1.0, 0.0], 1.0]] for i in range(len(imgs))])

    def __add__(self, other: "Clip") -> "Clip":
        return Clip(self.imgs + other.imgs, self.rate, self.src + other.src)

    def __getitem__(self, k) -> "Clip":
        return Clip(self.imgs[k], self.rate, self.src[k])

    def at(self, rate) -> "Clip":
        return Clip(self.imgs, rate, self.src)

    def map(self, fn, ax=1.0, bx=0.0, ay=1.0, by=0.0) -> "Clip":
        """Each image through ``fn``, which moves pixels by ``x' = ax x + bx``, ``y' = ay y + by``."""
        def compose(m):
            a0, b0, c0, d0 = m
            return [ax * a0, ax * b0 + bx, ay * c0, ay * d0 + by]
        return Clip([fn(i) for i in self.imgs], self.rate,
                    [[[c, i, compose(m), w] for c, i, m, w in s] for s in self.src])

    def resize(self, w: int, h: int, interpolation=cv2.INTER_AREA) -> "Clip":
        H, W = self.imgs[0].shape[:2]
        return self.map(lambda i: cv2.resize(i, (w, h), interpolation=interpolation), w / W, 0.0, h / H, 0.0)

    def crop(self, x0: int, y0: int, x1: int, y1: int) -> "Clip":
        return self.map(lambda i: i[y0:y1, x0:x1], 1.0, -x0, 1.0, -y0)

    def flip(self) -> "Clip":
        W = self.imgs[0].shape[1]
        return self.map(lambda i: i[:, ::-1], -1.0, float(W), 1.0, 0.0)

    def pad(self, W: int, H: int, x0: int, y0: int) -> "Clip":
        def fn(i):
            c = np.zeros((H, W, 3), np.uint8)
            c[y0:y0 + i.shape[0], x0:x0 + i.shape[1]] = i
            return c
        return self.map(fn, 1.0, x0, 1.0, y0)

    def colour(self, fn) -> "Clip":  # pixels change, positions do not
        return Clip([fn(i) for i in self.imgs], self.rate, self.src)


def darken(i: np.ndarray) -> np.ndarray:
    """A night / stage grade: contrast down to 35 % around a dark level, gamma 2.5, colours half
    desaturated, sensor noise (seeded by the picture, so a variant is made the same each time)."""
    x = i.astype(np.float32) / 255.0
    x = x ** 2.5 * 0.35 + 0.02
    g = x.mean(axis=2, keepdims=True)
    x = 0.5 * x + 0.5 * g
    rng = np.random.default_rng(int(i[::97, ::89].sum()) % (2**32))
    return np.clip(x * 255.0 + rng.normal(0, 2.0, i.shape), 0, 255).astype(np.uint8)


def dim(i: np.ndarray) -> np.ndarray:
    """Stage light on an audience: x 0.38 and sensor noise (seeded by the picture): faces at luma
    40 - 70, their contrast (``face_contrast``) under 16 (``bench/dim_faces.py``)."""
    rng = np.random.default_rng(int(i[::97, ::89].sum()) % (2**32))
    return np.clip(i.astype(np.float32) * 0.38 + rng.normal(0, 3.0, i.shape), 0, 255).astype(np.uint8)


def blank(like: Clip, value: int, n: int) -> Clip:
    return Clip([np.full_like(like.imgs[0], value)] * n, like.rate, [[] for _ in range(n)])


def mix(a: Clip, b: Clip, n: int) -> Clip:
    """``n`` frames of a cross-fade from ``a``'s first ``n`` frames to ``b``'s."""
    imgs, src = [], []
    for k in range(n):
        t = (k + 1) / (n + 1)
        imgs.append((a.imgs[k].astype(np.float32) * (1 - t) + b.imgs[k].astype(np.float32) * t).round().astype(np.uint8))
        src.append([[c, i, m, w * (1 - t)] for c, i, m, w in a.src[k]] + [[c, i, m, w * t] for c, i, m, w in b.src[k]])
    return Clip(imgs, a.rate, src)


def write(out: Path, name: str, clip: Clip, rotation=None, crf=18) -> Path:
    """``clip`` as ``out/NAME.mp4`` (H.264), its frame map as ``out/NAME.map.json``; ``rotation``:
    the display rotation stored (the pixels are stored rotated by its opposite: a decoder that
    honours it shows the frames of the map)."""
    p = out / f"{name}.mp4"
    imgs = clip.imgs if rotation is None else [np.rot90(i, 1) for i in clip.imgs]
    with av.open(str(p), "w") as c:
        s = c.add_stream("libx264", rate=Fraction(clip.rate).limit_denominator(100000))
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
    (out / f"{name}.map.json").write_text(json.dumps({"variant": name, "rate": float(clip.rate),
                                                      "size": [int(clip.imgs[0].shape[1]), int(clip.imgs[0].shape[0])],
                                                      "frames": clip.src}))
    print("wrote", p, len(imgs), "frames", imgs[0].shape, "rate", float(clip.rate))
    return p


def var(name: str, out: Path, media: Path = M) -> Path:
    """Make variant ``name`` under ``out`` (its video and its frame map)."""
    hug = lambda: Clip.load("hug", media)  # noqa: E731
    crowd = lambda: Clip.load("crowd", media)  # noqa: E731
    gray = lambda i: np.repeat(cv2.cvtColor(i, cv2.COLOR_RGB2GRAY)[..., None], 3, 2)  # noqa: E731
    rotation = None
    if name == "hug_480p":
        c = hug().resize(854, 480)
    elif name == "crowd_480p":
        c = crowd().resize(854, 480)
    elif name == "hug_flip":
        c = hug().flip()
    elif name == "crowd_flip":
        c = crowd().flip()
    elif name in ("hug_rot90", "crowd_rot90"):  # stored rotated (portrait pixels), display matrix rotates back
        c, rotation = (hug() if name == "hug_rot90" else crowd()).resize(1280, 720), -90
    elif name == "hug_portrait":  # phone footage: portrait pixels, no metadata, crop center 9:16
        c = hug().crop(656, 0, 1264, 1080)
    elif name == "hug_25fps":  # frames re-timed (slowed down) to 25 fps
        c = hug().at(25)
    elif name == "hug_60fps":  # sped up: same frames at 60 fps (1.2 s clip)
        c = hug().at(60)
    elif name == "crowd_12fps":  # every other frame at 12.5 fps (fast motion between frames)
        c = crowd()[::2].at(Fraction(25, 2))
    elif name == "crowd_8fps":  # every 3rd frame
        c = crowd()[::3].at(Fraction(25, 3))
    elif name == "hug_pillar":  # 4:3 content pillarboxed in 16:9
        c = hug().resize(960, 720).pad(1280, 720, 160, 0)
    elif name == "crowd_letter":  # 16:9 letterboxed in 4:3 frame
        c = crowd().resize(960, 540).pad(960, 720, 0, 90)
    elif name == "crowd_tight":  # tight crop on the central subject's face area (upscaled)
        c = crowd().crop(700, 300, 1340, 780).resize(854, 640, cv2.INTER_CUBIC)
    elif name == "hug_tight":
        c = hug().crop(500, 150, 1300, 750).resize(854, 640, cv2.INTER_CUBIC)
    elif name == "cut_hug_crowd":  # hard cut between two clips, both at 1280x720 25fps
        c = (hug().resize(1280, 720) + crowd().resize(1280, 720)).at(25)
    elif name == "cut_crowd_hug":
        c = (crowd().resize(1280, 720) + hug().resize(1280, 720)).at(25)
    elif name == "cut_hug_flip_hug":  # cut from the hug to its mirror image (same people, other positions)
        a = hug().resize(1280, 720)
        c = (a[:40] + a[40:].flip()).at(25)
    elif name == "cut_abab":  # fast cuts: hug / crowd alternating every 12 frames
        a, b = hug().resize(1280, 720), crowd().resize(1280, 720)
        c = a[0:0]
        for k in range(6):
            c = c + a[12 * k:12 * k + 12] + b[12 * k:12 * k + 12]
        c = c.at(25)
    elif name == "hug_black":  # 4 black frames at 20 and 45
        a = hug()
        c = a[:20] + blank(a, 0, 4) + a[20:45] + blank(a, 0, 4) + a[45:]
    elif name == "hug_black1":  # a single black frame at 45 (a dropped/blank frame)
        a = hug()
        c = a[:45] + blank(a, 0, 1) + a[45:]
    elif name == "hug_jump":  # jump cut inside the same shot: source frames 40..49 removed
        a = hug()
        c = a[:40] + a[50:]
    elif name == "hug_flash":  # a white flash frame at 45
        a = hug()
        c = a[:45] + blank(a, 255, 1) + a[45:]
    elif name == "crowd_away_back":  # cut away to another scene and back (shot / reverse shot), 1280x720 25 fps
        a, b = crowd().resize(1280, 720), hug().resize(1280, 720)
        c = (a[:35] + b[:30] + a[35:]).at(25)
    elif name == "crowd_zoomcut":  # cut to a closer framing of the same scene at frame 50 (1.6x zoom on the centre)
        a = crowd().resize(1280, 720)
        c = a[:50] + a[50:].crop(240, 200, 1040, 650).resize(1280, 720, cv2.INTER_CUBIC)
    elif name == "crowd_zoomout":  # a 1.6x closer framing of the centre, cut at frame 50 to the whole scene (a cut-out)
        a = crowd().resize(1280, 720)
        c = a[:50].crop(240, 200, 1040, 650).resize(1280, 720, cv2.INTER_CUBIC) + a[50:]
    elif name == "crowd_away_closer":  # cut away to another scene and back to a 1.6x closer framing of the first
        a, b = crowd().resize(1280, 720), hug().resize(1280, 720)
        c = (a[:35] + b[:30] + a[35:].crop(240, 200, 1040, 650).resize(1280, 720, cv2.INTER_CUBIC)).at(25)
    elif name == "crowd_jump":  # jump cut: frames 40..59 removed
        a = crowd()
        c = a[:40] + a[60:]
    elif name == "dissolve_crowd_hug":  # crowd, 12-frame cross-fade into the hug, then back by cross-fade (720p 25 fps)
        a, b = crowd().resize(1280, 720), hug().resize(1280, 720)
        n = 12
        c = (a[:40] + mix(a[40:], b, n) + b[n:50] + mix(b[50:], a[52:], n) + a[52 + n:]).at(25)
    elif name == "dissolve_quick":  # crowd, cross-fade to the hug, 16 frames later cross-fade back (two 12-frame dissolves close together)
        a, b = crowd().resize(1280, 720), hug().resize(1280, 720)
        n = 12
        c = (a[:40] + mix(a[40:], b, n) + b[n:28] + mix(b[28:], a[52:], n) + a[52 + n:]).at(25)
    elif name == "crowd_black":
        a = crowd()
        c = a[:30] + blank(a, 0, 3) + a[30:70] + blank(a, 0, 3) + a[70:]
    elif name == "crowd_dark":  # underexposed (x0.35) + noise
        rng = np.random.default_rng(0)
        c = crowd().colour(lambda i: np.clip(i.astype(np.float32) * 0.35 + rng.normal(0, 4, i.shape), 0, 255).astype(np.uint8))
    elif name == "arm_720":
        c = Clip.load("arm", media).resize(956, 720, cv2.INTER_CUBIC)
    elif name == "hug_gray":
        c = hug().colour(gray)
    elif name == "hug_reverse":  # played backwards: the hug at the start, then they separate
        c = hug()[::-1]
    elif name in ("cut_mix", "cut_mix_dark"):  # his shots (the hug) alternate with shots of other real people
        # (the crowd, the arm wrestlers), 1280x720 25 fps; _dark: the same graded to a night / stage level
        a, b = hug().resize(1280, 720), crowd().resize(1280, 720)
        r = Clip.load("arm", media).resize(956, 720, cv2.INTER_CUBIC).pad(1280, 720, 162, 0)
        c = (a[:20] + b[:22] + a[20:40] + r[30:52] + a[40:56] + b[40:62] + a[56:]).at(25)
        if name == "cut_mix_dark":
            c = c.colour(darken)
    elif name in ("stage", "stage_dim"):  # a stage recording: he is lit (the hug), a cut to the audience under stage
        # light (the crowd, x 0.38: faces 40 - 120 px at luma 40 - 70, him absent), back to him lit (1280x720 25 fps);
        # _dim: back to him under the same stage light (his own dim faces, the counter-case)
        a, b = hug().resize(1280, 720), crowd().resize(1280, 720)
        c = (a[:30] + b[20:70].colour(dim) + (a[30:].colour(dim) if name == "stage_dim" else a[30:])).at(25)
    elif name == "wide_then_close":  # he is first seen small in a wide shot (face ~45 px), a close-up of a stranger
        # (a man of the crowd, others behind him) follows, then a close-up of him (~140 px; 1280x720 25 fps)
        a = hug()
        wide = a[:30].resize(1280, 720)
        stranger = crowd()[30:56].crop(330, 400, 970, 760).resize(1280, 720, cv2.INTER_CUBIC)
        close = a[30:72].crop(680, 120, 1320, 480).resize(1280, 720, cv2.INTER_CUBIC)
        c = (wide + stranger + close).at(25)
    else:
        raise SystemExit("unknown " + name)
    return write(out, name, c, rotation)


#: Every variant ``var`` makes.
NAMES = ("hug_480p", "crowd_480p", "hug_flip", "crowd_flip", "hug_rot90", "hug_portrait", "crowd_rot90", "hug_25fps",
         "hug_60fps", "crowd_12fps", "crowd_8fps", "hug_pillar", "crowd_letter", "crowd_tight", "hug_tight",
         "cut_hug_crowd", "cut_crowd_hug", "cut_hug_flip_hug", "cut_abab", "hug_black", "hug_black1", "hug_jump",
         "hug_flash", "crowd_away_back", "crowd_zoomcut", "crowd_jump", "dissolve_crowd_hug", "crowd_black",
         "crowd_dark", "arm_720", "hug_gray", "hug_reverse", "crowd_zoomout", "crowd_away_closer", "dissolve_quick",
         "cut_mix", "cut_mix_dark", "wide_then_close", "stage", "stage_dim")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, default=Path("/tmp/variants"), help="folder for the variants (default %(default)s)")
    ap.add_argument("--media", type=Path, default=M, help="the real clips (default %(default)s)")
    ap.add_argument("names", nargs="+", help=f"variants, or all: {', '.join(NAMES)}")
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    for n in (NAMES if args.names == ["all"] else args.names):
        print(var(n, args.out, args.media))


if __name__ == "__main__":
    main()
