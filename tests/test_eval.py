"""mime-fast eval (mime_fast.evaluate) against the scripted OpenAI-compatible server on localhost
(tests/coe_server.py): hand-computed metrics and tests, what each subset is sent, the frames
transport's check, answer extraction, prompt conditions, retries, the cache, resuming after Ctrl-C
and kill -9, cost, the CLI."""

from __future__ import annotations

import dataclasses
import hashlib
import io
import json
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Callable

import numpy as np

import pytest

pytest.importorskip("openai")

from coe_server import FakeChatServer, Reply, Request, media_index  # noqa: E402
from test_coe import INTERRUPTED_RUN, LABELS, WITH_AUDIO, built, corpus  # noqa: E402,F401 - the CoE tests' corpus

import mime_fast  # noqa: E402
from mime_fast.cli import main  # noqa: E402
from mime_fast.coe import ClientOptions  # noqa: E402
from mime_fast.evaluation import extract_emotion, run_name  # noqa: E402
from mime_fast.evaluation.metrics import bootstrap_ci, holm, mcnemar_exact, scores  # noqa: E402
from mime_fast.evaluation.prompts import render  # noqa: E402
from mime_fast.evaluation.runner import PREDICTION_COLUMNS  # noqa: E402

# Truth 4 Happy / 3 Sad / 3 Anger; answers HHHH | SHH | AAS
TRUTH = ["Happy"] * 4 + ["Sad"] * 3 + ["Anger"] * 3
ANSWERS = ["Happy"] * 4 + ["Sad", "Happy", "Happy"] + ["Anger", "Anger", "Sad"]


def evaluate(folder: Path, server: FakeChatServer, **kw) -> mime_fast.evaluation.EvalResult:
    kw = {"model": "omni", "concurrency": 1, "backoff": 0.001, "progress": None, **kw}
    names = {f.name for f in dataclasses.fields(ClientOptions)}
    client = ClientOptions(endpoint=server.url, **{k: kw.pop(k) for k in list(kw) if k in names})
    return mime_fast.evaluate(folder, client, **kw)


# ------------------------------------------------------------------------------- statistics by hand


def test_scores_match_the_hand_computation() -> None:
    s = scores(TRUTH, ANSWERS)
    # recall H 1, S 1/3, A 2/3; F1 H .8 (P 4/6), S .4 (P 1/2), A .8 (P 1): WAF (4*.8 + 3*.4 + 3*.8) / 10
    assert s["n"] == 10 and s["accuracy"] == pytest.approx(0.70)
    assert s["uar"] == pytest.approx(2 / 3) and s["waf"] == pytest.approx(0.68)
    one_unparseable = [None] + ANSWERS[1:]  # a Happy clip's answer unreadable: wrong, in no class's precision
    s = scores(TRUTH, one_unparseable)
    assert s["accuracy"] == pytest.approx(0.60) and s["uar"] == pytest.approx((0.75 + 1 / 3 + 2 / 3) / 3)


def test_exact_mcnemar_holm_and_a_deterministic_bootstrap() -> None:
    assert mcnemar_exact(8, 2) == pytest.approx(0.109375)  # 2 * P(X <= 2 | n = 10, p = .5)
    assert mcnemar_exact(2, 8) == mcnemar_exact(8, 2)
    assert mcnemar_exact(0, 0) == 1.0 and mcnemar_exact(5, 5) == 1.0
    assert mcnemar_exact(0, 6) == pytest.approx(2 / 64)
    adjusted = holm([0.01, 0.04, 0.03, None])
    assert adjusted[:3] == pytest.approx([0.03, 0.06, 0.06]) and adjusted[3] is None
    assert holm([0.5, 0.6]) == pytest.approx([1.0, 1.0])  # capped at 1
    correct = [True] * 7 + [False] * 3
    lo, hi = bootstrap_ci(correct)
    assert lo < 0.7 < hi and bootstrap_ci(correct) == [lo, hi] and bootstrap_ci([]) is None


# ------------------------------------------------------------------------- parsing a model's answer


@pytest.mark.parametrize(("reply", "label"), [
    ("Anger", "Anger"),
    ("anger.", "Anger"),
    ("**Anger**", "Anger"),
    ("The speaker is clearly **Angry** here.", "Anger"),
    ('```json\n{"emotion": "Sad"}\n```', "Sad"),
    ("```\nFear\n```", "Fear"),
    ("The voice trembles (sad? happy?).\n{'emotion': 'surprised'}", "Surprise"),  # HitEmotion's last line
    ('{"predicted_emotion": "happiness", "confidence": "High"}', "Happy"),
    ("Reasoning: sad eyes, but a smile...\nFinal answer: Happy", "Happy"),
    ("<think>happy or sad</think><answer>Neutral</answer>", "Neutral"),
    ("She looks joy-filled: joy.", "Happy"),
])
def test_answers_read_by_rules(reply: str, label: str) -> None:
    assert extract_emotion(reply) == (label, None)


@pytest.mark.parametrize(("reply", "why"), [
    ("Happy or Sad", "names several emotions (Happy, Sad)"),
    ("**Anger** mixed with **Disgust**", "names several emotions (Anger, Disgust)"),
    ("I'm sorry, but I can't determine the person's emotion from this video.", "refusal"),
    ("I cannot tell whether the person is sad.", "refusal"),  # a refusal naming one emotion is still one
    ("{'emotion': 'bored'}", "the answer 'bored' is none of the seven emotions"),
    ("The lighting is dim.", "names no emotion"),
    ("", "empty reply"),
])
def test_unreadable_answers_say_why(reply: str, why: str) -> None:
    assert extract_emotion(reply) == (None, why)


# ------------------------------------------------------------------- a small corpus of labelled rows


def _row(clip: str, subset: str, label: str, dataset: str, path: str, sha: str, has_audio: bool = False) -> dict:
    return {"clip_id": clip, "subset": subset, "path": path, "label": label, "dataset": dataset, "status": "ok",
            "has_audio": has_audio, "sha256": sha, "blur_level": "none", "duration_s": 1.0}


SUBSETS3 = ("FM", "FDM", "FSM")


@pytest.fixture
def rows_corpus(tmp_path: Path) -> Path:
    """Ten clips k0..k9 (truth TRUTH; datasets A: k0-k4, B: k5-k9) with FM, FDM and FSM rows whose
    'videos' are a few distinct bytes: eval reads only the manifest and sends the files as they are."""
    root = tmp_path / "rows"
    lines = []
    for subset in SUBSETS3:
        (root / subset).mkdir(parents=True)
        for i, label in enumerate(TRUTH):
            data = f"{subset} video of k{i}".encode()
            (root / subset / f"k{i}.mp4").write_bytes(data)
            lines.append(json.dumps(_row(f"k{i}", subset, label, "A" if i < 5 else "B", f"{subset}/k{i}.mp4",
                                         hashlib.sha256(data).hexdigest())))
    (root / "manifest.jsonl").write_text("\n".join(lines) + "\n")
    return root


