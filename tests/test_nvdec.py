"""NVDEC decoding for ``device="cuda"`` (:mod:`mime_fast.media.nvdec`): the NV12 split on the CPU; the
pipeline's NVDEC path with a CPU fake of the decoder and of the device step (the same logic, no
GPU); and, on a GPU machine (``cuda`` marker; ``nvdec`` tests also need PyNvVideoCodec), the
decoder against PyAV and the outputs against the CPU path, byte for byte."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

import mime_fast
from conftest import assert_images_equal
from mime_fast import ops
from mime_fast.frames import yuv420_planes
from mime_fast.media import iter_display_frames, nvdec, probe
from mime_fast.samples import make_clip
from video_fixtures import sha256

SUBSETS = ["FM", "FDM", "FSM", "VMM", "FDAM", "FSAM", "AMM"]


def _nv12(planes) -> np.ndarray:
    y, u, v = planes
    h, w = y.shape
    buf = np.zeros((h + u.shape[0], w), np.uint8)
    buf[:h] = y
    buf[h:, 0::2] = u
    buf[h:, 1::2] = v
    return buf


def test_nv12_split_is_the_interleaved_chroma(rng: np.random.Generator) -> None:
    for ch, cw in [(1, 1), (3, 5), (60, 80), (61, 97)]:
        uv = rng.integers(0, 256, (ch, 2 * cw), dtype=np.uint8)
        u, v = np.empty((ch, cw), np.uint8), np.empty((ch, cw), np.uint8)
        ops.nv12_split(uv, u, v)
        assert np.array_equal(u, uv[:, 0::2]) and np.array_equal(v, uv[:, 1::2])
    with pytest.raises(ValueError, match="plane"):
        ops.nv12_split(np.zeros((4, 8), np.uint8), np.zeros((4, 3), np.uint8), np.zeros((4, 4), np.uint8))
    with pytest.raises(ValueError, match="NV12"):
        ops.nv12_split(np.zeros((4, 7), np.uint8), np.zeros((4, 3), np.uint8), np.zeros((4, 3), np.uint8))


def test_nvdec_reason_names_what_it_cannot_take(tmp_path: Path) -> None:
    ok = probe(make_clip(tmp_path / "ok.mp4", duration=0.4, size=(320, 240), audio=False).path)
    rotated = probe(make_clip(tmp_path / "rot.mp4", duration=0.4, size=(320, 240), audio=False, rotation=90).path)
    mpeg4 = probe(make_clip(tmp_path / "m4.mp4", duration=0.4, size=(320, 240), audio=False, codec="mpeg4").path)
    assert "converting" in nvdec.nvdec_reason(rotated)
    assert "mpeg4" in nvdec.nvdec_reason(mpeg4)
    reason = nvdec.nvdec_reason(ok)
    assert reason == nvdec.nvdec_available()  # only the machine can stop NVDEC for this one
    if importlib.util.find_spec("PyNvVideoCodec") is None:
        assert "PyNvVideoCodec" in reason


def test_an_installed_pynvvideocodec_that_cannot_load_is_the_reason(tmp_path: Path, monkeypatch) -> None:
    # (a wheel unpacked without its bundled CUDA runtime, a machine without the driver's libcuda):
    # PyAV decodes, and the reason says why, instead of every clip failing at the import
    pkg = tmp_path / "site" / "PyNvVideoCodec"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("raise ImportError('libcudart-c64a25f3.so.12.3.101: cannot open shared "
                                     "object file: No such file or directory\\n\\nA long troubleshooting text.')\n")
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    monkeypatch.delitem(__import__("sys").modules, "PyNvVideoCodec", raising=False)
    nvdec._nvcodec_import_error.cache_clear()
    try:
        reason = nvdec.nvdec_available()
        assert reason == ("PyNvVideoCodec is installed but cannot load: ImportError: libcudart-c64a25f3.so.12.3.101: "
                          "cannot open shared object file: No such file or directory")
        ok = probe(make_clip(tmp_path / "ok.mp4", duration=0.4, size=(320, 240), audio=False).path)
        assert nvdec.nvdec_reason(ok) == reason
    finally:
        nvdec._nvcodec_import_error.cache_clear()


def test_the_cpu_path_never_asks_about_nvdec(tmp_path: Path, monkeypatch) -> None:
    # (asking may import PyNvVideoCodec, which loads NVIDIA's libraries: not for a CPU build)
    from mime_fast import subsets

    def asked(info):
        raise AssertionError("the CPU path asked whether NVDEC decodes the clip")

    monkeypatch.setattr(subsets, "nvdec_reason", asked)
    clip = make_clip(tmp_path / "c.mp4", duration=0.3, fps=30, size=(320, 240))
    lm = np.load(clip.path.with_suffix(".npz"))["landmarks"]
    r = mime_fast.build_subsets(clip.path, tmp_path / "out", landmarks=lm, subsets=["FDM"], min_height=0,
                                min_duration=0)
    assert (r.decoder, r.decoder_reason) == ("pyav", "")


# ---- the NVDEC path of the pipeline with CPU stand-ins for the decoder and the device step


class _HostNv12:
    """An NV12 frame in host memory, shaped like :class:`mime_fast.media.Nv12Frame`."""

    def __init__(self, planes):
        self.buf = _nv12(planes)
        self.height, self.width = planes[0].shape

    def planes(self):
        h = self.height
        u = np.empty((self.buf.shape[0] - h, self.buf.shape[1] // 2), np.uint8)
        v = np.empty_like(u)
        ops.nv12_split(self.buf[h:], u, v)
        return self.buf[:h], u, v


def _fake_nvdec(monkeypatch, calls: list) -> None:
    """NVDEC replaced by PyAV frames re-laid as NV12, the device step by the CPU one on the planes
    split back from NV12: what the pipeline does with NVDEC's frames, run here."""
    import av

    from mime_fast import subsets

    def host_copy(dev, color):  # frames.nv12_host_frame: the host copy, from the NV12
        vf = av.VideoFrame(dev.width, dev.height, "yuv420p")
        for dst, src in zip(yuv420_planes(vf), dev.planes()):
            np.copyto(dst, src)
        vf.colorspace, vf.color_range, vf.color_primaries, vf.color_trc = color
        return vf

    def frames(path, info, *, rgb=False, gpu=0, demuxer=None):
        assert demuxer == ("demuxer of", path)
        for n, t, img, frame in iter_display_frames(path, info, rgb=rgb, keep_yuv=True):
            assert frame is not None  # NVDEC is chosen only for clips whose frames pass through
            dev = _HostNv12([np.array(p) for p in yuv420_planes(frame)])
            yield n, t, img, nvdec.NvdecFrame(host_copy(dev, info.facts.color), dev)

    cpu_step = ops.blur_hull_yuv420

    def blur_hull_nv12(frame, points, outs, ksizes, **kw):
        calls.append(frame)
        return cpu_step(frame.planes(), points, outs, ksizes, **kw)

    def blur_hull_yuv420(planes, points, outs, ksizes, *, device="cpu", **kw):  # the same arithmetic
        return cpu_step(planes, points, outs, ksizes, **kw)

    monkeypatch.setattr(subsets, "iter_nvdec_frames", frames)
    monkeypatch.setattr(subsets, "open_nvdec_demuxer", lambda path, info: (("demuxer of", path), None))
    monkeypatch.setattr(nvdec, "nv12_host_frame", host_copy)
    monkeypatch.setattr(ops, "blur_hull_yuv420", blur_hull_yuv420)
    monkeypatch.setattr(subsets, "nvdec_reason", lambda info: None if info.yuv_passthrough else "converting")
    monkeypatch.setattr(ops, "blur_hull_nv12", blur_hull_nv12)


