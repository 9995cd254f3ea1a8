"""mime_fast.ops.hull_mask: feathered anti-aliased convex-hull masks, checked against geometry."""

from __future__ import annotations

import math

import cv2
import numpy as np
import pytest

from conftest import assert_images_equal
from mime_fast import _core, ops


_trapezoid = getattr(np, "trapezoid", None) or np.trapz  # numpy 1.x names it trapz


def shoelace(poly: np.ndarray) -> float:
    x, y = poly[:, 0], poly[:, 1]
    return 0.5 * abs(float(np.dot(x, np.roll(y, -1)) - np.dot(y, np.roll(x, -1))))


def cv_hull(points: np.ndarray) -> np.ndarray:
    return cv2.convexHull(points.astype(np.float32)).reshape(-1, 2).astype(np.float64)


def grown_area(area: float, perimeter: float, t: float) -> float:
    """Steiner's formula: area of a convex set grown by t (rounded corners)."""
    return area + perimeter * t + math.pi * t * t


def expected_mask_sum(area: float, perimeter: float, feather: float, margin: float) -> float:
    """Sum of alpha = integral of the ramp over the grown areas: alpha is 1 up to t0 = margin - 0.5
    and falls linearly to 0 at t1 = margin + feather + 0.5 (t = distance outside the hull)."""
    t0, t1 = margin - 0.5, margin + feather + 0.5
    ts = np.linspace(t0, t1, 4001)
    da = perimeter + 2 * math.pi * ts  # dA/dt
    alpha = (t1 - ts) / (t1 - t0)
    return grown_area(area, perimeter, t0) + float(_trapezoid(alpha * da, ts))


POLYGONS = {
    "face_ellipse": np.stack(
        [300 + 125 * np.cos(np.linspace(0, 2 * np.pi, 106, endpoint=False)),
         250 + 160 * np.sin(np.linspace(0, 2 * np.pi, 106, endpoint=False))], 1),
    "triangle": np.array([[50.3, 40.7], [400.2, 90.1], [180.6, 420.9]]),
    "axis_square": np.array([[100.0, 100.0], [300.0, 100.0], [300.0, 300.0], [100.0, 300.0]]),
    "slanted_quad": np.array([[120.5, 60.2], [480.9, 170.4], [400.1, 430.8], [90.7, 330.3]]),
}


@pytest.mark.parametrize("name", sorted(POLYGONS))
def test_hard_edge_area_equals_polygon_area(name: str) -> None:
    poly = POLYGONS[name]
    mask, _ = ops.hull_mask(poly, (512, 640), feather=0)
    area = shoelace(cv_hull(poly))
    assert mask.sum() / 255 == pytest.approx(area, rel=2e-3, abs=2.0)


@pytest.mark.parametrize("name", sorted(POLYGONS))
@pytest.mark.parametrize("feather,margin", [(0.0, 6.0), (12.0, 0.0), (8.0, 4.5)])
def test_feather_and_margin_area_follow_steiner(name: str, feather: float, margin: float) -> None:
    poly = POLYGONS[name]
    mask, _ = ops.hull_mask(poly, (512, 640), feather=feather, margin=margin)
    hull = ops.convex_hull(poly)
    expected = expected_mask_sum(hull.area, hull.perimeter, feather, margin)
    assert mask.sum() / 255 == pytest.approx(expected, rel=3e-3, abs=3.0)


@pytest.mark.parametrize("feather,margin", [(0.0, 0.0), (10.0, 0.0), (6.0, 3.0)])
def test_pixels_follow_signed_distance(rng: np.random.Generator, feather: float, margin: float) -> None:
    # Independent signed distance from OpenCV (positive inside there, so negate).
    poly = POLYGONS["slanted_quad"]
    contour = cv_hull(poly).astype(np.float32).reshape(-1, 1, 2)
    mask, _ = ops.hull_mask(poly, (512, 640), feather=feather, margin=margin)
    ys = rng.integers(0, 512, 3000)
    xs = rng.integers(0, 640, 3000)
    for x, y in zip(xs, ys):
        d = -cv2.pointPolygonTest(contour, (float(x), float(y)), True)
        alpha = min(1.0, max(0.0, (margin + feather + 0.5 - d) / (feather + 1.0)))
        assert abs(int(mask[y, x]) - 255 * alpha) <= 1.0, (x, y, d, mask[y, x])


