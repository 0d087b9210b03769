"""Server-side SVG charts for the HTML report (no JavaScript, no external assets).

Every text that reaches the SVG (labels, tooltips) is XML-escaped here; the functions return
``markupsafe.Markup`` so the Jinja template can embed them as they are.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from markupsafe import Markup, escape

__all__ = ["HLine", "Overlay", "line_chart", "bar_chart", "NARROW_W", "NARROW_H"]

W, H = 1080, 260
#: the phone-width variant of every chart (the report shows it below 640 px, so a 390 px screen
#: keeps a readable height and 10-11 px labels instead of a 1080-wide chart shrunk to ~80 px)
NARROW_W, NARROW_H = 380, 250
ML, MR, MT, MB = 56, 20, 18, 34  # margins: left, right, top, bottom

COLORS = {
    "line": "#2563eb",
    "band": "#93c5fd",
    "grid": "#e5e7eb",
    "axis": "#6b7280",
    "alert": "#dc2626",
    "warn": "#d97706",
    "bar": "#60a5fa",
    "failed": "#f87171",
    "corrected": "#7c3aed",
}


@dataclass(frozen=True)
class HLine:
    """A horizontal reference line (threshold, baseline)."""

    value: float
    label: str
    color: str = "#dc2626"
    dash: str = "6 4"


@dataclass(frozen=True)
class Overlay:
    """A second daily series drawn over the first (e.g. the label-corrected mean): a dashed line,
    diamond points and an outlined band; None where a day has no value."""

    values: Sequence[float | None]
    lows: Sequence[float | None]
    highs: Sequence[float | None]
    label: str
    color: str = COLORS["corrected"]
    css: str = "corrected"


def _fmt(v: float, pct: bool, integer: bool = False) -> str:
    if pct:
        return f"{v:.0%}"
    return f"{v:,.0f}" if integer or abs(v) >= 10 else f"{v:.2f}"


def _ticks(lo: float, hi: float, n: int = 5, *, integer: bool = False) -> list[float]:
    """About ``n`` evenly spaced "nice" ticks covering ``[lo, hi]``: steps of 1, 2, 2.5 or 5 times
    a power of ten; ``integer``: steps of 1, 2 or 5 times a power of ten and at least 1, so every
    tick is a whole number (a count axis never reads 0, 2, 5, 8, 10 for 0, 2.5, 5, 7.5, 10)."""
    span = hi - lo
    if span <= 0:
        return [lo]
    raw = span / n
    mag = 10 ** math.floor(math.log10(raw))
    nice = (1, 2, 5, 10) if integer else (1, 2, 2.5, 5, 10)
    step = min((s * mag for s in nice if s * mag >= raw), default=raw)
    if integer:
        step = max(1.0, float(round(step)))
    first = math.ceil(lo / step - 1e-9) * step
    out, v = [], first
    while v <= hi + 1e-9:
        out.append(round(v, 10))
        v += step
    return out


class _Frame:
    def __init__(self, n: int, lo: float, hi: float, width: int = W, height: int = H) -> None:
        self.n, self.lo, self.hi, self.w, self.h = n, lo, hi, width, height
        self.pw, self.ph = width - ML - MR, height - MT - MB

    def x(self, i: int) -> float:
        return ML + (i + 0.5) * self.pw / max(self.n, 1)

    def y(self, v: float) -> float:
        span = (self.hi - self.lo) or 1.0
        return MT + self.ph * (1 - (v - self.lo) / span)

    @property
    def slot(self) -> float:
        return self.pw / max(self.n, 1)


def _axes(f: _Frame, days: Sequence[str], pct: bool, parts: list[str], integer: bool = False) -> None:
    for t in _ticks(f.lo, f.hi, integer=integer):
        y = f.y(t)
        parts.append(f'<line x1="{ML}" x2="{f.w - MR}" y1="{y:.1f}" y2="{y:.1f}" stroke="{COLORS["grid"]}"/>')
        parts.append(
            f'<text x="{ML - 8}" y="{y + 4:.1f}" text-anchor="end" class="tick">{escape(_fmt(t, pct, integer))}</text>'
        )
    every = max(1, math.ceil(len(days) / max(3, f.pw // 64)))
    for i, d in enumerate(days):
        last = len(days) - 1
        if i == last or (i % every == 0 and last - i >= max(every * 0.6, 1)):
            parts.append(
                f'<text x="{f.x(i):.1f}" y="{f.h - MB + 18}" text-anchor="middle" class="tick">{escape(d[5:])}</text>'
            )
    parts.append(f'<line x1="{ML}" x2="{f.w - MR}" y1="{f.h - MB}" y2="{f.h - MB}" stroke="{COLORS["axis"]}"/>')


def _open(title: str, width: int = W, height: int = H) -> list[str]:
    return [
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height}" role="img" '
        f'aria-label="{escape(title)}" class="chart"><title>{escape(title)}</title>'
    ]


def _markers(f: _Frame, markers: dict[int, tuple[str, str]], parts: list[str]) -> None:
    """Alert markers: a triangle at the top of the plot over each alerting day, tooltip = messages."""
    for i, (severity, tip) in sorted(markers.items()):
        x, y = f.x(i), MT + 2
        color = COLORS["alert"] if severity == "error" else COLORS["warn"]
        parts.append(
            f'<g class="alert-marker" data-day-index="{i}"><title>{escape(tip)}</title>'
            f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{MT}" y2="{f.h - MB}" stroke="{color}" stroke-opacity="0.16" stroke-width="{max(f.slot * 0.6, 2):.1f}"/>'
            f'<path d="M{x - 6:.1f},{y:.1f} L{x + 6:.1f},{y:.1f} L{x:.1f},{y + 10:.1f} Z" fill="{color}"/></g>'
        )


def _hlines(f: _Frame, lines: Sequence[HLine], pct: bool, parts: list[str]) -> None:
    for ln in lines:
        if not (f.lo <= ln.value <= f.hi):
            continue
        y = f.y(ln.value)
        parts.append(
            f'<line x1="{ML}" x2="{f.w - MR}" y1="{y:.1f}" y2="{y:.1f}" stroke="{ln.color}" stroke-width="1.5" stroke-dasharray="{ln.dash}" class="hline"/>'
            f'<text x="{ML + 6}" y="{y - 5:.1f}" text-anchor="start" class="hlabel" fill="{ln.color}" paint-order="stroke" stroke="#fff" stroke-width="3">{escape(ln.label)} {escape(_fmt(ln.value, pct))}</text>'
        )


def _path(points: list[tuple[float, float] | None]) -> str:
    """SVG path through the points; a None breaks the line (a day without scores)."""
    d, pen = [], False
    for p in points:
        if p is None:
            pen = False
            continue
        d.append(f"{'L' if pen else 'M'}{p[0]:.1f},{p[1]:.1f}")
        pen = True
    return " ".join(d)


def line_chart(
    days: Sequence[str],
    values: Sequence[float | None],
    *,
    title: str,
    band: tuple[Sequence[float | None], Sequence[float | None]] | None = None,
    hlines: Sequence[HLine] = (),
    markers: dict[int, tuple[str, str]] | None = None,
    y_range: tuple[float, float] | None = None,
    pct: bool = False,
    value_label: str = "mean",
    width: int = W,
    height: int = H,
    overlay: Overlay | None = None,
) -> Markup:
    """A daily line with an optional band (CI), reference lines, alert markers and an overlay."""
    finite = [v for v in values if v is not None and math.isfinite(v)]
    if band:
        finite += [v for v in list(band[0]) + list(band[1]) if v is not None and math.isfinite(v)]
    if overlay:
        finite += [
            v
            for v in list(overlay.values) + list(overlay.lows) + list(overlay.highs)
            if v is not None and math.isfinite(v)
        ]
    finite += [h.value for h in hlines]
    if y_range is None:
        lo, hi = (min(finite), max(finite)) if finite else (0.0, 1.0)
        pad = max((hi - lo) * 0.15, 0.05)
        y_range = (max(0.0, lo - pad), min(1.0, hi + pad))
    f = _Frame(len(days), *y_range, width=width, height=height)
    parts = _open(title, width, height)
    _axes(f, days, pct, parts)
    if markers:
        _markers(f, markers, parts)
    if band:
        lows, highs = band
        seg: list[tuple[int, float, float]] = []  # (day index, low, high) of consecutive days with a band
        segments: list[list[tuple[int, float, float]]] = []
        for i in range(len(days)):
            low, high = lows[i], highs[i]
            if low is not None and high is not None:
                seg.append((i, low, high))
            elif seg:
                segments.append(seg)
                seg = []
        if seg:
            segments.append(seg)
        for s in segments:
            top = [(f.x(i), f.y(high)) for i, _, high in s]
            bottom = [(f.x(i), f.y(low)) for i, low, _ in reversed(s)]
            if len(s) == 1:  # a lone day: a vertical error bar
                x = top[0][0]
                parts.append(
                    f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{top[0][1]:.1f}" y2="{bottom[0][1]:.1f}" stroke="{COLORS["band"]}" stroke-width="6" class="ci-band"/>'
                )
                continue
            polygon = " ".join(f"{x:.1f},{y:.1f}" for x, y in top + bottom)
            parts.append(f'<polygon points="{polygon}" fill="{COLORS["band"]}" fill-opacity="0.45" class="ci-band"/>')
    _hlines(f, hlines, pct, parts)
    pts = [(f.x(i), f.y(v)) if v is not None and math.isfinite(v) else None for i, v in enumerate(values)]
    parts.append(f'<path d="{_path(pts)}" fill="none" stroke="{COLORS["line"]}" stroke-width="2.2" class="series"/>')
    if overlay:
        _overlay(f, days, overlay, pct, parts)
    for i, (p, v) in enumerate(zip(pts, values, strict=True)):
        if p is None or v is None:
            parts.append(
                f'<text x="{f.x(i):.1f}" y="{f.h - MB - 6}" text-anchor="middle" class="nodata">no data<title>{escape(days[i])}: no scores</title></text>'
                if len(days) <= 20
                else ""
            )
            continue
        marker = markers.get(i) if markers else None
        alert = marker is not None
        color = (COLORS["alert"] if marker[0] == "error" else COLORS["warn"]) if marker is not None else COLORS["line"]
        parts.append(
            f'<circle cx="{p[0]:.1f}" cy="{p[1]:.1f}" r="{4.5 if alert else 3.2}" fill="{color}" stroke="#fff" stroke-width="1.2">'
            f"<title>{escape(days[i])}: {escape(value_label)} {escape(_fmt(v, pct))}</title></circle>"
        )
    parts.append("</svg>")
    return Markup("".join(parts))


def _overlay(f: _Frame, days: Sequence[str], o: Overlay, pct: bool, parts: list[str]) -> None:
    """The overlay's interval as an outlined bar per day, its values as a dashed line with diamonds."""
    for i in range(len(days)):
        low, high = o.lows[i], o.highs[i]
        if low is None or high is None:
            continue
        x, w = f.x(i), max(min(f.slot * 0.3, 10.0), 3.0)
        parts.append(
            f'<rect x="{x - w / 2:.1f}" y="{f.y(high):.1f}" width="{w:.1f}" height="{max(f.y(low) - f.y(high), 1):.1f}" '
            f'fill="{o.color}" fill-opacity="0.16" stroke="{o.color}" stroke-width="1" class="{o.css}-band"/>'
        )
    pts = [(f.x(i), f.y(v)) if v is not None and math.isfinite(v) else None for i, v in enumerate(o.values)]
    parts.append(
        f'<path d="{_path(pts)}" fill="none" stroke="{o.color}" stroke-width="1.8" stroke-dasharray="5 3" '
        f'class="{o.css}-series"/>'
    )
    for i, (p, v) in enumerate(zip(pts, o.values, strict=True)):
        if p is None or v is None:
            continue
        x, y = p
        ci = ""
        if o.lows[i] is not None and o.highs[i] is not None:
            ci = f" [{_fmt(o.lows[i], pct)}-{_fmt(o.highs[i], pct)}]"  # type: ignore[arg-type]
        parts.append(
            f'<path d="M{x:.1f},{y - 5:.1f} L{x + 5:.1f},{y:.1f} L{x:.1f},{y + 5:.1f} L{x - 5:.1f},{y:.1f} Z" '
            f'fill="{o.color}" stroke="#fff" stroke-width="1" class="{o.css}-point">'
            f"<title>{escape(days[i])}: {escape(o.label)} {escape(_fmt(v, pct))}{escape(ci)}</title></path>"
        )