def truth_answers() -> dict[str, str]:
    """FM: HHHH | SHH | AAS; FDM: right on k0-k7; FSM: right on k8, k9 (FDM -> FSM: b = 8, c = 2)."""
    return ({f"FM/k{i}.mp4": a for i, a in enumerate(ANSWERS)}
            | {f"FDM/k{i}.mp4": TRUTH[i] if i < 8 else "Neutral" for i in range(10)}
            | {f"FSM/k{i}.mp4": TRUTH[i] if i >= 8 else "Neutral" for i in range(10)})


def scripted(answers: dict[str, str], *, default: str = "Neutral"):
    """Replies by the video sent ('FM/k3.mp4' -> answers[that])."""
    def script(req: Request) -> Reply:
        return Reply(content=answers.get(req.videos[0], default))
    return script


def test_hand_computed_tables_end_to_end(rows_corpus: Path) -> None:
    answers = truth_answers()
    answers["FM/k0.mp4"] = "**happy**"
    answers["FSM/k8.mp4"] = "{'emotion': 'anger'}"
    with FakeChatServer(media_index(rows_corpus), scripted(answers)) as server:
        res = evaluate(rows_corpus, server)
        assert len(server.requests) == 30 and all(r.audios == [] for r in server.requests)
    m = json.loads((rows_corpus / "eval" / "omni__direct" / "metrics.json").read_text())
    assert m == res.metrics
    fm = m["subsets"]["FM"]
    assert (fm["n"], fm["parse_failures"], fm["failed"]) == (10, 0, 0)
    assert fm["accuracy"] == pytest.approx(0.70) and fm["uar"] == pytest.approx(0.667, abs=5e-4)
    assert fm["waf"] == pytest.approx(0.68) and fm["ci95"][0] < 0.7 < fm["ci95"][1]
    assert m["subsets"]["FDM"]["accuracy"] == pytest.approx(0.8) and m["subsets"]["FSM"]["accuracy"] == pytest.approx(0.2)
    # FM right on k0-k4, k7, k8; FDM on k0-k7; FSM on k8, k9
    steps = {(s["from"], s["to"]): s for s in m["steps"]}
    assert list(steps) == [("FM", "FDM"), ("FDM", "FSM"), ("FM", "FSM")]
    assert steps[("FDM", "FSM")] == {"from": "FDM", "to": "FSM", "n": 10, "delta": pytest.approx(-0.6), "b": 8,
                                     "c": 2, "p_mcnemar": pytest.approx(0.109375), "p_holm": pytest.approx(0.328125)}
    assert (steps[("FM", "FDM")]["b"], steps[("FM", "FDM")]["c"]) == (1, 2)
    assert steps[("FM", "FDM")]["p_mcnemar"] == 1.0 and steps[("FM", "FDM")]["p_holm"] == 1.0
    assert (steps[("FM", "FSM")]["b"], steps[("FM", "FSM")]["c"]) == (6, 1)
    assert steps[("FM", "FSM")]["p_mcnemar"] == pytest.approx(0.125)  # 2 * (1 + 7) / 128
    assert steps[("FM", "FSM")]["p_holm"] == pytest.approx(0.328125)  # Holm: max(3 * .109375, 2 * .125)
    assert m["indices"]["face_reliance"] == {"value": pytest.approx(0.5), "n": 10}
    assert m["indices"]["audio_reliance"] is None and m["indices"]["compensation"] is None
    assert m["confusion"]["FM"] == {"Happy": {"Happy": 4}, "Sad": {"Happy": 2, "Sad": 1}, "Anger": {"Anger": 2, "Sad": 1}}
    assert m["datasets"]["A"]["FM"]["n"] == 5 and m["datasets"]["A"]["FM"]["accuracy"] == pytest.approx(1.0)
    assert m["datasets"]["B"]["FM"]["accuracy"] == pytest.approx(0.4)  # k5 H, k6 H, k7 A, k8 A, k9 S vs SSAAA
    preds = [json.loads(line) for line in (res.out_dir / "predictions.jsonl").read_text().splitlines()]
    k0 = next(p for p in preds if p["clip_id"] == "k0" and p["subset"] == "FM")
    assert k0["answer"] == "Happy" and k0["reply"] == "**happy**" and k0["correct"] is True and len(k0["key"]) == 64
    assert k0["prompt_tokens"] == 100 and k0["latency_s"] > 0 and k0["cached"] is False
    from mime_fast.evaluation.figure import BAR
    from PIL import Image

    img = np.asarray(Image.open(res.out_dir / "degradation.png").convert("RGB"))
    bars = (img == BAR).all(axis=2)
    columns = set(np.flatnonzero(bars.any(axis=0)).tolist())
    firsts = sorted(x for x in columns if not columns & {x - 1, x - 2, x - 3})  # each bar's left edge (the
    # whisker, 2 px in its middle, splits it in two)
    tops = [int(np.flatnonzero(bars[:, x])[0]) for x in firsts]
    assert [(310 - t) / 270 for t in tops] == pytest.approx([0.7, 0.8, 0.2], abs=0.005)  # FM, FDM, FSM
    import pyarrow.parquet as pq

    table = pq.read_table(res.out_dir / "predictions.parquet")
    assert table.column_names == list(PREDICTION_COLUMNS) and table.to_pylist() == preds
    assert str(table.schema.field("correct").type) == "bool" and str(table.schema.field("prompt_tokens").type) == "int64"
    report = (res.out_dir / "report.md").read_text()
    assert "| FDM → FSM | 10 | -0.600 | 8 | 2 | 0.1094 | 0.3281 |" in report
    # an unreadable reply: counted wrong, in parse_failures, never left out
    answers["FM/k1.mp4"] = "Happy, or maybe Sad"
    with FakeChatServer(media_index(rows_corpus), scripted(answers)) as server:
        m = evaluate(rows_corpus, server, use_cache=False).metrics
    assert m["subsets"]["FM"]["accuracy"] == pytest.approx(0.60) and m["subsets"]["FM"]["n"] == 10
    assert m["subsets"]["FM"]["parse_failures"] == 1 and m["confusion"]["FM"]["Happy"] == {"Happy": 3, "unparseable": 1}


