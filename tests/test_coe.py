"""The Chain-of-Emotion runner (mime_fast.coe, mime-fast coe) against a scripted OpenAI-compatible
server on localhost (tests/coe_server.py), spoken to by the real openai client: Algorithm 1's
stages and inputs per subset, rejection, schema retry, cache, resume after kill -9, retries, the
API key, media encoding, dry run, outputs."""

from __future__ import annotations

import dataclasses
import errno
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

pytest.importorskip("openai")
pytest.importorskip("jinja2")
pytest.importorskip("jsonschema")

from coe_server import FakeChatServer, Reply, Request, default_reply, media_index  # noqa: E402

import mime_fast  # noqa: E402
from mime_fast import coe, samples  # noqa: E402
from mime_fast.cli import main  # noqa: E402
from mime_fast.coe.cache import ReplyCache  # noqa: E402
from mime_fast.coe.client import ClientOptions  # noqa: E402
from mime_fast.coe.outputs import COLUMNS  # noqa: E402
from mime_fast.corpus import discover, run_corpus  # noqa: E402

SUBSETS = ("FM", "FDM", "FSM", "VMM", "FDAM", "FSAM", "AMM")
LABELS = {"c1": "Anger", "c2": "Sad"}
WITH_AUDIO = {"FM", "FDM", "FSM", "VMM"}


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> Path:
    """A built corpus of two small labelled clips, all seven subsets."""
    root = tmp_path_factory.mktemp("coe")
    with open(root / "list.jsonl", "w") as f:
        for i, (clip, emotion) in enumerate(LABELS.items()):
            # different lengths: different audio bytes (the server names media by their hash)
            samples.make_clip(root / "in" / f"{clip}.mp4", duration=0.5 + 0.1 * i, fps=25, size=(192, 144),
                              seed=i + 1)
            f.write(json.dumps({"path": str(root / "in" / f"{clip}.mp4"), "emotion": emotion,
                                "landmarks": str(root / "in" / f"{clip}.npz")}) + "\n")
    summary = run_corpus(discover(root / "list.jsonl"), root / "out", min_height=0, min_duration=0)
    assert summary.ok
    return root / "out"


@pytest.fixture
def corpus(built: Path, tmp_path: Path) -> Path:
    """A fresh copy of the built corpus (the runs write beside its manifest)."""
    return Path(shutil.copytree(built, tmp_path / "corpus"))


@pytest.fixture
def server(corpus: Path):
    with FakeChatServer(media_index(corpus)) as s:
        yield s


def client_of(kw: dict, endpoint: str) -> ClientOptions:
    """The client's options among a run's keywords (taken out of ``kw``)."""
    names = {f.name for f in dataclasses.fields(ClientOptions)}
    return ClientOptions(endpoint=endpoint, **{k: kw.pop(k) for k in list(kw) if k in names})


def run(corpus: Path, server: FakeChatServer, **kw) -> coe.CoEResult:
    kw = {"model": "omni", "text_model": "text", "concurrency": 1, "backoff": 0.001, "progress": None, **kw}
    return coe.run(corpus, client_of(kw, server.url), **kw)


def rows_by(rows: list[dict]) -> dict[tuple[str, str], dict]:
    return {(r["clip_id"], r["subset"]): r for r in rows}


def pd_rows(path: Path) -> int:
    import pyarrow.parquet as pq

    return pq.read_metadata(path).num_rows


def sample_of(req: Request) -> str:
    """Which stage and video a request is, e.g. 'stage2_heavy FSM' (stage III: 'stage3')."""
    return f"{req.stage} {req.videos[0].split('/')[0]}" if req.videos else req.stage


# ------------------------------------------------------------------------------------- Algorithm 1


