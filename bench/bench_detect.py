"""Automatic subject detection on a 10 s 720p clip (the astronaut composite, 25 fps, audio) with
the offline model stack: source frames per second of the detection + tracking pass alone
(decode, detect, landmarks, embeddings; :func:`mime_fast.subject.detect_subject`) with the
detector every 3rd frame (default) and every frame; of end-to-end ``build_subsets`` with all seven
subsets and no ``landmarks=`` for one clip (the detection rides along the decode pass that encodes
FM and VMM, then FDM and FSM are encoded with the masks of the whole clip), side by side in the
same repeats with two references: a separate detection pass followed by the one-pass pipeline
(what ``build_subsets`` did before), and libx264 alone (the same four encodes of the same frames,
nothing else: the floor on this machine); and of a corpus run (``run_corpus`` over 4 such clips)
with and without the next clip's detection running while the current clip encodes
(``detect_ahead``), with the share of time per stage.  Writes bench/results/detect-cpu.json.

Stage times: detect / landmarks / embed / persons are summed inside the tracker (perf_counter
around each model call); decode is the detection pass minus the model time; mask+blur and encode
come from a second run of the pipeline with the detected hulls given as landmarks, where the
masking (ops.hull_mask + ops.blur_in_mask) is timed and encode is the rest (decode, standardise,
libx264 x 3 + AAC, remux).  They are the work of each stage measured apart; end to end, the
detection overlaps the FM/VMM encodes.

    python bench/bench_detect.py [--repeats 3]
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

from _harness import libx264_floor, parse_args, pipeline_with_hulls, save, stage_seconds, upper_median as med

import mime_fast
from mime_fast import build_subsets
from mime_fast.corpus import discover, run_corpus
from mime_fast.detect.stacks import default_stack
from mime_fast.subject import detect_subject
from mime_fast.samples import make_clip


def main() -> None:
    args = parse_args(__doc__, repeats=3)
    stack = default_stack()
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        clip = make_clip(tmp / "face10.mp4", duration=10.0, fps=25, size=(1280, 720), audio=True)
        detect_s, e2e_s, timers_all, stats = [], [], [], None
        masked_s, pipeline_s, detect_every1_s, floor_s = [], [], [], []
        n_src = 0
        for rep in range(args.repeats):
            timers: dict = {}
            t = time.perf_counter()
            prov = detect_subject(clip.path, stack=stack, timers=timers)
            detect_s.append(time.perf_counter() - t)
            timers_all.append(timers)
            stats = prov.stats
            n_src = prov.num_frames

            t = time.perf_counter()
            r = build_subsets(clip.path, tmp / f"e2e{rep}")
            e2e_s.append(time.perf_counter() - t)
            assert r.tracking.status == "ok" and len(r.outputs) == 7

            # the pipeline alone with the same hulls, timing the masking calls
            pipe, masked = pipeline_with_hulls(clip.path, tmp / f"pipe{rep}", prov)
            pipeline_s.append(pipe)
            masked_s.append(masked)
            t = time.perf_counter()
            every = detect_subject(clip.path, stack=stack, detect_every=1)
            detect_every1_s.append(time.perf_counter() - t)
            floor_s.append(libx264_floor(clip.path, tmp / f"floor{rep}"))
            print(f"repeat {rep}: detection pass {detect_s[-1]:.1f} s ({n_src / detect_s[-1]:.1f} fps; detector on "
                  f"every frame {n_src / detect_every1_s[-1]:.1f} fps), end to end {e2e_s[-1]:.1f} s "
                  f"({n_src / e2e_s[-1]:.1f} fps), pipeline alone {pipeline_s[-1]:.1f} s, "
                  f"libx264 alone {floor_s[-1]:.1f} s")
        assert every.stats.tracked == 0

        # corpus throughput: 4 clips, detection of the next clip overlapping the current encode or not
        corpus_dir = tmp / "corpus"
        corpus_dir.mkdir()
        for k in range(4):
            (corpus_dir / f"clip{k}.mp4").write_bytes(clip.path.read_bytes())
        corpus_s: dict[str, list[float]] = {"detect_ahead": [], "sequential": []}
        for rep in range(args.repeats):
            for mode in corpus_s:
                t = time.perf_counter()
                summ = run_corpus(discover(corpus_dir), tmp / f"corpus-{mode}{rep}", detect_ahead=mode == "detect_ahead",
                                  progress=lambda line: None)
                corpus_s[mode].append(time.perf_counter() - t)
                assert len(summ.done) == 4, summ.failed
            print(f"repeat {rep}: corpus of 4 clips: " + ", ".join(f"{m} {4 * n_src / v[-1]:.1f} fps" for m, v in corpus_s.items()))

    i = detect_s.index(med(detect_s))
    tm = timers_all[i]
    sep_s = [d + p for d, p in zip(detect_s, pipeline_s)]  # the reference: detection pass, then the pipeline
    # decode = the detection pass's decode; encode = decode, standardise, 3 x libx264, AAC, remux
    stages = stage_seconds(med(detect_s), tm, med(masked_s), med(pipeline_s))
    total = sum(stages.values())
    payload = {
        "clip": {"size": [1280, 720], "fps_in": 25, "seconds": 10.0, "source_frames": n_src, "audio": "48 kHz stereo"},
        "detect_size": 384,
        "detect_every": 3,
        "threads": {"mime_fast": mime_fast.num_threads()},
        "detection_pass_s": detect_s,
        "end_to_end_s": e2e_s,
        "pipeline_with_given_hulls_s": pipeline_s,
        "detection_pass_detector_every_frame_s": detect_every1_s,
        "corpus_4_clips_s": corpus_s,
        "source_fps_detection": n_src / med(detect_s),
        "source_fps_detection_detector_every_frame": n_src / med(detect_every1_s),
        "source_fps_corpus_detect_ahead": 4 * n_src / med(corpus_s["detect_ahead"]),
        "source_fps_corpus_sequential": 4 * n_src / med(corpus_s["sequential"]),
        "libx264_alone_s": floor_s,
        "source_fps_end_to_end": n_src / med(e2e_s),
        "source_fps_separate_detection_pass_then_pipeline": n_src / med(sep_s),
        "speedup_end_to_end_vs_separate_detection_pass": med([s / e for s, e in zip(sep_s, e2e_s)]),
        "source_fps_libx264_alone": n_src / med(floor_s),
        "end_to_end_over_libx264_alone": med([e / f for e, f in zip(e2e_s, floor_s)]),
        "source_fps_pipeline_alone": n_src / med(pipeline_s),
        "target_source_fps_end_to_end": 30.0,
        "stage_seconds": stages,
        "stage_share": {k: v / total for k, v in stages.items()},
        "per_frame_ms": {k: 1e3 * v / n_src for k, v in stages.items()},
        "tracking": stats.as_dict() if stats is not None else None,
    }
    path = save("detect", payload, args.device)
    print(f"detection {payload['source_fps_detection']:.1f} fps, end to end {payload['source_fps_end_to_end']:.1f} fps "
          f"for one clip ({payload['speedup_end_to_end_vs_separate_detection_pass']:.2f}x a separate detection pass, "
          f"{payload['end_to_end_over_libx264_alone']:.2f}x the time of libx264 alone), {payload['source_fps_corpus_detect_ahead']:.1f} fps over a corpus (target 30); shares: " + ", ".join(f"{k.split(' ')[0]} {100 * v:.0f}%" for k, v in payload["stage_share"].items()))
    print(path)


if __name__ == "__main__":
    main()