def test_a_judge_model_reads_what_the_rules_cannot_and_the_rest_stays_unparseable(rows_corpus: Path) -> None:
    answers = truth_answers()
    answers["FM/k0.mp4"] = "The raised cheeks suggest the speaker is in a good mood."  # no label: the judge: Happy
    answers["FM/k1.mp4"] = "Maybe happy, maybe sad."  # hesitates: the judge says none

    def script(req: Request) -> Reply:
        if req.body["model"] == "judge":
            return Reply(content="Happy" if "good mood" in req.user_text else "none")
        return Reply(content=answers[req.videos[0]])

    with FakeChatServer(media_index(rows_corpus), script) as server:
        res = evaluate(rows_corpus, server, judge_model="judge", subsets=["FM"])
        judge = [r for r in server.requests if r.body["model"] == "judge"]
        again = evaluate(rows_corpus, server, judge_model="judge", subsets=["FM"])
        assert len(server.requests) == 12  # the rerun asks neither the model nor the judge again
    assert len(judge) == 2 and all(r.videos == [] and r.images == [] for r in judge)  # text only
    assert "good mood" in judge[0].user_text and "none" in judge[0].user_text
    k = {p["clip_id"]: p for p in res.predictions}
    assert (k["k0"]["answer"], k["k0"]["judged"], k["k0"]["correct"], k["k0"]["prompt_tokens"]) == ("Happy", True,
                                                                                                  True, 200)
    assert (k["k1"]["answer"], k["k1"]["judged"]) == (None, False)
    assert k["k1"]["reason"] == "names several emotions (Happy, Sad); the judge read no answer either"
    fm = res.metrics["subsets"]["FM"]
    assert (fm["judged"], fm["parse_failures"], fm["accuracy"]) == (1, 1, pytest.approx(0.6))
    assert again.metrics == res.metrics


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.mark.parametrize("stream", [io.StringIO, Terminal])
def test_progress_is_a_bar_on_a_terminal_and_lines_elsewhere(rows_corpus: Path, stream) -> None:
    out = stream()
    with FakeChatServer(media_index(rows_corpus), scripted(truth_answers())) as server:
        evaluate(rows_corpus, server, subsets=["FM"], progress=out)
    text = out.getvalue()
    if stream is Terminal:
        assert "eval: 100%" in text and "10/10" in text and "unparseable=0" in text and "\r" in text
    else:
        assert text.splitlines()[-1].startswith("eval: 10/10 answers (0 cached, 0 unparseable, 0 failed)")


def test_a_429_is_retried_after_retry_after_and_a_request_that_keeps_failing_is_left_out(rows_corpus: Path) -> None:
    answers = truth_answers()
    seen: dict[str, int] = {}

    def script(req: Request) -> Reply:
        video = req.videos[0]
        seen[video] = seen.get(video, 0) + 1
        if video == "FM/k0.mp4" and seen[video] == 1:
            return Reply(429, body={"error": {"message": "rate limited"}}, headers={"retry-after": "0"})
        if video == "FDM/k7.mp4":
            return Reply(503, body={"error": {"message": "overloaded"}})
        return Reply(content=answers[video])

    with FakeChatServer(media_index(rows_corpus), script) as server:
        res = evaluate(rows_corpus, server, retries=2, subsets=["FM", "FDM"])
    assert seen["FM/k0.mp4"] == 2 and seen["FDM/k7.mp4"] == 3  # 1 + 2 retries
    assert res.requests == 20 + 1 + 2
    m = res.metrics["subsets"]
    assert (m["FM"]["n"], m["FM"]["failed"], m["FM"]["accuracy"]) == (10, 0, pytest.approx(0.7))
    assert (m["FDM"]["n"], m["FDM"]["failed"], m["FDM"]["accuracy"]) == (9, 1, pytest.approx(7 / 9))
    failed = next(p for p in res.predictions if p["status"] == "failed")
    assert failed["clip_id"] == "k7" and "503" in failed["reason"] and failed["reply"] is None
    assert res.metrics["steps"][0]["n"] == 9  # the paired test: clips both subsets answered


def test_a_rerun_answers_from_the_cache_and_ctrl_c_repeats_no_answered_request(rows_corpus: Path) -> None:
    answers = truth_answers()
    interrupted = threading.Event()

    def script(req: Request) -> Reply:
        if req.n == 5 and not interrupted.is_set():
            interrupted.set()
            os.kill(os.getpid(), signal.SIGINT)  # Ctrl-C while the 5th request is answered
        return Reply(content=answers[req.videos[0]])

    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with FakeChatServer(media_index(rows_corpus), script) as server:
            with pytest.raises(KeyboardInterrupt):
                evaluate(rows_corpus, server)
            first = [r.videos[0] for r in server.requests]
            assert 5 <= len(first) < 30
            res = evaluate(rows_corpus, server)
            second = [r.videos[0] for r in server.requests[len(first):]]
            assert sorted(first + second) == sorted(answers) and not set(first) & set(second)
            assert res.cached == len(first) and res.metrics["subsets"]["FM"]["accuracy"] == pytest.approx(0.7)
            n = len(server.requests)
            again = evaluate(rows_corpus, server)
            assert len(server.requests) == n and again.cached == 30 and again.requests == 0  # the server sees nothing
            assert again.metrics == res.metrics
    finally:
        signal.signal(signal.SIGINT, previous)


def _holding(n: int) -> tuple[Callable[[Request], Reply], threading.Event, threading.Event]:
    """A server script answering the truth that holds request ``n`` until ``release`` (``held`` set then)."""
    answers = truth_answers()
    held, release = threading.Event(), threading.Event()

    def script(req: Request) -> Reply:
        if req.n == n:
            held.set()
            release.wait(30)
        return Reply(content=answers[req.videos[0]])

    return script, held, release


def _eval_process(code: list[str], folder: Path, server, *extra: str, stderr=subprocess.DEVNULL) -> subprocess.Popen:
    """``mime-fast eval`` of the corpus ``folder`` against ``server`` in a child process (``code``: how Python runs it)."""
    env = dict(os.environ, PYTHONPATH=str(Path(mime_fast.__file__).parents[1]))
    return subprocess.Popen([sys.executable, *code, "eval", str(folder), "--endpoint", server.url, "--model", "omni",
                             "--concurrency", "1", *extra], env=env, stdout=subprocess.DEVNULL, stderr=stderr)