def test_algorithm1_stage_order_and_inputs_per_subset(corpus: Path, server: FakeChatServer) -> None:
    res = run(corpus, server)
    assert res.counts == {"ok": 14, "rejected": 0, "failed": 0}
    # The requests of clip c1, in order (one at a time): stage I on the target for FM and VMM, on
    # the clear version for the others -- FM for FDM/FSM, AMM (no audio) for FDAM/FSAM -- made once
    # per distinct input; stage II light/heavy on the degraded video; III for all but FM; IV on
    # the target.
    c1 = [sample_of(r) for r in server.requests[:20]]
    assert c1 == [
        "stage1 FM", "stage4 FM",                                            # FM
        "stage2_light FDM", "stage3", "stage4 FDM",                          # FDM (stage I: FM's)
        "stage2_heavy FSM", "stage3", "stage4 FSM",                          # FSM (stage I: FM's)
        "stage1 VMM", "stage3", "stage4 VMM",                                # VMM
        "stage1 AMM", "stage2_light FDAM", "stage3", "stage4 FDAM",          # FDAM: clear version AMM
        "stage2_heavy FSAM", "stage3", "stage4 FSAM",                        # FSAM (stage I: AMM's)
        "stage3", "stage4 AMM",                                              # AMM (stage I: its own)
    ]
    assert len(server.requests) == 40 and all(r.videos[0].endswith("/c1.mp4") for r in server.requests[:20]
                                              if r.videos)
    for r in server.requests:
        # models: the MLLM for I, II, IV; the text model for III, which gets text only
        assert r.body["model"] == ("text" if r.stage == "stage3" else "omni")
        assert (r.videos == []) == (r.stage == "stage3")
        # the 16 kHz audio goes exactly with a video that has it
        if r.videos:
            clip = r.videos[0].split("/")[1].split(".")[0]
            assert r.audios == ([f"audio/{clip}.wav"] if r.videos[0].split("/")[0] in WITH_AUDIO else [])
        if r.stage == "stage1":
            assert f"ground truth emotion is **{LABELS[clip]}**" in r.system
    rows = rows_by(res.rows)
    clear = {"FM": "FM", "FDM": "FM", "FSM": "FM", "VMM": "VMM", "FDAM": "AMM", "FSAM": "AMM", "AMM": "AMM"}
    for clip, emotion in LABELS.items():
        for s in SUBSETS:
            r = rows[(clip, s)]
            assert r["status"] == "ok" and r["reason"] is None and r["label"] == emotion
            assert r["stage1_video"] == f"{clear[s]}/{clip}.mp4"
            assert r["stage1_audio"] == (f"audio/{clip}.wav" if clear[s] in WITH_AUDIO else None)
            assert r["stage1_output"] == f"cues of {clear[s]}/{clip}.mp4 EMOTION={emotion} audio={clear[s] in WITH_AUDIO}"
            blur = {"FDM": "light", "FDAM": "light", "FSM": "heavy", "FSAM": "heavy"}.get(s)
            assert r["stage2_prompt"] == blur and r["blur_level"] == (blur or "none")
            if blur:  # stage II: the degraded video and the stage I cues of the clear version
                assert r["stage2_video"] == f"{s}/{clip}.mp4"
                assert r["stage2_output"] == f"[REMAINED] stage2_{blur} on {s}/{clip}.mp4 of ({r['stage1_output']})"
                verified = r["stage2_output"]
            else:
                assert r["stage2_video"] is r["stage2_output"] is None
                verified = r["stage1_output"]
            if s == "FM":  # direct mapping: no stage III
                assert r["stage3_key"] is None and r["text_model"] is None and r["emotion_cues"] == verified
            else:
                assert r["text_model"] == "text" and r["predicted_emotion"] == emotion
                assert r["emotion_cues"] == f"emotion cues of ({verified})"
            assert r["stage4_video"] == f"{s}/{clip}.mp4"
            assert r["stage4_audio"] == (f"audio/{clip}.wav" if s in WITH_AUDIO else None)
            coe_obj = json.loads(r["coe"])
            assert coe_obj == {"scene_understanding": f"scene of {s}/{clip}.mp4", "emotional_analysis": "analysis",
                               "predicted_emotion": emotion}
            assert r["scene_understanding"] == coe_obj["scene_understanding"]
            assert r["model"] == "omni" and r["media_mode"] == "video"
    # stage IV's prompt carries the verified cues, the emotion cues, the emotion and the blur level
    fsm4 = next(r for r in server.by_stage("stage4") if r.videos == ["FSM/c1.mp4"])
    assert rows[("c1", "FSM")]["stage2_output"] in fsm4.user_text
    assert rows[("c1", "FSM")]["emotion_cues"] in fsm4.user_text
    assert "**Anger**" in fsm4.system and "Level 3 (heavy)" in fsm4.system and "heavily blurred" in fsm4.system
    fdm4 = next(r for r in server.by_stage("stage4") if r.videos == ["FDM/c1.mp4"])
    assert "Level 2 (light)" in fdm4.system
    # tokens: 100 in, 10 out per request
    assert res.requests == 40 and (res.prompt_tokens, res.completion_tokens) == (4000, 400)
    assert sum(r["requests"] for r in res.rows) == 40


def test_concurrent_requests_share_identical_stage1_and_keep_the_limit(corpus: Path, server: FakeChatServer) -> None:
    overlapped = threading.Event()

    def slow(req: Request) -> Reply:
        # Past stage I (shared per clip: the samples wait on it), replies are held until a second
        # request is in flight, so the overlap does not depend on timing (a serial client fails
        # after 10 s, not by luck); then each takes a while.
        if server.in_flight >= 2:
            overlapped.set()
        if req.stage != "stage1" and not overlapped.wait(10):
            overlapped.set()
        time.sleep(0.02)
        return default_reply(req)

    server.script = slow
    res = run(corpus, server, concurrency=3)
    assert res.counts["ok"] == 14
    assert 1 < server.max_in_flight <= 3
    assert len(server.by_stage("stage1")) == 6  # 3 per clip, however many samples wait on them
    assert len({json.dumps(r.body, sort_keys=True) for r in server.requests}) == len(server.requests) == 40