def test_pipeline_nvdec_path_gives_the_cpu_bytes(tmp_path: Path, monkeypatch) -> None:
    clip = make_clip(tmp_path / "c.mp4", duration=1.0, fps=30, size=(640, 480), bframes=2)
    lm = np.load(clip.path.with_suffix(".npz"))["landmarks"]
    ref = mime_fast.build_subsets(clip.path, tmp_path / "cpu", landmarks=lm, subsets=SUBSETS, min_height=0)
    assert ref.decoder == "pyav" and ref.decoder_reason == ""
    calls: list = []
    _fake_nvdec(monkeypatch, calls)
    # the CUDA device itself is not needed by the faked path: only Settings asks for it
    monkeypatch.setattr(mime_fast, "cuda_available", lambda: True)
    got = mime_fast.build_subsets(clip.path, tmp_path / "gpu", landmarks=lm, subsets=SUBSETS, min_height=0,
                                  device="cuda")
    assert got.decoder == "nvdec" and calls  # the face frames were made from the device frames
    for c in SUBSETS:
        assert sha256(got.outputs[c]) == sha256(ref.outputs[c]), c
    off = mime_fast.build_subsets(clip.path, tmp_path / "off", landmarks=lm, subsets=["FDM"], min_height=0,
                                  device="cuda", nvdec=False)
    assert off.decoder == "pyav" and off.decoder_reason == "nvdec is off"
    assert sha256(off.outputs["FDM"]) == sha256(ref.outputs["FDM"])