def test_a_run_killed_with_sigkill_resumes_with_no_answered_request_repeated(rows_corpus: Path) -> None:
    hold_the_12th, held, release = _holding(12)
    with FakeChatServer(media_index(rows_corpus), hold_the_12th) as server:
        proc = _eval_process(["-m", "mime_fast.cli"], rows_corpus, server, "-q")
        try:
            assert held.wait(60)
            os.kill(proc.pid, signal.SIGKILL)
            assert proc.wait(30) == -signal.SIGKILL
        finally:
            release.set()
            if proc.poll() is None:
                proc.kill()
        answered = [r.videos[0] for r in server.requests[:11]]
        res = evaluate(rows_corpus, server)
        again = [r.videos[0] for r in server.requests[12:]]
    assert len(again) == 30 - 11 and not set(again) & set(answered) and res.cached == 11
    assert res.metrics["subsets"]["FM"]["accuracy"] == pytest.approx(0.7)


@pytest.mark.slow
def test_ctrl_c_of_the_command_exits_130_and_the_rerun_resumes(rows_corpus: Path) -> None:
    hold_the_6th, held, release = _holding(6)
    with FakeChatServer(media_index(rows_corpus), hold_the_6th) as server:
        proc = _eval_process(["-c", INTERRUPTED_RUN], rows_corpus, server, stderr=subprocess.PIPE)
        try:
            assert held.wait(60)
            os.kill(proc.pid, signal.SIGINT)
            assert proc.wait(60) == 130
            err = proc.stderr.read().decode()
        finally:
            release.set()
            if proc.poll() is None:
                proc.kill()
            proc.stderr.close()
        assert err.strip().splitlines()[-1] == "interrupted, rerun to resume" and "Traceback" not in err
        assert len(server.requests) == 6  # none after Ctrl-C
        res = evaluate(rows_corpus, server)
    assert res.cached == 5 and len(server.requests) == 6 + 25


# ----------------------------------------------------------------- what each subset is sent (real corpus)


def _black(jpeg: bytes) -> bool:
    from PIL import Image

    return max(Image.open(io.BytesIO(jpeg)).convert("L").getextrema()) < 24


@pytest.mark.parametrize("transport", ["frames", "video"])
def test_a_model_answering_from_what_it_receives(corpus: Path, transport: str) -> None:  # noqa: F811
    """The scripted model hears the clip's audio (it knows whose wav it is) and sees the pictures:
    audio and a picture -> the truth; audio and black pictures -> '**Sad**'; no audio ->
    "{'emotion': 'anger'}". So FM/FDM/FSM are right, VMM right on the Sad clip only, the muted
    subsets right on the Anger clip only -- and a muted subset given audio, or a VMM not black,
    would change them."""
    index = media_index(corpus)

    def script(req: Request) -> Reply:
        black = all(_black(j) for j in req.images) if transport == "frames" else req.videos[0].startswith("VMM/")
        if req.audios:
            clip = req.audios[0].split("/")[1].split(".")[0]
            return Reply(content="**Sad**" if black else LABELS[clip])
        return Reply(content="{'emotion': 'anger'}")

    with FakeChatServer(index, script) as server:
        res = evaluate(corpus, server, transport=transport, frames=3, frame_size=64)
        reqs = list(server.requests)
    assert len(reqs) == 14
    if transport == "frames":
        assert all(len(r.images) == 3 and not r.videos for r in reqs)
        assert sum(all(_black(j) for j in r.images) for r in reqs) == 2  # VMM's, and only VMM's
    else:
        for r in reqs:  # the mp4 of each subset, the wav exactly with the subsets that have audio
            subset, clip = r.videos[0].split("/")[0], r.videos[0].split("/")[1].split(".")[0]
            assert r.audios == ([f"audio/{clip}.wav"] if subset in WITH_AUDIO else [])
    m = res.metrics["subsets"]
    for s in ("FM", "FDM", "FSM"):
        assert (m[s]["n"], m[s]["accuracy"], m[s]["uar"], m[s]["waf"], m[s]["with_audio"]) == (2, 1.0, 1.0, 1.0, 2)
    # VMM: c1 Anger answered Sad (wrong), c2 Sad right: Sad F1 2/3, Anger 0
    assert (m["VMM"]["accuracy"], m["VMM"]["uar"], m["VMM"]["with_audio"]) == (0.5, 0.5, 2)
    assert m["VMM"]["waf"] == pytest.approx(1 / 3)
    for s in ("FDAM", "FSAM", "AMM"):  # never audio: Anger for both clips
        assert (m[s]["accuracy"], m[s]["uar"], m[s]["with_audio"]) == (0.5, 0.5, 0)
        assert m[s]["waf"] == pytest.approx(1 / 3)
    steps = {(s["from"], s["to"]): s for s in res.metrics["steps"]}
    assert (steps[("FM", "AMM")]["b"], steps[("FM", "AMM")]["c"], steps[("FM", "AMM")]["delta"]) == (1, 0, -0.5)
    assert steps[("FM", "FDM")]["p_mcnemar"] == 1.0 and len(steps) == 7
    idx = res.metrics["indices"]
    assert idx["audio_reliance"] == {"value": 0.5, "n": 2} and idx["face_reliance"] == {"value": 0.0, "n": 2}
    assert idx["compensation"] == {"value": 0.0, "n": 2}  # (FSM - FSAM) - (FM - AMM) = .5 - .5


def test_the_frames_transport_is_checked_to_keep_fdms_blur(corpus: Path) -> None:  # noqa: F811
    with FakeChatServer(media_index(corpus), lambda req: Reply(content="Anger")) as server:
        kept = evaluate(corpus, server, transport="frames", frames=2, subsets=["FM", "FDM"]).metrics["transport_check"]
        stream = io.StringIO()
        lost = evaluate(corpus, server, transport="frames", frames=2, frame_size=16, subsets=["FM", "FDM"],
                        progress=stream, name="tiny")
        video = evaluate(corpus, server, transport="video", subsets=["FM", "FDM"])
    # at full size (192 x 144 sent as it is) the blur removes most of the face's detail, and still does on
    # the JPEGs; 16 px frames keep little of that difference: a warning before the first request
    assert kept["kept"] is True and kept["warning"] is None and kept["frames"] == 4
    assert kept["removed_source"] > 0.5 and kept["removed_sent"] >= 0.5 * kept["removed_source"]
    check = lost.metrics["transport_check"]
    assert check["kept"] is False and check["removed_sent"] < 0.5 * check["removed_source"]
    assert stream.getvalue().startswith("eval: warning: the frames sent (16 px, qscale 3) lose FDM's blur")
    assert "**Warning:** the frames sent (16 px" in (lost.out_dir / "report.md").read_text()
    assert video.metrics["transport_check"] is None  # the mp4 as it is