@pytest.mark.parametrize("use_cache, concurrency", [(True, 1), (False, 1), (True, 3)])
def test_answered_requests_are_shared_within_their_clip_not_kept_for_the_run(
        corpus: Path, server: FakeChatServer, monkeypatch, use_cache: bool, concurrency: int) -> None:
    # a 40k-clip run must not hold every reply until it ends: what the caller keeps is the
    # requests of the clips under way (one at a time: one clip's 20), and nothing once the run ends
    from mime_fast.coe import runner

    callers: list = []
    kept: list[int] = []

    class Caller(runner.Caller):
        def __init__(self, *args, **kw) -> None:
            super().__init__(*args, **kw)
            callers.append(self)

        def ask(self, *args, **kw):
            try:
                return super().ask(*args, **kw)
            finally:
                kept.append(len(self._shared))

    monkeypatch.setattr(runner, "Caller", Caller)
    res = run(corpus, server, concurrency=concurrency, use_cache=use_cache)
    assert res.counts["ok"] == 14
    # still one request per distinct input within a clip, cache or not (stage I: 3 per clip)
    assert len(server.requests) == 40 and len(server.by_stage("stage1")) == 6
    assert res.requests == 40 and res.cached == 0 and sum(r["requests"] for r in res.rows) == 40
    assert len(kept) == 48 and callers[0]._shared == {}
    if concurrency == 1:
        assert max(kept) == 20


def test_stage3_mismatch_rejects_and_keeps_the_sample(corpus: Path, server: FakeChatServer) -> None:
    def mismatch(req: Request) -> Reply:
        if req.stage == "stage3" and "stage2_heavy on FSM/c1.mp4" in req.user_text:
            return Reply(content=json.dumps({"predicted_emotion": "happy", "emotion_cues": "smiling voice"}))
        return default_reply(req)

    server.script = mismatch
    res = run(corpus, server)
    rows = rows_by(res.rows)
    r = rows[("c1", "FSM")]
    assert r["status"] == "rejected" and r["predicted_emotion"] == "Happy"  # normalised, kept
    assert r["reason"] == "stage III predicted Happy, the ground truth is Anger"
    assert r["stage4_output"] is None and r["coe"] is None
    assert not [q for q in server.by_stage("stage4") if q.videos == ["FSM/c1.mp4"]]
    assert res.counts == {"ok": 13, "rejected": 1, "failed": 0}
    assert coe.summary_counts(res.all_rows)[("FSM", "Anger")] == {"ok": 0, "rejected": 1, "failed": 0}
    assert "FSM,Anger,0,1,0" in (corpus / coe.COE_SUMMARY).read_text().splitlines()
    table = coe.summary_table(res.all_rows)
    anger = next(line for line in table.splitlines() if line.startswith("Anger")).split()
    assert anger[1:] == ["1/0", "1/0", "0/1", "1/0", "1/0", "1/0", "1/0"]
    assert len(coe.read_coe(corpus)) == 14  # rejected rows are in the output


def test_invalid_json_is_retried_with_the_error_then_failed(corpus: Path, server: FakeChatServer) -> None:
    def invalid(req: Request) -> Reply:
        if req.stage == "stage4" and req.videos == ["FM/c1.mp4"] and not req.history:
            return Reply(content="The man is angry.")  # not JSON: asked again
        if req.stage == "stage4" and req.videos == ["FDM/c1.mp4"]:
            return Reply(content=json.dumps({"scene_understanding": "s", "emotional_analysis": "a",
                                             "predicted_emotion": "Sad"}))  # never the ground truth
        return default_reply(req)

    server.script = invalid
    res = run(corpus, server, schema_retries=1)
    rows = rows_by(res.rows)
    assert rows[("c1", "FM")]["status"] == "ok" and rows[("c1", "FM")]["stage4_attempts"] == 2
    retry = [q for q in server.by_stage("stage4") if q.videos == ["FM/c1.mp4"]]
    assert len(retry) == 2 and retry[1].history[0] == {"role": "assistant", "content": "The man is angry."}
    assert "not valid: the reply is not a JSON object" in retry[1].history[1]["content"]
    bad = rows[("c1", "FDM")]
    assert bad["status"] == "failed"
    assert bad["reason"].startswith("stage IV: invalid reply after 2 attempts: predicted_emotion: 'Anger' was expected")
    assert bad["stage4_output"] and bad["coe"] is None
    assert len([q for q in server.by_stage("stage4") if q.videos == ["FDM/c1.mp4"]]) == 2
    assert res.counts == {"ok": 13, "rejected": 0, "failed": 1}


# ----------------------------------------------------------------------------- cache and resume


