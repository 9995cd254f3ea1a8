"""The constant-rate time grid (:mod:`mime_fast.media.grid`): standardisation arithmetic."""

from __future__ import annotations

from fractions import Fraction

from mime_fast.media import FrameStandardiser, output_frame_count


def _run_std(times, n_out, fps=30):
    std = FrameStandardiser(times[0], fps, n_out)
    got = []
    for j, t in enumerate(times):
        got.extend(i_item for i_item in std.push(t, j))
    got.extend(std.finish())
    assert [i for i, _ in got] == list(range(n_out))
    return [j for _, j in got]


def test_standardiser_25fps_duplicates_by_timestamp():
    times = [Fraction(k, 25) for k in range(50)]  # 2 s
    n = output_frame_count(Fraction(50, 25), 30)
    assert n == 60
    assert _run_std(times, n) == [(i * 25) // 30 for i in range(60)]


def test_standardiser_2997_drops_without_drift_on_long_clip():
    # one hour at 29.97 fps: 107892 frames, pts in the usual 1001/30000 grid
    k = 107892
    times = [Fraction(1001 * j, 30000) for j in range(k)]
    dur = Fraction(1001 * k, 30000)
    n = output_frame_count(dur, 30)
    assert n == 108000  # 3600.0036 s -> 108000 frames (no drift)
    got = _run_std(times, n)
    # latest j with 1001 j / 30000 <= i / 30 + 1 ms  <=>  1001 j <= 1000 i + 30
    exp = [min(k - 1, (1000 * i + 30) // 1001) for i in range(n)]
    assert got == exp
    assert set(got) == set(range(k))  # 29.97 -> 30 only duplicates, never drops


def test_standardiser_tolerates_millisecond_rounded_pts():
    # 30 fps source stored with a 1 ms time base (33, 67, 100 ms ...): every frame used exactly once
    times = [Fraction(round(j * 1000 / 30), 1000) for j in range(300)]
    assert _run_std(times, 300) == list(range(300))


def test_standardiser_vfr_picks_latest_frame_not_after_t():
    times = [Fraction(0), Fraction(10, 1000), Fraction(90, 1000), Fraction(95, 1000), Fraction(200, 1000)]
    # grid 0, 33.3, 66.7, 100, 133, 167 ms
    assert _run_std(times, 6) == [0, 1, 1, 3, 3, 3]


def test_output_frame_count_rounds_half_up():
    assert output_frame_count(Fraction(1), 30) == 30
    assert output_frame_count(Fraction(1, 60), 30) == 1  # 0.5 frame -> 1
    assert output_frame_count(Fraction(1, 61), 30) == 1  # never 0
    assert output_frame_count(Fraction(101, 60), 30) == 51  # 50.5 -> 51