def test_fps_sends_frames_by_the_clips_duration(corpus: Path) -> None:  # noqa: F811
    from mime_fast.manifest import read_rows

    duration = {r["clip_id"]: r["duration_s"] for r in read_rows(corpus) if r["subset"] == "FM"}
    with FakeChatServer(media_index(corpus), lambda req: Reply(content="Anger")) as server:
        res = evaluate(corpus, server, transport="frames", fps=10, frame_size=32, subsets=["FM", "AMM"],
                       check_transport=0)
        sent = {(r.audios[0] if r.audios else "none", len(r.images)) for r in server.requests}
    assert {round(duration[c] * 10) for c in ("c1", "c2")} == {5, 6}  # 0.5 s and 0.6 s
    assert sent == {("audio/c1.wav", 5), ("audio/c2.wav", 6), ("none", 5), ("none", 6)}
    assert res.metrics["sent"]["fps"] == 10 and "10 JPEG frames per second of clip" in \
        (res.out_dir / "report.md").read_text()


def test_vmm_without_its_picture_is_its_audio_alone(corpus: Path) -> None:  # noqa: F811
    with FakeChatServer(media_index(corpus), lambda req: Reply(content="Sad")) as server:
        res = evaluate(corpus, server, vmm_picture="none", subsets=["FM", "VMM"])
        sent = sorted((r.videos[0] if r.videos else "-", r.audios[0]) for r in server.requests)
    assert sent == [("-", "audio/c1.wav"), ("-", "audio/c2.wav"), ("FM/c1.mp4", "audio/c1.wav"),
                    ("FM/c2.mp4", "audio/c2.wav")]
    vmm = [p for p in res.predictions if p["subset"] == "VMM"]
    assert all(p["video"] is None and p["audio"] for p in vmm) and res.metrics["sent"]["vmm_picture"] == "none"
    assert "VMM without its black picture" in (res.out_dir / "report.md").read_text()
    with FakeChatServer(media_index(corpus), lambda req: Reply(content="Sad")) as server:
        res = evaluate(corpus, server, vmm_picture="none", audio="none", subsets=["VMM"])
        assert server.requests == []  # nothing to send: failed, saying why
    assert all(p["status"] == "failed" and "nothing to send" in p["reason"] for p in res.predictions)


def test_audio_none_sends_no_audio_to_any_subset(corpus: Path) -> None:  # noqa: F811
    with FakeChatServer(media_index(corpus), lambda req: Reply(content="Anger")) as server:
        res = evaluate(corpus, server, audio="none", subsets=["FM", "VMM"])
        assert len(server.requests) == 4 and all(r.audios == [] for r in server.requests)
    assert res.metrics["subsets"]["VMM"]["with_audio"] == 0 and res.metrics["sent"]["audio"] == "none"


def test_only_the_subsets_whose_spec_has_audio_send_it_whatever_the_row_says(tmp_path: Path) -> None:
    """The clip's 16 kHz wav goes with FM, FDM, FSM and VMM only: a muted subset (FDAM, FSAM, AMM)
    whose manifest row says ``has_audio: true`` (the source's flag, copied to every subset's row)
    gets none, since its video has no audio; the subset table decides, not the row alone."""
    from mime_fast.evaluation.runner import media_of
    from mime_fast.spec import CODES, SUBSETS

    assert CODES == ("FM", "FDM", "FSM", "VMM", "FDAM", "FSAM", "AMM")
    root = tmp_path / "rows"
    (root / "audio").mkdir(parents=True)
    (root / "audio" / "c.wav").write_bytes(b"a wav")
    audio_row = {"clip_id": "c", "path": "audio/c.wav", "sha256": hashlib.sha256(b"a wav").hexdigest()}
    for code in CODES:
        (root / code).mkdir()
        (root / code / "c.mp4").write_bytes(f"{code} video".encode())
    with_audio: dict[tuple[str, bool], set[str]] = {}
    for audio in ("auto", "none"):
        for flag in (True, False):
            with_audio[audio, flag] = set()
            for code in CODES:
                media = media_of(root, _row("c", code, "Happy", "A", f"{code}/c.mp4", "", has_audio=flag),
                                 audio_row, audio)
                video = ("video", f"{code}/c.mp4")
                sent = [(m.kind, m.ref) for m in media]
                assert sent in ([video], [video, ("audio", "audio/c.wav")]), (code, sent)
                if len(sent) == 2:
                    with_audio[audio, flag].add(code)
    assert with_audio["auto", True] == {"FM", "FDM", "FSM", "VMM"}
    assert with_audio["auto", True] == {c.value for c, s in SUBSETS.items() if s.has_audio}
    assert with_audio["auto", False] == with_audio["none", True] == with_audio["none", False] == set()


@pytest.mark.parametrize(("condition", "reply"), [
    ("direct", "Sad"),
    ("cot", "Tears, a low voice: sadness, perhaps fear.\n{'emotion': 'sad'}"),
    ("tom", "(1) ... (4) The speaker feels sad, not angry.\n{'emotion': 'Sad'}"),
    ("coe", '```json\n{"scene_understanding": "a woman alone at a table", "emotional_analysis": "her eyes are '
            'lowered, her voice breaks: sadness, no sign of anger", "predicted_emotion": "Sad"}\n```'),
])
def test_each_prompt_condition_asks_its_format_and_its_answers_are_read(rows_corpus: Path, condition: str,
                                                                         reply: str) -> None:
    with FakeChatServer(media_index(rows_corpus), lambda req: Reply(content=reply)) as server:
        res = evaluate(rows_corpus, server, condition=condition, subsets=["FM"], limit=2)
        text = server.requests[0].user_text
    assert len(res.predictions) == 2 and all(p["answer"] == "Sad" for p in res.predictions)
    assert res.out_dir.name == f"omni__{condition}" and res.metrics["sent"]["condition"] == condition
    expected = {"direct": "Answer with exactly one word from: Anger, Disgust, Fear, Happy, Neutral, Sad, Surprise.",
                "cot": "think step-by-step", "tom": "(3) Attribute from the Speaker's Perspective",
                "coe": '"predicted_emotion": "one of Anger, Disgust, Fear, Happy, Neutral, Sad, Surprise"'}[condition]
    assert expected in text and ("{'emotion': 'label'}" in text) == (condition in ("cot", "tom"))