def test_rerun_answers_everything_from_the_cache(corpus: Path, server: FakeChatServer) -> None:
    first = run(corpus, server)
    assert len(server.requests) == 40
    again = run(corpus, server, concurrency=4)
    assert len(server.requests) == 40 and again.requests == 0 and again.cached == 40
    volatile = {"run", "seconds", "stage1_s", "stage2_s", "stage3_s", "stage4_s", "requests", "cached_replies"}
    strip = lambda rows: [{k: v for k, v in r.items() if k not in volatile} for r in rows]  # noqa: E731
    assert strip(again.rows) == strip(first.rows)
    assert sum(r["cached_replies"] for r in again.rows) == sum(r["requests"] + r["cached_replies"] for r in first.rows)
    assert len(coe.read_coe(corpus)) == 14 and len((corpus / coe.COE_JSONL).read_text().splitlines()) == 14
    # an edited template is a new request (the template's hash is in the key); nothing else is
    templates = Path(shutil.copytree(Path(coe.__file__).with_name("prompts"), corpus.parent / "prompts"))
    (templates / "stage3_system.j2").write_text((templates / "stage3_system.j2").read_text() + "\n# Be brief.\n")
    run(corpus, server, templates=templates)
    assert [r.stage for r in server.requests[40:]] == ["stage3"] * 12


KILLED_RUN = """
import sys
from mime_fast.cli import main
sys.exit(main(sys.argv[1:]))
"""


def _coe_process(script: str, corpus: Path, server: FakeChatServer, *args: str) -> subprocess.Popen:
    """``mime-fast coe`` on ``corpus`` against ``server`` in a process of its own, run by
    ``script``; stderr piped."""
    env = dict(os.environ, PYTHONPATH=str(Path(mime_fast.__file__).parents[1]))
    return subprocess.Popen([sys.executable, "-c", script, "coe", str(corpus), "--endpoint", server.url,
                             "--model", "omni", "--text-model", "text", *args],
                            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def test_resume_after_kill_repeats_no_answered_request(corpus: Path, server: FakeChatServer) -> None:
    held = threading.Event()
    release = threading.Event()

    def hold_the_12th(req: Request) -> Reply:
        if req.n == 12:
            held.set()
            release.wait(30)
        return default_reply(req)

    server.script = hold_the_12th
    proc = _coe_process(KILLED_RUN, corpus, server, "--concurrency", "1")
    try:
        assert held.wait(60), proc.stderr.read().decode() if proc.poll() is not None else "no 12th request"
        os.kill(proc.pid, signal.SIGKILL)
        assert proc.wait(30) == -signal.SIGKILL
    finally:
        release.set()
        if proc.poll() is None:
            proc.kill()
        proc.stderr.close()
    answered = [json.dumps(r.body, sort_keys=True) for r in server.requests[:11]]
    partial = coe.read_coe(corpus)
    assert 0 < len(partial) < 14  # the samples finished before the kill
    server.script = default_reply
    res = run(corpus, server)
    again = [json.dumps(r.body, sort_keys=True) for r in server.requests[12:]]
    assert len(again) == 40 - 11 and not set(again) & set(answered)
    assert res.counts["ok"] == 14 and res.cached == 11
    assert len(coe.read_coe(corpus)) == 14 and len((corpus / coe.COE_JSONL).read_text().splitlines()) == 14


INTERRUPTED_RUN = """
import signal, sys
signal.signal(signal.SIGINT, signal.default_int_handler)  # Ctrl-C, even where SIGINT came in ignored
from mime_fast.cli import main
sys.exit(main(sys.argv[1:]))
"""


@pytest.mark.slow
def test_ctrl_c_sends_no_new_request_exits_130_at_once_and_a_rerun_resumes(corpus: Path,
                                                                          server: FakeChatServer) -> None:
    # FM and VMM share no request: with two chains at a time, clip c1's end, then both of c2's are
    # held in their first request
    both_held = threading.Event()
    release = threading.Event()
    held = []

    def hold_c2(req: Request) -> Reply:
        if "/c2.mp4" in " ".join(req.videos) + req.user_text:
            held.append(req.n)
            if len(held) == 2:
                both_held.set()
            release.wait(120)
        return default_reply(req)

    server.script = hold_c2
    proc = _coe_process(INTERRUPTED_RUN, corpus, server, "--subsets", "FM,VMM", "--concurrency", "2",
                        "--backoff", "0.001")
    try:
        assert both_held.wait(60), proc.stderr.read().decode() if proc.poll() is not None else "not held"
        sent = len(server.requests)  # both chains wait on a reply: nothing else can be sent now
        os.kill(proc.pid, signal.SIGINT)
        # the held requests are abandoned: the run ends while they are still unanswered
        assert proc.wait(60) == 130
        err = proc.stderr.read().decode()
    finally:
        release.set()
        if proc.poll() is None:
            proc.kill()
        proc.stderr.close()
    assert err.strip().splitlines()[-1] == "interrupted, rerun to resume" and "Traceback" not in err
    assert len(server.requests) == sent == 7  # no request after Ctrl-C
    # what ended before Ctrl-C is kept, nothing half-done is written
    assert [(r["clip_id"], r["subset"], r["status"]) for r in coe.read_coe(corpus)] == [("c1", "FM", "ok"),
                                                                                       ("c1", "VMM", "ok")]
    assert pd_rows(corpus / coe.COE_PARQUET) == 2
    answered = {json.dumps(r.body, sort_keys=True) for r in server.requests if r.n not in held}
    server.script = default_reply
    res = run(corpus, server)
    again = {json.dumps(r.body, sort_keys=True) for r in server.requests[sent:]}
    assert res.counts["ok"] == 14 and res.cached == 5 and not again & answered


def test_a_cache_that_cannot_be_written_stops_before_any_request(corpus: Path, server: FakeChatServer,
                                                                 capsys) -> None:
    # a file where the folder should be (a read-only folder is the same error for root)
    cache = corpus / "manifest.jsonl" / "cache"
    code = main(["coe", str(corpus), "--endpoint", server.url, "--model", "omni", "--cache", str(cache), "-q"])
    err = capsys.readouterr().err.strip()
    assert code == 1 and len(err.splitlines()) == 1 and "Traceback" not in err
    assert err.startswith(f"mime-fast coe: error: the reply cache {cache} cannot be written")
    assert server.requests == [] and not (corpus / "coe.jsonl").exists()


def test_a_cache_write_failing_mid_run_stops_the_run_instead_of_failing_every_sample(
        corpus: Path, server: FakeChatServer, monkeypatch, capsys) -> None:
    put = ReplyCache.put
    calls = []

    def disk_full_from_the_3rd(self, key: str, entry: dict) -> None:
        calls.append(key)
        if len(calls) >= 3:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(self.root / key[:2]))
        put(self, key, entry)

    monkeypatch.setattr(ReplyCache, "put", disk_full_from_the_3rd)
    code = main(["coe", str(corpus), "--endpoint", server.url, "--model", "omni", "--concurrency", "1", "-q"])
    err = capsys.readouterr().err.strip()
    assert code == 1 and len(err.splitlines()) == 1 and "Traceback" not in err
    assert "the reply cache cannot be written" in err and "No space left on device" in err
    assert len(server.requests) == 3  # not one request (and its retries) per sample left
    rows = coe.read_coe(corpus)  # c1 FM, ended before; no failed rows
    assert [(r["clip_id"], r["subset"], r["status"]) for r in rows] == [("c1", "FM", "ok")]