def test_pipeline_nvdec_decodes_a_detected_clip_once(tmp_path: Path, monkeypatch) -> None:
    """With automatic detection (two passes over the frames) NVDEC decodes the clip once: the first
    pass keeps its device frames for the face pass (keep_frames_mb), their host copies made again
    from them; the outputs are the CPU path's bytes, and those of a build that decodes twice."""
    from mime_fast import subsets

    clip = make_clip(tmp_path / "c.mp4", duration=1.0, fps=30, size=(640, 480), bframes=2)
    ref = mime_fast.build_subsets(clip.path, tmp_path / "cpu", subsets=SUBSETS, min_height=0)
    assert ref.decoder == "pyav" and ref.decodes == 1 and ref.tracking.detected > 0
    calls: list = []
    _fake_nvdec(monkeypatch, calls)
    decodes: list = []
    fake = subsets.iter_nvdec_frames

    def counted(*a, **k):
        decodes.append(k.get("rgb"))
        return fake(*a, **k)

    monkeypatch.setattr(subsets, "iter_nvdec_frames", counted)
    monkeypatch.setattr(mime_fast, "cuda_available", lambda: True)
    remade: list = []
    host_copy = nvdec.nv12_host_frame
    monkeypatch.setattr(nvdec, "nv12_host_frame", lambda dev, color: remade.append(color) or host_copy(dev, color))
    got = mime_fast.build_subsets(clip.path, tmp_path / "gpu", subsets=SUBSETS, min_height=0, device="cuda")
    assert got.decoder == "nvdec" and got.decodes == 1 and decodes == [True]
    assert len(calls) == got.source_frames  # the face step read the kept device frames
    assert len(remade) == got.source_frames  # their host copies made again, tagged as decoded
    assert set(remade) == {probe(clip.path).facts.color}
    assert got.tracking == ref.tracking
    twice = mime_fast.build_subsets(clip.path, tmp_path / "twice", subsets=SUBSETS, min_height=0, device="cuda",
                                    keep_frames_mb=0)
    assert twice.decoder == "nvdec" and twice.decodes == 2 and decodes == [True, True, False]
    for c in SUBSETS:
        assert sha256(got.outputs[c]) == sha256(ref.outputs[c]) == sha256(twice.outputs[c]), c