def test_coe_accepted_asks_only_what_the_chain_of_emotion_kept_and_warns_on_its_own_model(rows_corpus: Path) -> None:
    with open(rows_corpus / "coe.jsonl", "w") as f:
        for i in range(10):
            for subset in SUBSETS3:
                status = "rejected" if (subset == "FSM" and i % 2) else "ok"
                f.write(json.dumps({"clip_id": f"k{i}", "subset": subset, "status": status, "model": "omni",
                                    "text_model": "text"}) + "\n")
    with FakeChatServer(media_index(rows_corpus), scripted(truth_answers())) as server:
        stream = io.StringIO()
        res = evaluate(rows_corpus, server, coe_accepted=True, progress=stream)
        assert sorted(r.videos[0] for r in server.requests if r.videos[0].startswith("FSM/")) == \
            [f"FSM/k{i}.mp4" for i in (0, 2, 4, 6, 8)]
        other = evaluate(rows_corpus, server, coe_accepted=True, model="another", progress=None)
    m = res.metrics
    assert (m["subsets"]["FM"]["n"], m["subsets"]["FSM"]["n"], m["coe_accepted"]["accepted"]) == (10, 5, 25)
    assert m["coe_accepted"]["warning"].startswith("omni is the model that made the Chain-of-Emotion")
    assert "eval: warning: omni is the model" in stream.getvalue() and "**Warning:** omni" in \
        (res.out_dir / "report.md").read_text()
    assert other.metrics["coe_accepted"] == {"accepted": 25, "warning": None}
    (rows_corpus / "coe.jsonl").unlink()
    with pytest.raises(FileNotFoundError, match="no coe.jsonl"):
        evaluate(rows_corpus, server, coe_accepted=True)