# ---------------------------------------------------------------------------------------- retries


def test_429_and_5xx_are_retried_with_backoff(corpus: Path, server: FakeChatServer) -> None:
    errors = {1: Reply(429, body={"error": {"message": "rate limited"}}, headers={"retry-after": "0"}),
              2: Reply(500), 3: Reply(503), 6: Reply(502)}

    def flaky(req: Request) -> Reply:
        if req.n in errors:
            return errors[req.n]
        if req.stage == "stage1" and req.videos == ["VMM/c2.mp4"]:
            return Reply(500)  # always: retries run out
        if req.stage == "stage3" and "FDM/c2.mp4" in req.user_text:
            return Reply(400, body={"error": {"message": "bad request"}})  # not retried
        return default_reply(req)

    server.script = flaky
    res = run(corpus, server, retries=3)
    rows = rows_by(res.rows)
    assert rows[("c1", "FM")]["status"] == "ok" and rows[("c1", "FM")]["requests"] == 5  # I: 4 tries, IV: 1
    vmm = rows[("c2", "VMM")]
    assert vmm["status"] == "failed" and vmm["reason"].startswith("stage I: HTTP 500: InternalServerError")
    assert len([r for r in server.requests if r.videos == ["VMM/c2.mp4"]]) == 4  # 1 + 3 retries
    fdm = rows[("c2", "FDM")]
    assert fdm["status"] == "failed" and fdm["reason"].startswith("stage III: HTTP 400: BadRequestError")
    assert len([r for r in server.by_stage("stage3") if "FDM/c2.mp4" in r.user_text]) == 1
    assert res.counts == {"ok": 12, "rejected": 0, "failed": 2}
    assert res.requests == len(server.requests) == sum(r["requests"] for r in res.rows) == 44


