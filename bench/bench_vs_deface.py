"""mime_fast against deface (PyPI deface 1.5.0: CenterFace on every frame, one anonymised output),
in one run, interleaved: deface writing its single output vs build_subsets writing all seven
subsets (FM, FDM, FSM, VMM, FDAM, FSAM, AMM) + the 16 kHz wav, both finding the faces themselves,
on the synthetic 720p clip and every real clip of ../shared/media at its own size.  deface runs
in this process with its defaults (threshold 0.2, mask scale 1.3, elliptical blur, its imageio
libx264 writer; its model loaded once beforehand, as the engine's models are), and its tqdm bar
silenced.  Target (issue 14): all seven subsets faster than deface's one output on every clip.
Writes bench/results/vs_deface-cpu.json (min_speedup_vs_deface: the worst clip).

    pip install --no-deps deface==1.5.0 && pip install imageio imageio-ffmpeg
    python bench/bench_vs_deface.py [--repeats 1] [--media ../shared/media]
"""

from __future__ import annotations

import contextlib
import io
import tempfile
from pathlib import Path

from _harness import SHARED_MACHINE_NOTE, compare, proof_clips, real_clip_args, save

from mime_fast import build_subsets
from mime_fast.detect.stacks import default_stack
from mime_fast.media import probe


def deface_runner():
    """deface's own video loop with its command-line defaults, its model loaded once."""
    from deface.centerface import CenterFace
    from deface.deface import video_detect

    with contextlib.redirect_stdout(io.StringIO()):
        centerface = CenterFace(in_shape=None, backend="auto")

    def run(src: Path, dst: Path) -> None:
        with contextlib.redirect_stderr(io.StringIO()), contextlib.redirect_stdout(io.StringIO()):
            video_detect(str(src), str(dst), centerface, threshold=0.2, enable_preview=False, cam=False, nested=False,
                         replacewith="blur", mask_scale=1.3, ellipse=True, draw_scores=False,
                         ffmpeg_config={"codec": "libx264"}, replaceimg=None, keep_audio=False, mosaicsize=20)
        if not dst.is_file():
            raise RuntimeError(f"deface wrote no {dst}")
    return run


def main() -> None:
    args = real_clip_args(__doc__, "bench_vs_deface")
    deface = deface_runner()
    default_stack()  # the engine's models loaded once, as deface's
    results = {}
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        clips = proof_clips(args.media, tmp, only=args.only)
        for name, (clip, extra, _) in clips.items():
            written = {}

            def engine(name=name, clip=clip, extra=extra):
                r = build_subsets(clip, tmp / f"eng-{name}", **extra)
                written["mime_fast"] = sorted(r.outputs)

            def run_deface(name=name, clip=clip):
                deface(clip, tmp / f"deface-{name}.mp4")

            stats = compare({"deface": run_deface, "mime_fast": engine}, args.repeats, warmup=0)
            n_src = probe(clip).video_frames
            r = {
                "source_frames": n_src,
                "deface_s": stats["deface"]["median_ms"] / 1e3,
                "mime_fast_s": stats["mime_fast"]["median_ms"] / 1e3,
                "speedup": stats["deface"]["median_ms"] / stats["mime_fast"]["median_ms"],
                "source_fps_deface": n_src / (stats["deface"]["median_ms"] / 1e3),
                "source_fps_mime_fast": n_src / (stats["mime_fast"]["median_ms"] / 1e3),
                "outputs": {"deface": 1, "mime_fast": len(written["mime_fast"])},
                "timings": stats,
            }
            results[name] = r
            print(f"{name}: deface (1 output) {r['deface_s']:.1f} s, mime_fast ({r['outputs']['mime_fast']} outputs) "
                  f"{r['mime_fast_s']:.1f} s -> {r['speedup']:.2f}x", flush=True)
    worst = min(r["speedup"] for r in results.values())
    payload = {
        "note": SHARED_MACHINE_NOTE,
        "what": "deface 1.5.0 (defaults, CenterFace on onnxruntime, one output) vs build_subsets (automatic "
                "detection, all seven subsets + wav)",
        "target": "every clip: all seven subsets faster than deface's one output (speedup > 1)",
        "min_speedup_vs_deface": round(worst, 2),
        "all_faster": worst > 1.0,
        "clips": results,
    }
    print(f"worst clip: {worst:.2f}x")
    print(save("vs_deface", payload))


if __name__ == "__main__":
    main()