def test_cost_the_spending_limit_and_the_dry_run_estimate(rows_corpus: Path, capsys) -> None:
    # every reply: 100 prompt and 10 completion tokens; at 2 / 10 per million that is 0.0003 a request
    prices = {"price_in": 2.0, "price_out": 10.0}
    with FakeChatServer(media_index(rows_corpus), scripted(truth_answers())) as server:
        plan = evaluate(rows_corpus, server, dry_run=True, max_tokens=100, **prices).dry_run
        # before any answer: counted from the media (these rows give no picture size: the text alone)
        text = -(-len("".join(render("direct", "video"))) // 4)
        assert plan == {"requests": 30, "media_s": 30.0, "answered": 0, "basis": "media",
                        "media_prompt_tokens": 30 * text, "prompt_tokens": 30 * text, "completion_tokens": None,
                        "money": None, "completion_tokens_max": 3000, "money_prompt": pytest.approx(60 * text / 1e6),
                        "money_max": pytest.approx((60 * text + 30000) / 1e6), "unsized": 30}
        assert server.requests == [] and not (rows_corpus / "eval").exists()  # nothing sent, nothing written
        # the limit: 5 requests fit in 0.0016, the 6th would pass it; none is sent after
        res = evaluate(rows_corpus, server, max_cost=0.0016, **prices)
        assert len(server.requests) == 5 and len(res.predictions) == 5 and res.metrics["not_sent"] == 25
        assert res.metrics["cost"]["money"] == pytest.approx(0.0015)
        assert "Stopped at the spending limit" in (res.out_dir / "report.md").read_text()
        # the dry run now scales from the 5 answers: 100 prompt tokens per second of clip, 10 per answer
        plan = evaluate(rows_corpus, server, dry_run=True, **prices).dry_run
        assert plan == {"requests": 25, "media_s": 25.0, "answered": 5, "basis": "answers",
                        "media_prompt_tokens": 25 * text, "prompt_tokens": 2500, "completion_tokens": 250,
                        "money": pytest.approx(0.0075), "unsized": 25}
        assert main(["eval", str(rows_corpus), "--endpoint", server.url, "--model", "omni", "--dry-run",
                     "--price-in", "2", "--price-out", "10"]) == 0
        assert json.loads(capsys.readouterr().out)["requests"] == 25 and len(server.requests) == 5
        code = main(["eval", str(rows_corpus), "--endpoint", server.url, "--model", "omni", "-q", "--concurrency", "1",
                     "--price-in", "2", "--price-out", "10", "--max-cost", "0.0031"])
        # the limit is on what this run spends (the cached answers were paid before): 10 more, 0.0030
        assert code == 1 and len(server.requests) == 15
        assert "stopped at --max-cost 0.0031: 15 requests not sent" in capsys.readouterr().err
        res = evaluate(rows_corpus, server, max_cost=1.0, **prices)  # a higher limit resumes
    assert len(server.requests) == 30 and res.cached == 15 and res.metrics["not_sent"] == 0
    cost = res.metrics["cost"]
    assert cost["money"] == pytest.approx(0.009) and cost["subsets"]["FM"] == pytest.approx(0.003)
    assert res.metrics["subsets"]["FM"]["prompt_tokens"] == 1000 and res.metrics["subsets"]["FM"]["completion_tokens"] == 100


def test_facial_cue_hallucination_rate_on_the_clips_the_audit_shows_masked(rows_corpus: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    def script(req: Request) -> Reply:
        subset, clip = req.videos[0].split("/")[0], int(req.videos[0].split("/k")[1].split(".")[0])
        if subset == "FM" or clip < 5:
            return Reply(content="Her lips are pressed and her brows furrowed.\n{'emotion': 'anger'}")
        return Reply(content="The face is blurred, so her facial expression cannot be seen; the voice is tense. "
                             "{'emotion': 'anger'}")

    with FakeChatServer(media_index(rows_corpus), script) as server:
        direct = evaluate(rows_corpus, server, subsets=["FSM"])
        plain = evaluate(rows_corpus, server, condition="cot", subsets=["FM", "FSM"])
        # the audit: k0 and k1 of FSM have unmasked frames, k2 failed; the others are masked throughout
        rows = [{"clip_id": f"k{i}", "subset": "FSM", "unmasked_frames": 3 if i < 2 else 0,
                 "status": "failed" if i == 2 else "ok"} for i in range(10)]
        pq.write_table(pa.Table.from_pylist(rows), rows_corpus / "audit.parquet")
        audited = evaluate(rows_corpus, server, condition="cot", subsets=["FM", "FSM"])
    assert direct.metrics["facial_cue_rate"] is None  # no rationale to read
    rates = plain.metrics["facial_cue_rate"]
    assert rates["FM"] == {"n": 10, "describing": 10, "audited": False, "rate": 1.0}
    assert rates["FSM"] == {"n": 10, "describing": 5, "audited": False, "rate": 0.5}
    rates = audited.metrics["facial_cue_rate"]
    assert rates["FSM"] == {"n": 7, "describing": 2, "audited": True, "rate": pytest.approx(2 / 7)}  # k3, k4 of k3-k9
    assert rates["FM"]["n"] == 10  # FM is not filtered: the face is there to describe
    assert "| FSM | 7 | 2 | 0.286 |" in (audited.out_dir / "report.md").read_text()


# ------------------------------------------------------------------------ task pairs (EmotionHallucer)


def test_pair_metrics_by_hand() -> None:
    from mime_fast.evaluation.pairs import pair_metrics

    answers = [("yes", "no"), ("yes", "yes"), ("no", "no"), ("no", "yes")]  # (basic, hallucinated) per clip
    preds = [{"clip_id": f"k{i}", "subset": "FM", "kind": kind, "status": "ok", "answer": a, "expected": truth,
              "correct": a == truth}
             for i, pair in enumerate(answers) for kind, a, truth in zip(("basic", "hallucinated"), pair, ("yes", "no"))]
    m = pair_metrics(preds)["FM"]
    assert (m["pairs"], m["basic"], m["hallucinated"], m["overall"]) == (4, 50.0, 50.0, 25.0)
    assert m["d_y"] == 0.0 and m["r_fp"] == 0.5 and m["parse_failures"] == 0


@pytest.mark.parametrize(("reply", "answer"), [
    ("Yes.", ("yes", None)), ("no", ("no", None)), ("**No**, the face is blurred.", ("no", None)),
    ('{"answer": "yes"}', ("yes", None)), ("Yes and no.", (None, "says both yes and no")),
    ("I cannot tell.", (None, "refusal")), ("Perhaps.", (None, "says neither yes nor no")),
])
def test_yes_no_answers(reply: str, answer: tuple) -> None:
    from mime_fast.evaluation.pairs import extract_yes_no

    assert extract_yes_no(reply) == answer


def test_task_pairs_asks_a_basic_and_a_hallucinated_question(rows_corpus: Path) -> None:
    # FSM k0's stage II kept a body cue and deleted a facial one: its pair asks about them
    stage2 = ("**[REMAINED] (Identity)** A woman in a red coat\n**[REMAINED] (Body)** Shoulders hunched forward\n"
              "**[DELETED] (Face)** Eyebrows drawn together and lowered\n[DELETED] (Audio) none")
    (rows_corpus / "coe.jsonl").write_text(json.dumps({"clip_id": "k0", "subset": "FSM", "status": "ok",
                                                       "stage2_output": stage2}) + "\n")
    patterns = [("Yes", "No"), ("Yes", "Yes"), ("No", "No"), ("No", "Yes")]

    def script(req: Request) -> Reply:
        subset, i = req.videos[0].split("/")[0], int(req.videos[0].split("/k")[1].split(".")[0])
        question = req.user_text.split("Question: ")[1]
        basic = TRUTH[i] in question or "Shoulders" in question
        return Reply(content=patterns[i % 4][0 if basic else 1] if subset == "FM" else "yes" if basic else "no")

    with FakeChatServer(media_index(rows_corpus), script) as server:
        res = evaluate(rows_corpus, server, task="pairs", subsets=["FM", "FSM"], limit=8)
        questions = {(r.videos[0], r.user_text.split("Question: ")[1]) for r in server.requests}
    assert len(server.requests) == 32 and res.out_dir.name == "omni__pairs"
    assert ("FSM/k0.mp4", "Does the clip show the following? Shoulders hunched forward") in questions
    assert ("FSM/k0.mp4", "Does the clip show the following? Eyebrows drawn together and lowered") in questions
    assert ("FM/k0.mp4", "Does the person express Happy?") in questions
    other = [q for v, q in questions if v == "FM/k0.mp4" and q != "Does the person express Happy?"]
    assert len(other) == 1 and other[0].startswith("Does the person express ") and "Happy" not in other[0]
    fm, fsm = res.metrics["subsets"]["FM"], res.metrics["subsets"]["FSM"]
    assert (fm["pairs"], fm["basic"], fm["hallucinated"], fm["overall"], fm["d_y"], fm["r_fp"]) == \
        (8, 50.0, 50.0, 25.0, 0.0, 0.5)
    assert (fsm["basic"], fsm["hallucinated"], fsm["overall"], fsm["r_fp"]) == (100.0, 100.0, 100.0, None)
    kinds = [(p["kind"], p["expected"]) for p in res.predictions if p["clip_id"] == "k0" and p["subset"] == "FM"]
    assert kinds == [("basic", "yes"), ("hallucinated", "no")]
    assert "| FM | 8 | 50.0 | 50.0 | 25.0 | 0.000 | 0.500 | 0 | 0 |" in (res.out_dir / "report.md").read_text()


def test_task_statements_judges_true_and_false_statements_made_from_the_coe(rows_corpus: Path) -> None:
    with pytest.raises(FileNotFoundError, match="no coe.jsonl"):
        mime_fast.evaluate(rows_corpus, ClientOptions("http://127.0.0.1:9/v1", "m"), task="statements")
    with open(rows_corpus / "coe.jsonl", "w") as f:
        for i, label in enumerate(TRUTH):
            f.write(json.dumps({"clip_id": f"k{i}", "subset": "FM", "label": label, "status": "ok",
                                "scene_understanding": f"Clip k{i}: a person at a desk. The light is dim.",
                                "emotional_analysis": f"The voice rises. The person looks {label.lower()} now."}) + "\n")

    def script(req: Request) -> Reply:  # right on k0-k4; k5-k9 say yes to everything
        i = int(req.videos[0].split("/k")[1].split(".")[0])
        statement = req.user_text.split("Statement: ")[1]
        true = f"Clip k{i}:" in statement or f"looks {TRUTH[i].lower()}" in statement
        return Reply(content="Yes" if true or i >= 5 else "No")

    with FakeChatServer(media_index(rows_corpus), script) as server:
        res = evaluate(rows_corpus, server, task="statements", subsets=["FM", "FDM"])
        asked = [r.user_text.split("Statement: ")[1] for r in server.requests if r.videos[0] == "FM/k0.mp4"]
    assert len(server.requests) == 40  # 4 statements per FM clip; FDM has no CoE: not asked
    assert sorted(asked) == sorted(["Clip k0: a person at a desk.", "The person looks happy now.",
                                    "The person looks sad now.", asked[-1]])
    assert asked[-1].startswith("Clip k") and not asked[-1].startswith("Clip k0:")  # another clip's scene
    m = res.metrics["subsets"]["FM"]
    assert (m["n"], m["accuracy"], m["parse_failures"]) == (40, 0.75, 0)
    assert {k: v["accuracy"] for k, v in m["by_kind"].items()} == {"true_scene": 1.0, "true_emotion": 1.0,
                                                                    "reversed": 0.5, "other_clip": 0.5}
    assert "| FM | 40 | 0.750 |" in (res.out_dir / "report.md").read_text()


def test_a_missing_file_fails_its_sample_and_an_error_quoting_the_key_is_scrubbed(rows_corpus: Path) -> None:
    secret = "sk-live-0123456789abcdef"
    (rows_corpus / "FM" / "k3.mp4").unlink()

    def script(req: Request) -> Reply:
        if req.videos[0] == "FM/k4.mp4":  # a server that quotes the key it was given
            return Reply(401, body={"error": {"message": f"invalid api key {secret}"}})
        return Reply(content="Happy")

    with FakeChatServer(media_index(rows_corpus), script) as server:
        res = evaluate(rows_corpus, server, subsets=["FM"], api_key=secret)
    failed = {p["clip_id"]: p["reason"] for p in res.predictions if p["status"] == "failed"}
    assert failed["k3"] == "FM/k3.mp4 is missing from the corpus folder"
    assert "invalid api key ***" in failed["k4"] and secret not in failed["k4"]
    assert (res.metrics["subsets"]["FM"]["n"], res.metrics["subsets"]["FM"]["failed"]) == (8, 2)
    for p in (rows_corpus / "eval").rglob("*"):
        assert not p.is_file() or secret.encode() not in p.read_bytes()


def test_an_endpoint_that_cannot_be_reached_stops_the_run_before_writing_results(rows_corpus: Path) -> None:
    from mime_fast.corpus import RunStopped

    server = FakeChatServer()  # never started: its port refuses connections once closed
    server.httpd.server_close()
    with pytest.raises(RunStopped, match="cannot be reached"):
        evaluate(rows_corpus, server, concurrency=2)
    assert not (rows_corpus / "eval" / "omni__direct" / "metrics.json").exists()


# ------------------------------------------------------------------------------------------ the CLI


def test_cli_eval_writes_its_run_folder_and_never_the_api_key(rows_corpus: Path, monkeypatch, capsys) -> None:
    secret = "sk-test-0123456789abcdef"
    monkeypatch.setenv("MIME_TEST_EVAL_KEY", secret)
    with FakeChatServer(media_index(rows_corpus), scripted({})) as server:
        code = main(["eval", str(rows_corpus), "--endpoint", server.url, "--model", "Qwen/Qwen3-Omni",
                     "--condition", "tom", "--api-key-env", "MIME_TEST_EVAL_KEY", "--concurrency", "2", "-q"])
        assert server.requests[0].headers["authorization"] == f"Bearer {secret}"
        assert "{'emotion': 'label'}" in server.requests[0].user_text
        assert "Perspective-Taking" in server.requests[0].user_text
    assert code == 0 and capsys.readouterr().err == ""
    run = rows_corpus / "eval" / run_name("Qwen/Qwen3-Omni", "tom")
    assert run.name == "Qwen_Qwen3-Omni__tom"
    assert sorted(p.name for p in run.iterdir()) == ["degradation.png", "metrics.json", "predictions.jsonl",
                                                     "predictions.parquet", "report.md"]
    for p in rows_corpus.joinpath("eval").rglob("*"):
        assert not p.is_file() or secret.encode() not in p.read_bytes()


@pytest.mark.parametrize(("args", "needle"), [
    (["--subsets", "FM,XX"], "--subsets: unknown subset(s) XX"),
    (["--condition", "cod"], "invalid choice: 'cod'"),
    (["--frame-quality", "1"], "--frame-quality must be 2..31"),
    (["--retries", "-1"], "--retries and --backoff must be >= 0"),
    (["--max-cost", "5"], "--max-cost needs --price-in"),
    (["--price-in", "-1"], "--price-in must be a number >= 0"),
    (["--fps", "0"], "--fps must be > 0"),
])
def test_cli_usage_errors(rows_corpus: Path, capsys, args: list[str], needle: str) -> None:
    assert main(["eval", str(rows_corpus), "--endpoint", "http://127.0.0.1:9/v1", "--model", "m", *args]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("mime-fast eval: error:") and needle in err and len(err.splitlines()) == 1


def test_the_dry_run_counts_the_tokens_of_the_media_before_any_answer(rows_corpus: Path) -> None:
    # 720p rows of 10 s, FM with its 16 kHz wav: the counts of a Qwen-Omni processor, by hand --
    # video: 1280 x 720 fits 768 cells as 1008 x 560 = 36 x 20 cells; 10 s at 2 fps = 20 frames, two
    # frames to a set of cells: 10 x 720 = 7200; frames: 8 JPEGs of 448 x 252 = 16 x 9 = 144 cells
    # each: 1152; audio: 25 a second: 250
    rows = [json.loads(x) for x in (rows_corpus / "manifest.jsonl").read_text().splitlines()]
    audio = []
    for r in rows:
        r.update(width=1280, height=720, duration_s=10.0, has_audio=r["subset"] == "FM")
        if r["subset"] == "FM":
            wav = rows_corpus / "audio" / f"{r['clip_id']}.wav"
            wav.parent.mkdir(exist_ok=True)
            wav.write_bytes(b"wav of " + r["clip_id"].encode())
            audio.append({**r, "subset": "audio", "path": f"audio/{wav.name}", "has_audio": True,
                          "sha256": hashlib.sha256(wav.read_bytes()).hexdigest()})
    (rows_corpus / "manifest.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows + audio))
    with FakeChatServer(media_index(rows_corpus), scripted(truth_answers())) as server:
        for transport, picture in (("video", 7200), ("frames", 1152)):
            text = -(-len("".join(render("direct", transport))) // 4)
            plan = evaluate(rows_corpus, server, dry_run=True, transport=transport, price_in=1.0, max_tokens=10,
                            check_transport=0).dry_run
            assert plan["basis"] == "media" and plan["requests"] == 30 and "unsized" not in plan
            want = 30 * (text + picture) + 10 * 250  # only FM carries the wav (FDM and FSM too, in MIME,
            assert plan["prompt_tokens"] == plan["media_prompt_tokens"] == want  # but these rows say no audio)
            assert plan["completion_tokens_max"] == 300
            assert plan["money_prompt"] == pytest.approx(want / 1e6) and plan["money_max"] == plan["money_prompt"]
            # no audio asked: the wav's tokens go
            plan = evaluate(rows_corpus, server, dry_run=True, transport=transport, audio="none",
                            check_transport=0).dry_run
            assert plan["prompt_tokens"] == 30 * (text + picture) and plan["money_prompt"] is None
        assert server.requests == []