def test_an_endpoint_that_cannot_be_reached_stops_the_run_at_once(corpus: Path, capsys) -> None:
    with socket.socket() as sock:  # a port nothing listens on: connections refused
        sock.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{sock.getsockname()[1]}/v1"
    code = main(["coe", str(corpus), "--endpoint", url, "--model", "omni", "--backoff", "0.001", "-q"])
    err = capsys.readouterr().err.strip()
    assert code == 1 and len(err.splitlines()) == 1 and "Traceback" not in err
    assert err.startswith(f"mime-fast coe: error: the endpoint {url} cannot be reached (")
    assert "Connection refused" in err and "has answered no request" in err
    # no sample is marked failed, no empty output is written
    assert not [p for p in corpus.iterdir() if p.name.startswith("coe") and p.name != "coe_cache"]


def test_once_the_endpoint_has_answered_a_lost_connection_fails_samples_not_the_run(
        corpus: Path, server: FakeChatServer) -> None:
    def gone_after_the_2nd(req: Request) -> Reply:
        if req.n == 2:  # answered; every later connection is refused
            server.httpd.shutdown()
            server.httpd.server_close()
        return default_reply(req)

    server.script = gone_after_the_2nd
    res = run(corpus, server, subsets=["FM", "VMM"], retries=1)
    rows = rows_by(res.rows)
    assert rows[("c1", "FM")]["status"] == "ok" and len(server.requests) == 2
    failed = [r for r in res.rows if r["status"] == "failed"]
    assert len(failed) == 3 and all("APIConnectionError" in r["reason"] for r in failed)
    assert res.requests == 2 + 3 * 2  # each failed sample's request tried twice (1 retry)


# -------------------------------------------------------------------------------------- the API key


def test_the_api_key_is_sent_and_never_written(corpus: Path, server: FakeChatServer, monkeypatch, capsys) -> None:
    secret = "sk-mime-test-6f1d2c9a8b7e"
    monkeypatch.setenv("MIME_TEST_COE_KEY", secret)

    def echo(req: Request) -> Reply:
        if req.stage == "stage3" and "FSAM/c1.mp4" in req.user_text:  # servers quote keys in errors
            return Reply(401, body={"error": {"message": f"Incorrect API key provided: {secret}"}})
        return default_reply(req)

    server.script = echo
    code = main(["coe", str(corpus), "--endpoint", server.url, "--model", "omni", "--api-key-env", "MIME_TEST_COE_KEY",
                 "--backoff", "0.001", "--verbose"])
    printed = capsys.readouterr()
    assert code == 1  # the 401 sample failed
    assert all(r.headers["authorization"] == f"Bearer {secret}" for r in server.requests)
    assert secret not in printed.out + printed.err
    assert "failed c1 FSAM: stage III: HTTP 401" in printed.out
    files = [p for p in corpus.rglob("*") if p.is_file()]
    assert any(p.name.endswith(".json") for p in files)  # the cache is searched too
    assert not [p for p in files if secret.encode() in p.read_bytes()]
    assert "Incorrect API key provided: ***" in (corpus / "coe.jsonl").read_text()


@pytest.mark.parametrize("key", ["none", "FM", "Anger"])
def test_a_short_api_key_changes_no_output(corpus: Path, server: FakeChatServer, key: str) -> None:
    # a placeholder key ("none", a subset code, a word of the replies) is no secret: it was replaced
    # in every field, model replies and blur levels included (and "FM" broke the sort of the rows)
    res = run(corpus, server, api_key=key, subsets=["FM", "FDM", "VMM"])
    assert res.counts == {"ok": 6, "rejected": 0, "failed": 0}
    assert "***" not in (corpus / "coe.jsonl").read_text()
    rows = rows_by(res.rows)
    assert rows[("c1", "VMM")]["blur_level"] == "none" and rows[("c1", "FM")]["subset"] == "FM"
    assert rows[("c1", "FM")]["label"] == "Anger" and '"predicted_emotion": "Anger"' in rows[("c1", "FM")]["coe"]


# ----------------------------------------------------------------------------------------- media


def test_frames_mode_sends_jpeg_frames_and_audio_only_where_the_subset_has_it(corpus: Path,
                                                                             server: FakeChatServer) -> None:
    cv2 = pytest.importorskip("cv2")
    import numpy as np

    res = run(corpus, server, media="frames", frames=3, frame_size=64, subsets=["FM", "FSAM", "VMM"])
    assert res.counts["ok"] == 6
    with_audio = []
    for r in server.requests:
        if r.stage == "stage3":
            assert isinstance(r.body["messages"][1]["content"], str)
            continue
        parts = [p["type"] for p in r.body["messages"][1]["content"]]
        assert "video_url" not in parts and parts[:3] == ["image_url"] * 3 and parts[-1] == "text"
        for img in r.images:  # JPEG frames, longest side frame_size
            frame = cv2.imdecode(np.frombuffer(img, np.uint8), cv2.IMREAD_COLOR)
            assert img[:2] == b"\xff\xd8" and frame is not None and max(frame.shape[:2]) == 64
        assert parts.count("input_audio") == len(r.audios) <= 1
        with_audio.append((r.stage, bool(r.audios)))
    # per clip: FM's stage I and IV and VMM's with audio; FSAM's stage I (on AMM), II and IV without
    assert sorted(with_audio) == sorted([("stage1", True), ("stage4", True)] * 4
                                        + [("stage1", False), ("stage2_heavy", False), ("stage4", False)] * 2)
    # the audio sent is the clip's 16 kHz wav, byte for byte (the server names it by its hash)
    assert {a for r in server.requests for a in r.audios} == {"audio/c1.wav", "audio/c2.wav"}
    assert all(r["media_mode"] == "frames" for r in res.rows)
    fsam = rows_by(res.rows)[("c1", "FSAM")]
    assert fsam["stage1_video"] == "AMM/c1.mp4" and fsam["stage1_audio"] is None and fsam["stage4_audio"] is None