def test_pipeline_feeds_a_gpu_stack_the_frames_on_the_device(tmp_path: Path, monkeypatch) -> None:
    """With NVDEC and a stack that reads frames on the GPU (the torch stack on CUDA), the subject
    detection gets each frame's RGB made and kept on the device (DeviceFrame.of_nv12), never a
    whole frame on the host, and the outputs are the bytes of the host-RGB path.  Here the torch
    stack runs on the CPU, NVDEC and the device RGB are faked from the same planes."""
    torch = pytest.importorskip("torch")
    from mime_fast.detect.torch_models import load_torch_stack
    from mime_fast.subject import detection
    from mime_fast.detect.torch_ops import DeviceFrame

    clip = make_clip(tmp_path / "c.mp4", duration=1.0, fps=30, size=(640, 480), bframes=2)
    st = load_torch_stack("cpu")
    assert st.device_frames is False  # on the CPU: host frames
    monkeypatch.setattr(detection, "default_stack", lambda device="cpu": st)
    ref = mime_fast.build_subsets(clip.path, tmp_path / "cpu", subsets=SUBSETS, min_height=0)
    assert ref.decoder == "pyav" and ref.tracking.detected > 0
    calls: list = []
    _fake_nvdec(monkeypatch, calls)
    monkeypatch.setattr(mime_fast, "cuda_available", lambda: True)
    made: list = []

    def of_nv12(cls, frame, matrix="bt601"):
        made.append(matrix)
        return cls(torch.from_numpy(ops.yuv420_to_rgb(*frame.planes(), matrix=matrix)))

    def whole_frame_download(self, dtype=None, copy=None):
        raise AssertionError("a whole device frame was copied to the host")

    monkeypatch.setattr(DeviceFrame, "of_nv12", classmethod(of_nv12))
    monkeypatch.setattr(DeviceFrame, "__array__", whole_frame_download)
    st.device_frames = True
    got = mime_fast.build_subsets(clip.path, tmp_path / "gpu", subsets=SUBSETS, min_height=0, device="cuda")
    assert got.decoder == "nvdec" and calls and len(made) == got.source_frames
    assert got.tracking == ref.tracking
    for c in SUBSETS:
        assert sha256(got.outputs[c]) == sha256(ref.outputs[c]), c
    made.clear()  # device_frames=False: host RGB for the same stack, the same bytes
    off = mime_fast.build_subsets(clip.path, tmp_path / "off", subsets=["FDM"], min_height=0, device="cuda",
                                  device_frames=False)
    assert off.decoder == "nvdec" and not made
    assert sha256(off.outputs["FDM"]) == sha256(ref.outputs["FDM"])


def test_pipeline_falls_back_to_pyav_with_the_reason(tmp_path: Path, monkeypatch) -> None:
    clip = make_clip(tmp_path / "r.mp4", duration=0.6, fps=30, size=(320, 480), rotation=90)
    lm = np.load(clip.path.with_suffix(".npz"))["landmarks"]
    calls: list = []
    _fake_nvdec(monkeypatch, calls)
    monkeypatch.setattr(mime_fast, "cuda_available", lambda: True)
    monkeypatch.setattr(ops, "blur_hull_yuv420", lambda *a, **k: pytest.fail("rotated frames are converted"))
    from mime_fast import face_step

    monkeypatch.setattr(face_step, "blur_region", lambda *a, **k: None)  # no CUDA here: no blur
    got = mime_fast.build_subsets(clip.path, tmp_path / "o", landmarks=lm, subsets=["FDM"], min_height=0,
                                  device="cuda")
    assert got.decoder == "pyav" and got.decoder_reason == "converting" and not calls