def bar_chart(
    days: Sequence[str],
    stacks: Sequence[tuple[str, Sequence[float], str]],
    *,
    title: str,
    markers: dict[int, tuple[str, str]] | None = None,
    hlines: Sequence[HLine] = (),
    width: int = W,
    height: int = H,
) -> Markup:
    """Stacked daily bars; ``stacks`` = [(label, values, color), ...] from the bottom up."""
    totals = [sum(s[1][i] for s in stacks) for i in range(len(days))]
    top = max(totals + [h.value for h in hlines] + [1.0])
    ticks = _ticks(0, top * 1.1, integer=True)
    f = _Frame(len(days), 0.0, max(ticks[-1], top * 1.1), width=width, height=height)
    parts = _open(title, width, height)
    _axes(f, days, False, parts, integer=True)
    if markers:
        _markers(f, markers, parts)
    bw = max(f.slot * 0.62, 1.0)
    for i, d in enumerate(days):
        base = 0.0
        tip = ", ".join(f"{label} {int(vals[i]):,}" for label, vals, _ in stacks)
        for _label, vals, color in stacks:
            v = vals[i]
            if v <= 0:
                continue
            y0, y1 = f.y(base), f.y(base + v)
            parts.append(
                f'<rect x="{f.x(i) - bw / 2:.1f}" y="{y1:.1f}" width="{bw:.1f}" height="{max(y0 - y1, 0.5):.1f}" fill="{color}" rx="2">'
                f"<title>{escape(d)}: {escape(tip)}</title></rect>"
            )
            base += v
        if totals[i] == 0:
            parts.append(
                f'<text x="{f.x(i):.1f}" y="{f.h - MB - 6}" text-anchor="middle" class="zero" fill="{COLORS["alert"]}">0<title>{escape(d)}: no rows</title></text>'
            )
    _hlines(f, hlines, False, parts)
    parts.append("</svg>")
    return Markup("".join(parts))