def test_video_mode_by_url_names_the_corpus_paths(corpus: Path, server: FakeChatServer) -> None:
    run(corpus, server, subsets=["FDAM", "FDM"], clips=["c2"], media_base_url="file:///data/mime/")
    urls = {(r.stage, tuple(r.videos), tuple(r.audios)) for r in server.requests if r.videos}
    assert urls == {
        ("stage1", ("file:///data/mime/AMM/c2.mp4",), ()),
        ("stage1", ("file:///data/mime/FM/c2.mp4",), ("file:///data/mime/audio/c2.wav",)),
        ("stage2_light", ("file:///data/mime/FDAM/c2.mp4",), ()),
        ("stage2_light", ("file:///data/mime/FDM/c2.mp4",), ("file:///data/mime/audio/c2.wav",)),
        ("stage4", ("file:///data/mime/FDAM/c2.mp4",), ()),
        ("stage4", ("file:///data/mime/FDM/c2.mp4",), ("file:///data/mime/audio/c2.wav",)),
    }


# --------------------------------------------------------------------------------- CLI and outputs


def test_dry_run_prints_the_requests_of_one_clip_and_sends_nothing(corpus: Path, server: FakeChatServer,
                                                                   capsys) -> None:
    assert main(["coe", str(corpus), "--endpoint", server.url, "--model", "omni", "--dry-run"]) == 0
    requests = json.loads(capsys.readouterr().out)
    assert server.requests == [] and not (corpus / "coe.jsonl").exists() and not (corpus / "coe_cache").exists()
    assert len(requests) == 20 and {r["clip_id"] for r in requests} == {"c1"}
    assert [r["stage"] for r in requests if r["subset"] == "FSM"] == ["stage2_heavy", "stage3", "stage4"]
    video = requests[0]["messages"][1]["content"][0]["video_url"]["url"]
    assert video.startswith("data:video/mp4;base64,<") and video.endswith(" bytes>")  # elided


def unlabel(corpus: Path, clips: set[str]) -> None:
    """The manifest of ``corpus`` without the emotion labels of ``clips`` (a folder build's)."""
    path = corpus / "manifest.jsonl"
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    path.write_text("".join(json.dumps(dict(r, label=None) if r["clip_id"] in clips else r) + "\n" for r in rows))


def test_dry_run_shows_the_first_clip_that_can_be_requested_and_says_why_others_cannot(
        corpus: Path, capsys) -> None:
    unlabel(corpus, {"c1"})
    (corpus / "FM" / "c2.mp4").unlink()
    base = ["coe", str(corpus), "--endpoint", "http://127.0.0.1:9/v1", "--model", "omni", "--dry-run"]
    assert main(base) == 0
    out = capsys.readouterr()
    requests = json.loads(out.out)
    assert requests and {r["clip_id"] for r in requests} == {"c2"}
    assert {r["subset"] for r in requests} == {"VMM", "FDAM", "FSAM", "AMM"}  # FM, FDM, FSM read FM/c2.mp4
    err = out.err.strip().splitlines()
    assert err[0].startswith("coe: dry run: 1 clip(s) before c2 skipped: no request can be made for their 7 samples "
                             "(first: c1 FM: stage I: no ground-truth emotion for clip c1")
    assert err[1:] == [f"coe: dry run: c2 {s} would fail: stage I: FM/c2.mp4 is missing from the corpus folder"
                       for s in ("FM", "FDM", "FSM")]
    assert not [p for p in corpus.iterdir() if p.name.startswith("coe")]


def test_dry_run_with_nothing_to_request_says_why_and_exits_1(corpus: Path, capsys) -> None:
    unlabel(corpus, {"c1", "c2"})  # an unlabelled corpus (a folder build)
    base = ["coe", str(corpus), "--endpoint", "http://127.0.0.1:9/v1", "--model", "omni", "--dry-run"]
    assert main(base) == 1
    out = capsys.readouterr()
    err = out.err.strip()
    assert out.out == "" and len(err.splitlines()) == 1
    assert err.startswith("mime-fast coe: error: dry run: no request can be made: all 14 samples of 2 clip(s) fail "
                          "before one (first: c1 FM: stage I: no ground-truth emotion for clip c1")