def test_a_file_nvdecs_demuxer_reads_otherwise_is_decoded_by_pyav(tmp_path: Path, monkeypatch) -> None:
    """PyNvVideoCodec demuxes with an FFmpeg of its own: where it cannot open the file, or reads
    another video stream than the probe chose, the clip is decoded by PyAV with the reason recorded
    (the same bytes), not failed.  PyNvVideoCodec faked; the stream check is the real one."""
    import sys
    import types

    clip = make_clip(tmp_path / "c.mp4", duration=0.6, fps=30, size=(320, 240))
    lm = np.load(clip.path.with_suffix(".npz"))["landmarks"]
    info = probe(clip.path)
    ref = mime_fast.build_subsets(clip.path, tmp_path / "cpu", landmarks=lm, subsets=["FDM"], min_height=0)
    _fake_nvdec(monkeypatch, [])
    from mime_fast import subsets

    monkeypatch.setattr(subsets, "open_nvdec_demuxer", nvdec.open_nvdec_demuxer)  # the real one, on a fake
    monkeypatch.setattr(mime_fast, "cuda_available", lambda: True)
    opened: list = []

    def demuxer(stream):
        class Demuxer:
            def __init__(self, filename):
                opened.append(filename)
                if stream is None:
                    raise RuntimeError("Failed to open input\nsecond line")

            def GetVideoStreamId(self):
                return stream

        return Demuxer

    for stream, reason in ((info.stream_index + 1, f"NVDEC's demuxer reads video stream {info.stream_index + 1}, "
                                                   f"not stream {info.stream_index}"),
                           (None, "NVDEC's demuxer cannot open it: Failed to open input")):
        monkeypatch.setitem(sys.modules, "PyNvVideoCodec", types.SimpleNamespace(CreateDemuxer=demuxer(stream)))
        got = mime_fast.build_subsets(clip.path, tmp_path / f"o{stream}", landmarks=lm, subsets=["FDM"],
                                      min_height=0, device="cuda")
        assert (got.decoder, got.decoder_reason) == ("pyav", reason)
        assert opened[-1] == str(clip.path.resolve())
        assert sha256(got.outputs["FDM"]) == sha256(ref.outputs["FDM"])
        # and decoding it straight on NVDEC is an error naming the clip and the reason
        with pytest.raises(nvdec.ClipError, match=reason.split(":")[0]):
            next(nvdec.iter_nvdec_frames(clip.path, info))