def test_hull_interior_fully_masked_and_far_outside_clear() -> None:
    poly = POLYGONS["face_ellipse"]
    feather, margin = 9.0, 2.0
    mask, _ = ops.hull_mask(poly, (512, 640), feather=feather, margin=margin)
    contour = cv_hull(poly).astype(np.float32).reshape(-1, 1, 2)
    yy, xx = np.mgrid[0:512:3, 0:640:3]
    for x, y in zip(xx.ravel(), yy.ravel()):
        d = -cv2.pointPolygonTest(contour, (float(x), float(y)), True)
        if d <= margin - 0.6:
            assert mask[y, x] == 255, (x, y, d)
        elif d >= margin + feather + 0.6:
            assert mask[y, x] == 0, (x, y, d)


def test_feather_ramp_is_monotone_along_rays() -> None:
    poly = POLYGONS["face_ellipse"]
    mask, _ = ops.hull_mask(poly, (512, 640), feather=20)
    cx, cy = 300.0, 250.0
    for angle in np.linspace(0, 2 * np.pi, 72, endpoint=False):
        r = np.arange(0, 250, 0.5)
        x = np.round(cx + r * np.cos(angle)).astype(int)
        y = np.round(cy + r * np.sin(angle)).astype(int)
        keep = (x >= 0) & (x < 640) & (y >= 0) & (y < 512)
        values = mask[y[keep], x[keep]].astype(int)
        assert values[0] == 255 and values[-1] == 0
        # Non-increasing outwards (one unit of slack for the rounding of neighbouring pixels).
        assert np.all(np.diff(values) <= 1), angle
        ramp = np.count_nonzero((values > 0) & (values < 255)) * 0.5
        assert 15 <= ramp <= 26  # about feather + 1 px wide (measured along the ray)


def test_bbox_is_extent_of_nonzero_pixels() -> None:
    for poly in POLYGONS.values():
        mask, bbox = ops.hull_mask(poly, (512, 640), feather=5)
        ys, xs = np.nonzero(mask)
        assert bbox == (xs.min(), ys.min(), xs.max() - xs.min() + 1, ys.max() - ys.min() + 1)


def test_points_partly_outside_frame_are_clipped_correctly() -> None:
    # The mask of a hull crossing the frame edges equals the same region of a mask drawn on a
    # larger canvas: clipping never moves or reshapes the hull.
    poly = POLYGONS["face_ellipse"] - [250.0, 180.0]  # crosses the left and top edges
    small, bbox = ops.hull_mask(poly, (300, 400), feather=7, margin=1.0)
    big, _ = ops.hull_mask(poly + [100.0, 100.0], (500, 600), feather=7, margin=1.0)
    # Translating the points changes single-precision rounding, so allow one unit on rare pixels.
    diff = np.abs(small.astype(int) - big[100:400, 100:500])
    assert diff.max() <= 1 and np.count_nonzero(diff) < 20
    assert bbox[0] == 0 and bbox[1] == 0


def test_hull_outside_frame_gives_empty_mask() -> None:
    mask, bbox = ops.hull_mask(POLYGONS["triangle"] + [2000.0, 0.0], (512, 640), feather=3)
    assert bbox == (0, 0, 0, 0)
    assert not mask.any()


def test_only_hull_vertices_matter(rng: np.random.Generator, astronaut_face_points: np.ndarray) -> None:
    hull = ops.convex_hull(astronaut_face_points)
    a, _ = ops.hull_mask(astronaut_face_points, (512, 512), feather=4)
    b, _ = ops.hull_mask(rng.permutation(hull.vertices), (512, 512), feather=4)
    assert_images_equal(a, b)
    assert hull.area == pytest.approx(shoelace(cv_hull(astronaut_face_points)), rel=1e-9)


def test_auto_feather_scales_with_face_size() -> None:
    poly = POLYGONS["face_ellipse"]
    hull = ops.convex_hull(poly)
    assert hull.feather == pytest.approx(ops.AUTO_FEATHER_FRACTION * math.sqrt(hull.area))
    auto, _ = ops.hull_mask(poly, (512, 640))
    explicit, _ = ops.hull_mask(poly, (512, 640), feather=hull.feather)
    assert_images_equal(auto, explicit)
    tiny = ops.convex_hull(poly * 0.02)
    assert tiny.feather == 1.0  # floor of one pixel


def measured_feather(row: np.ndarray) -> float:
    """Feather read off one row of mask values going outwards from a hull edge: the ramp falls by
    255 / (feather + 1) per pixel, so feather = 255 / |slope| - 1 (least squares over the pixels
    strictly between 0 and 255, whose values are rounded)."""
    v = row.astype(np.float64)
    ramp = np.nonzero((v > 0) & (v < 255))[0]
    assert len(ramp) >= 2 and np.all(np.diff(ramp) == 1), row
    slope = np.polyfit(ramp, v[ramp], 1)[0]
    return 255.0 / -slope - 1.0


