"""Audio (:mod:`mime_fast.media.audio`): the aligned 16 kHz WAV and the shared AAC track."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

from mime_fast import media, samples

try:
    from video_fixtures import decode_audio, dominant_freqs, sha256, textured_frames
except ImportError:  # tests/ imported as a package
    from .video_fixtures import decode_audio, dominant_freqs, sha256, textured_frames


def test_extract_audio_resamples_to_16k_mono_aligned_and_exact_length(tmp_path):
    clip = samples.make_clip(tmp_path / "s.mp4", duration=1.0, fps=25, size=(160, 120), audio_rate=44100)
    info = media.probe(clip.path)
    wav = tmp_path / "s.wav"
    n = 16000  # 1.0 s
    real = media.extract_audio_wav(clip.path, info, wav, n_samples=n, rate=16000, channels=1)
    data, rate = media.read_wav(wav)
    assert rate == 16000 and data.shape == (n, 1)
    assert real > 0.95 * n
    freqs = dominant_freqs(data[2000:14000, 0].astype(np.float64), 16000)
    assert abs(freqs[0] - samples.FACE_TONES_HZ[0]) < 5 and abs(freqs[1] - samples.FACE_TONES_HZ[1]) < 5
    # mono = mean of both channels: both tones at ~half amplitude each
    rms = float(np.sqrt(np.mean((data[2000:14000, 0] / 32768.0) ** 2)))
    assert 0.10 < rms < 0.20  # two 0.125-amplitude sines: rms ~0.125


def test_extract_audio_pads_to_requested_length(tmp_path):
    clip = samples.make_clip(tmp_path / "s.mp4", duration=0.5, fps=25, size=(160, 120))
    info = media.probe(clip.path)
    wav = tmp_path / "s.wav"
    real = media.extract_audio_wav(clip.path, info, wav, n_samples=16000, rate=16000, channels=1)
    data, _ = media.read_wav(wav)
    assert len(data) == 16000
    assert 7900 <= real <= 8400  # 0.5 s of source audio (+ the AAC encoder's last-frame padding)
    assert np.all(data[8400:] == 0)  # silence after the source audio ends
    assert np.abs(data[1000:7000]).max() > 1000


def test_extract_audio_aligns_a_late_audio_track_to_the_first_video_frame(tmp_path):
    clip = samples.make_clip(tmp_path / "late.mp4", duration=1.0, fps=25, size=(160, 120), audio_delay=0.25)
    info = media.probe(clip.path)
    wav = tmp_path / "late.wav"
    media.extract_audio_wav(clip.path, info, wav, n_samples=16000)
    data, _ = media.read_wav(wav)
    assert len(data) == 16000
    audible = np.nonzero(np.abs(data[:, 0].astype(int)) > 200)[0]
    assert abs(audible[0] / 16000 - 0.25) < 0.015  # leading silence inserted, tone starts at 0.25 s
    assert np.abs(data[: int(0.22 * 16000)]).max() < 50


def test_extract_audio_drops_audio_before_the_first_video_frame(tmp_path):
    import dataclasses

    # 1 s clip whose audio is 0.5 s of silence then a 440 Hz tone; pretend the video starts at 0.3 s
    fr = textured_frames(30)
    wr = media.Mp4Writer(tmp_path / "av.mp4", 160, 120, audio_rate=16000)
    for i, f in enumerate(fr):
        wr.write_rgb(f, i)
    t = np.arange(16000) / 16000
    pcm = np.where(t >= 0.5, 0.3 * np.sin(2 * np.pi * 440 * t), 0.0)
    wr.write_audio((pcm * 32767).astype(np.int16)[:, None])
    wr.close()
    info = dataclasses.replace(media.probe(tmp_path / "av.mp4"), start=Fraction(3, 10))
    wav = tmp_path / "av.wav"
    media.extract_audio_wav(tmp_path / "av.mp4", info, wav, n_samples=8000)
    data, _ = media.read_wav(wav)
    audible = np.nonzero(np.abs(data[:, 0].astype(int)) > 300)[0]
    assert len(data) == 8000 and abs(audible[0] / 16000 - 0.2) < 0.01


@pytest.mark.parametrize("queue_size", [0, 2])
def test_shared_aac_track_gives_each_writer_the_audio_it_would_encode(tmp_path, queue_size):
    # the pipeline encodes the WAV once (AacTrack) and muxes the packets into every subset: the
    # audio decodes to exactly what a writer encoding the same PCM itself gives, with the same
    # duration, and audio and video packets interleave through the file
    import av

    fr = textured_frames(30)
    pcm = (np.sin(np.arange(16000) / 5) * 8000).astype(np.int16)[:, None]
    media.write_wav(tmp_path / "a.wav", pcm, 16000)
    own = tmp_path / "own.mp4"
    wr = media.Mp4Writer(own, 160, 120, audio_rate=16000)
    for i, f in enumerate(fr):
        wr.write_rgb(f, i)
    wr.write_audio(pcm)
    wr.close()
    track = media.AacTrack(tmp_path / "a.wav")
    assert (track.rate, track.channels, track.samples) == (16000, 1, 16000)
    paths = []
    for k in range(2):
        paths.append(tmp_path / f"shared{k}.mp4")
        wr = media.Mp4Writer(paths[-1], 160, 120, audio_track=track, queue_size=queue_size)
        for i, f in enumerate(fr):
            wr.write_rgb(f, i)
            wr.write_audio_until(Fraction(i + 1, 30))
        with pytest.raises(ValueError, match="write_audio_until"):
            wr.write_audio(pcm)
        wr.close()
    ref, rate, ch = decode_audio(own)
    for p in paths:
        got, grate, gch = decode_audio(p)
        assert (grate, gch) == (rate, ch) == (16000, 1)
        assert np.array_equal(got, ref)
        with av.open(str(p)) as c:
            kinds = [pk.stream.type for pk in c.demux() if pk.size]
            a = c.streams.audio[0]
            assert float(a.duration * a.time_base) == pytest.approx(1.0, abs=0.07)
        first_audio, last_video = kinds.index("audio"), len(kinds) - 1 - kinds[::-1].index("video")
        assert first_audio < last_video  # interleaved, not all audio at the end
    assert sha256(paths[0]) == sha256(paths[1])