def test_a_decoders_surface_is_read_only_in_the_layout_the_kernels_read() -> None:
    torch = pytest.importorskip("torch")
    ok = torch.zeros((241 * 3 // 2 + 1, 336), dtype=torch.uint8)  # 241 rows: 121 chroma rows; pitch 336
    f = nvdec.nv12_frame(ok, 321, 241)
    assert (f.width, f.height, f.pitch) == (321, 241, 336)
    assert f.pointers[1] - f.pointers[0] == 336 * 241
    c = f.copy()
    assert c.tensor.data_ptr() != ok.data_ptr() and torch.equal(c.tensor, ok)
    bad = {"rows padded at the bottom": torch.zeros((1088 * 3 // 2, 1920), dtype=torch.uint8),
           "narrower than the frame": torch.zeros((1620, 1912), dtype=torch.uint8),
           "columns apart": torch.zeros((1620, 3840), dtype=torch.uint8)[:, ::2],
           "not bytes": torch.zeros((1620, 1920), dtype=torch.int16),
           "three dimensions": torch.zeros((1620, 1920, 1), dtype=torch.uint8)}
    for what, t in bad.items():
        with pytest.raises(ValueError, match="not the 1620 rows of at least 1920 bytes of a 1920x1080 NV12 frame"):
            nvdec.nv12_frame(t, 1920, 1080)  # (what: the case's name, in the failure's locals)


def test_nvdec_frames_laid_out_otherwise_fail_the_clip_with_the_reason(tmp_path: Path, monkeypatch) -> None:
    """The NVDEC decode itself (PyNvVideoCodec faked: its surfaces are CPU tensors) refuses a
    surface whose rows are not the frame's, naming the way out."""
    import sys
    import types

    torch = pytest.importorskip("torch")
    clip = make_clip(tmp_path / "c.mp4", duration=0.3, fps=30, size=(320, 240))
    info = probe(clip.path)

    class Surface:
        def __init__(self, pts):
            self.t, self.pts = torch.zeros((256 * 3 // 2, 320), dtype=torch.uint8), pts  # 256 rows: padded

        def getPTS(self):
            return self.pts

        def __dlpack__(self, *a, **k):
            return self.t.__dlpack__(*a, **k)

        def __dlpack_device__(self):
            return self.t.__dlpack_device__()

    class Demuxer:
        def __init__(self, filename):
            pass

        def GetVideoStreamId(self):
            return info.stream_index

        def GetTimebaseNum(self):
            return 1

        def GetTimebaseDen(self):
            return 30

        def GetNvCodecId(self):
            return 4

        def __iter__(self):
            return iter(range(3))

    class Decoder:
        def Decode(self, packet):
            return [Surface(packet)]

    fake = types.SimpleNamespace(CreateDemuxer=Demuxer, CreateDecoder=lambda **k: Decoder())
    monkeypatch.setitem(sys.modules, "PyNvVideoCodec", fake)
    with pytest.raises(nvdec.ClipError) as err:
        next(nvdec.iter_nvdec_frames(clip.path, info))
    assert "NVDEC's frames are not laid out as this version reads them (decode it with --no-nvdec)" in str(err.value)
    assert "384x320" in err.value.detail and "240 NV12 frame" in err.value.detail


def test_manifest_records_the_decoder(tmp_path: Path) -> None:
    from mime_fast.corpus import discover, run_corpus
    from mime_fast.manifest import read_rows

    src = tmp_path / "in"
    make_clip(src / "a.mp4", duration=0.6, fps=30, size=(320, 240))
    run_corpus(discover(src), tmp_path / "out", subsets=["FM", "VMM"], min_height=0, progress=lambda s: None)
    rows = [r for r in read_rows(tmp_path / "out") if r["subset"] == "FM"]
    assert rows[0]["decoder"] == "pyav" and rows[0]["decoder_reason"] is None


# ---- on a GPU machine


def _gpu_clips(tmp_path: Path) -> list[Path]:
    clips = [make_clip(tmp_path / "s.mp4", duration=1.0, fps=30, size=(1280, 720), bframes=2).path,
             make_clip(tmp_path / "t.mp4", duration=0.5, fps=25, size=(322, 242), color="bt709").path]
    from conftest import SHARED_MEDIA

    clips += sorted(Path(SHARED_MEDIA).glob("*.mp4"))
    return clips


needs_nvdec = pytest.mark.skipif(importlib.util.find_spec("PyNvVideoCodec") is None,
                                 reason="PyNvVideoCodec is not installed")


@pytest.mark.cuda
def test_cuda_download_and_blur_from_nv12(rng: np.random.Generator) -> None:
    torch = pytest.importorskip("torch")
    assert torch.cuda.is_available()
    from test_blur_hull_yuv420 import _cases, _fused

    for planes, pts, ks, feather, margin, matrix in _cases(rng, 40):
        if planes[0].shape[0] % 2 or planes[0].shape[1] % 2:
            continue
        dev = nvdec.nv12_of_planes(planes)
        got = tuple(np.empty_like(p) for p in planes)
        ops.download_nv12(dev, got)
        for a, b in zip(got, planes):
            assert_images_equal(a, b, "cuda")
        cpu, cb = _fused(planes, pts, ks, feather, margin, matrix)
        outs = [tuple(p.copy() for p in planes) for _ in ks]
        gb = ops.blur_hull_nv12(dev, pts, outs, ks, feather=feather, margin=margin, matrix=matrix)
        assert gb == cb
        for o, c in zip(outs, cpu):
            for a, b in zip(o, c):
                assert_images_equal(a, b, "cuda")


@pytest.mark.cuda
def test_cuda_nv12_to_rgb_on_the_device(rng: np.random.Generator) -> None:
    """The RGB the face models read on the device equals the host's frame_rgb of the same planes
    (both matrices, odd sizes, NV12 rows padded as NVDEC pads them, padded output rows, a caller's
    side stream)."""
    torch = pytest.importorskip("torch")
    assert torch.cuda.is_available()
    for h, w, pad in ((480, 640, 0), (242, 322, 0), (2, 2, 0), (720, 1280, 0), (241, 321, 0), (241, 321, 63),
                      (720, 1280, 256), (1, 1, 0)):
        ch, cw = (h + 1) // 2, (w + 1) // 2
        planes = (rng.integers(16, 236, (h, w), dtype=np.uint8), rng.integers(16, 241, (ch, cw), dtype=np.uint8),
                  rng.integers(16, 241, (ch, cw), dtype=np.uint8))
        dev = nvdec.nv12_of_planes(planes, pitch=max(w, 2 * cw) + pad)
        assert dev.pitch == max(w, 2 * cw) + pad
        for matrix in ("bt601", "bt709"):
            expected = ops.yuv420_to_rgb(*planes, matrix=matrix)
            out = torch.zeros((h, w + 5, 3), dtype=torch.uint8, device="cuda")
            stream = torch.cuda.Stream()
            with torch.cuda.stream(stream):
                out.fill_(7)
                ops.nv12_to_rgb_device(dev, out.data_ptr(), out.stride(0), matrix=matrix, stream=stream.cuda_stream)
            got = out.cpu().numpy()
            assert_images_equal(got[:, :w], expected, "cuda")
            assert (got[:, w:] == 7).all()  # the padding untouched


@pytest.mark.cuda
@needs_nvdec
def test_nvdec_frames_equal_pyav(tmp_path: Path) -> None:
    for path in _gpu_clips(tmp_path):
        info = probe(path)
        if nvdec.nvdec_reason(info):
            continue
        ref = list(iter_display_frames(path, info, rgb=False, keep_yuv=True))
        got = list(nvdec.iter_nvdec_frames(path, info))
        assert len(got) == len(ref) == info.video_frames, path
        for (n, t, _, f), (m, s, _, g) in zip(ref, got):
            assert (n, t) == (m, s)
            for a, b in zip(yuv420_planes(g.frame), yuv420_planes(f)):
                assert np.array_equal(np.asarray(a), np.asarray(b)), (path, n)


@pytest.mark.cuda
@needs_nvdec
def test_nvdec_build_equals_the_cpu_build(tmp_path: Path) -> None:
    clip = make_clip(tmp_path / "c.mp4", duration=1.5, fps=30, size=(1280, 720), bframes=2)
    lm = np.load(clip.path.with_suffix(".npz"))["landmarks"]
    ref = mime_fast.build_subsets(clip.path, tmp_path / "cpu", landmarks=lm, subsets=SUBSETS)
    got = mime_fast.build_subsets(clip.path, tmp_path / "gpu", landmarks=lm, subsets=SUBSETS, device="cuda")
    assert got.decoder == "nvdec", got.decoder_reason
    for c in SUBSETS:
        assert sha256(got.outputs[c]) == sha256(ref.outputs[c]), c


@pytest.mark.cuda
@needs_nvdec
def test_nvdec_device_memory_does_not_grow_over_many_clips(tmp_path: Path) -> None:
    """100 clips through the NVDEC path: the device memory in use after the first few stays put
    (torch's cache, the decoders' surfaces and the workspace's buffers included)."""
    import gc

    import torch

    import mime_fast._core as core

    clip = make_clip(tmp_path / "c.mp4", duration=0.6, fps=30, size=(640, 480))
    lm = np.load(clip.path.with_suffix(".npz"))["landmarks"]
    gc.collect()
    before = torch.cuda.memory_allocated()  # (what earlier tests of this process still hold)
    used = []
    for i in range(100):
        r = mime_fast.build_subsets(clip.path, tmp_path / f"o{i % 2}", landmarks=lm, subsets=["FDM", "FSM"],
                                    min_height=0, device="cuda")
        assert r.decoder == "nvdec"
        gc.collect()
        torch.cuda.synchronize()
        free, total = core.cuda_memory()
        used.append(total - free)
    mib = [round(u / 2**20) for u in used]
    assert max(used[10:]) - used[10] < 64 << 20, f"device memory in use (MiB) grew: {mib[:3]} ... {mib[10:]}"
    assert torch.cuda.memory_allocated() - before < 64 << 20