def test_outputs_load_with_pandas_and_datasets(corpus: Path, server: FakeChatServer, tmp_path: Path,
                                               monkeypatch) -> None:
    pd = pytest.importorskip("pandas")
    run(corpus, server)
    a = pd.read_json(corpus / "coe.jsonl", lines=True)
    b = pd.read_parquet(corpus / "coe.parquet")
    assert list(a.columns) == list(b.columns) == list(COLUMNS) and len(a) == len(b) == 14
    assert set(b["status"]) == {"ok"} and b["prompt_tokens"].dtype.kind == "i"
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    datasets = pytest.importorskip("datasets")
    cache = str(tmp_path / "hf")
    d = datasets.load_dataset("parquet", data_files=str(corpus / "coe.parquet"), split="train", cache_dir=cache)
    j = datasets.load_dataset("json", data_files=str(corpus / "coe.jsonl"), split="train", cache_dir=cache)
    assert len(d) == len(j) == 14 and d.column_names == list(COLUMNS)


@pytest.mark.parametrize(("args", "needle"), [
    (["--subsets", "FM,XX"], "--subsets: unknown subset(s) XX"),
    (["--endpoint", "localhost:8000"], "expected an http(s):// URL"),
    (["--concurrency", "0"], "--concurrency must be >= 1"),
    (["--extra-body", "{"], "--extra-body: not JSON"),
    (["--media", "gif"], "invalid choice: 'gif'"),
    (["--endpoint", "http://"], "expected an http(s):// URL with a host"),
    (["--endpoint", "http://:8000/v1"], "expected an http(s):// URL with a host"),
    (["--endpoint", "http://localhost:port/v1"], "(and a valid port)"),
    (["--media", "frames", "--frame-size", "10"], "--frame-size must be >= 16"),
    (["--timeout", "0"], "--timeout must be > 0"),
    (["--timeout", "-5"], "--timeout must be > 0"),
    (["--timeout", "nan"], "--timeout must be > 0"),
    (["--max-tokens", "-5"], "--max-tokens must be >= 1"),
    (["--max-tokens", "0"], "--max-tokens must be >= 1"),
])
def test_cli_usage_errors(corpus: Path, capsys, args: list[str], needle: str) -> None:
    base = ["coe", str(corpus), "--endpoint", "http://127.0.0.1:9/v1", "--model", "m"]
    assert main(base + args) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("mime-fast coe: error:") and needle in err and len(err.splitlines()) == 1


def test_unknown_clip_ids_are_rejected_before_anything_is_written(corpus: Path, capsys) -> None:
    before = sorted(p.name for p in corpus.iterdir())
    base = ["coe", str(corpus), "--endpoint", "http://127.0.0.1:9/v1", "--model", "m"]
    assert main(base + ["--clips", "c1,nosuch,other"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("mime-fast coe: error: --clips: unknown clip id(s) nosuch, other") and len(err.splitlines()) == 1
    assert sorted(p.name for p in corpus.iterdir()) == before  # no coe.jsonl, parquet, summary or cache
    with pytest.raises(ValueError, match="unknown clip id"):
        coe.run(corpus, ClientOptions("http://127.0.0.1:9/v1", "m"), clips=["nosuch"], progress=None)
    assert sorted(p.name for p in corpus.iterdir()) == before


def test_cli_without_a_manifest_is_a_usage_error(tmp_path: Path, capsys) -> None:
    assert main(["coe", str(tmp_path), "--endpoint", "http://127.0.0.1:9/v1", "--model", "m"]) == 2
    assert "no manifest.jsonl in" in capsys.readouterr().err


# ------------------------------------------------------------------------------------ real endpoint


def test_one_clip_against_a_real_endpoint(built: Path, tmp_path: Path) -> None:
    endpoint = os.environ.get("MIME_FAST_COE_ENDPOINT")
    if not endpoint:
        pytest.skip("MIME_FAST_COE_ENDPOINT is not set (an OpenAI-compatible base URL, with MIME_FAST_COE_MODEL "
                    "and the key in OPENAI_API_KEY): no real endpoint to run one clip against")
    model = os.environ.get("MIME_FAST_COE_MODEL", "Qwen/Qwen3-Omni-30B-A3B-Instruct")
    corpus = Path(shutil.copytree(built, tmp_path / "corpus"))
    res = coe.run(corpus, ClientOptions(endpoint, model), text_model=os.environ.get("MIME_FAST_COE_TEXT_MODEL"),
                  limit=1, media=os.environ.get("MIME_FAST_COE_MEDIA", "video"), progress=None)
    assert len(res.rows) == 7
    for r in res.rows:
        assert r["status"] in ("ok", "rejected") or "invalid reply" in r["reason"], r["reason"]
        assert r["stage1_output"]
