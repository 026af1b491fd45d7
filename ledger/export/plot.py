"""The Pareto front as an SVG (or PNG) drawn by matplotlib, for the decision log.

matplotlib is an optional dependency (``pip install 'tuneledger[plot]'``; the ``dev`` extra
carries it, so tests and CI draw): a plot is a picture in a document, and a plotting library
draws axes, ticks, log scales and legends correctly where hand-drawn SVG would not. Without
it the decision log keeps the front as a table and says how to get the picture.

The SVG is deterministic for one ledger (no date in its metadata, element ids salted with a
fixed string): the export stays a pure function of the ledger.
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

from ledger.read.comparison import Pareto

#: Why there is no picture, when there is none.
NO_MATPLOTLIB = "matplotlib is not installed (pip install 'tuneledger[plot]')"


def have_matplotlib() -> bool:
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return False
    return True


def pareto_figure(p: Pareto, fmt: str = "svg") -> bytes:
    """The front of each workload in its own panel: every arm a marker (configurations told
    apart by colour and shape), the front joined by a line in order of latency with each of its
    points' load written beside it, arms off the front hollow.

    Raises:
        ImportError: matplotlib is not installed.
        ValueError: no point to draw, or a format other than svg and png.
    """
    if fmt not in ("svg", "png"):
        raise ValueError(f"format must be svg or png, not {fmt!r}")
    if not p.points:
        raise ValueError("no benchmark arm with both throughput and latency to plot")
    import matplotlib

    matplotlib.use("Agg")  # no display: a file only
    from matplotlib import pyplot as plt

    workloads = p.workloads()
    configs = list(dict.fromkeys(q.config_name for q in p.points))
    colours = plt.get_cmap("tab10")
    markers = "osD^v<>ph*"
    style: dict[str, dict[str, Any]] = {
        c: {"color": colours(i % 10), "marker": markers[i % len(markers)]}
        for i, c in enumerate(configs)
    }
    with plt.rc_context({"svg.hashsalt": "tuneledger", "svg.fonttype": "none"}):
        fig, axes = plt.subplots(
            1, len(workloads), figsize=(8.0 * len(workloads), 4.4), squeeze=False
        )
        for ax, workload in zip(axes[0], workloads, strict=True):
            points = [q for q in p.points if q.workload == workload]
            for config in configs:
                mine = [q for q in points if q.config_name == config]
                if not mine:
                    continue
                s = style[config]
                for q in mine:
                    ax.plot(
                        q.latency,
                        q.throughput,
                        linestyle="none",
                        marker=s["marker"],
                        markersize=8,
                        color=s["color"],
                        markerfacecolor=s["color"] if q.on_front else "none",
                    )
                    if q.on_front:  # the front's loads named; the others are in the table
                        ax.annotate(
                            q.load, (q.latency, q.throughput), textcoords="offset points",
                            xytext=(6, 4), fontsize=8,
                        )  # fmt: skip
                ax.plot([], [], linestyle="none", label=config, **s)
            front = sorted((q for q in points if q.on_front), key=lambda q: q.latency)
            ax.plot(
                [q.latency for q in front],
                [q.throughput for q in front],
                color="0.3",
                linewidth=1,
                zorder=0,
                label="Pareto front",
            )
            lat = [q.latency for q in points]
            if min(lat) > 0 and max(lat) / min(lat) > 20:
                ax.set_xscale("log")
            ax.set_xlabel(_axis_label(p.latency_metric))
            ax.set_ylabel("output throughput (tok/s)")
            ax.set_title(workload)
            ax.grid(True, linewidth=0.3)
            ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.02, 1.0))
        fig.suptitle("Throughput against latency: filled markers are on the front", fontsize=10)
        fig.tight_layout()
        out = io.BytesIO()
        metadata = {"Date": None} if fmt == "svg" else {"Software": None}
        fig.savefig(out, format=fmt, metadata=metadata)
        plt.close(fig)
    return out.getvalue()


def _axis_label(metric: str) -> str:
    names = {
        "median_tpot_ms": "median TPOT (ms)",
        "median_ttft_ms": "median TTFT (ms)",
        "median_e2e_latency_ms": "median E2E latency (ms)",
    }
    return names.get(metric, metric)


def session_plot(report: Any, markdown_path: Path) -> tuple[Path, bytes] | None:
    """The Pareto front of a one-session report as an SVG to write next to its decision log
    (``<log name>-pareto.svg``): its path and bytes, or None (several sessions, fewer than two
    configurations, no arm with a latency, no matplotlib). The caller writes the log first, so
    a log it may not write leaves no plot behind."""
    sessions = getattr(report, "sessions", [])
    if len(sessions) != 1 or sessions[0].comparison is None or not have_matplotlib():
        return None
    front = sessions[0].comparison.pareto
    if not front.points:
        return None
    return markdown_path.with_name(markdown_path.stem + "-pareto.svg"), pareto_figure(front, "svg")