@pytest.mark.parametrize("w,h,want", [
    # README: feather=None is 0.06 * sqrt(hull area) px, at least 1 px
    (200, 200, 12.0),  # 0.06 * sqrt(200 * 200) = 0.06 * 200
    (500, 300, 23.24),  # 0.06 * sqrt(150000) = 0.06 * 387.3
    (120, 30, 3.6),  # 0.06 * sqrt(3600) = 0.06 * 60
    (10, 10, 1.0),  # 0.06 * 10 = 0.6: the 1 px floor
])
def test_auto_feather_ramp_width_in_pixels(w: int, h: int, want: float) -> None:
    # An axis-aligned rectangle (integer coordinates are pixel centres): along the middle row and
    # column the distance to the hull grows by 1 px per pixel, so the ramp's slope gives the feather.
    x0, y0 = 150, 140
    poly = np.array([[x0, y0], [x0 + w, y0], [x0 + w, y0 + h], [x0, y0 + h]], np.float64)
    mask, _ = ops.hull_mask(poly, (600, 800))
    cx, cy = x0 + w // 2, y0 + h // 2
    rays = {"right": mask[cy, x0 + w:], "left": mask[cy, :x0 + 1][::-1],
            "down": mask[y0 + h:, cx], "up": mask[:y0 + 1, cx][::-1]}
    for side, row in rays.items():
        assert row[0] < 255 and row[-1] == 0, side  # the ramp starts at the edge and ends inside the frame
        assert measured_feather(row) == pytest.approx(want, abs=0.15), side
        # ... and reaches 0 feather + 0.5 px past the edge
        assert abs(int(np.argmax(row == 0)) - (want + 0.5)) <= 1.0, side


def test_fast_rasteriser_equals_per_pixel_body(rng: np.random.Generator) -> None:
    # hull_mask_reference evaluates every pixel with the shared body, as the CUDA kernel does.
    for trial in range(150):
        n = int(rng.integers(3, 120))
        pts = rng.uniform(-60, 360, 2) + rng.normal(size=(n, 2)) * rng.uniform(1, 150)
        feather = None if trial % 3 == 0 else float(rng.uniform(0, 25))
        margin = float(rng.uniform(0, 8)) if trial % 2 else 0.0
        a, ba = _core.hull_mask(pts, 240, 320, feather, margin, "cpu")
        b, bb = _core.hull_mask_reference(pts, 240, 320, feather, margin)
        assert_images_equal(a, b)
        assert ba == bb


def test_accepts_float32_and_frame_shape(astronaut_face_points: np.ndarray, astronaut: np.ndarray) -> None:
    a, _ = ops.hull_mask(astronaut_face_points, astronaut.shape)
    b, _ = ops.hull_mask(astronaut_face_points.astype(np.float64), astronaut.shape[:2])
    assert_images_equal(a, b)
    assert a.shape == (512, 512)


@pytest.mark.parametrize(
    "points,match",
    [
        (np.array([[0.0, 0.0], [5.0, 5.0]]), "at least 3 points"),
        (np.array([[0.0, 0.0], [5.0, 5.0], [np.nan, 1.0]]), "not finite"),
        (np.array([[0.0, 0.0], [5.0, 5.0], [np.inf, 1.0]]), "not finite"),
        (np.array([[0.0, 0.0], [50.0, 5.0], [1e30, 1.0]]), r"point 2 is at \(1e\+30, 1\), beyond"),
        (np.array([[0.0, 0.0], [50.0, 5.0], [1.0, -2.0**24 - 1]]), r"point 2 is at .*: not a frame coordinate"),
        (np.array([[0.0, 0.0], [5.0, 5.0], [10.0, 10.0], [2.5, 2.5]]), "collinear"),
        (np.array([[3.0, 3.0]] * 5), "collinear"),
        (np.zeros((5, 3)), r"\(N, 2\)"),
    ],
)
def test_bad_points(points: np.ndarray, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        ops.hull_mask(points, (100, 100))


def test_bad_parameters() -> None:
    tri = POLYGONS["triangle"]
    with pytest.raises(ValueError, match="feather"):
        ops.hull_mask(tri, (100, 100), feather=-1.0)
    with pytest.raises(ValueError, match="margin"):
        ops.hull_mask(tri, (100, 100), margin=-2.0)
    with pytest.raises(ValueError, match="margin"):
        ops.hull_mask(tri, (100, 100), margin=float("nan"))
    with pytest.raises(ValueError, match="shape"):
        ops.hull_mask(tri, (0, 100))
    with pytest.raises(TypeError, match="shape"):
        ops.hull_mask(tri, 100)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="numeric"):
        ops.hull_mask(np.array([["a", "b"]] * 3), (100, 100))
