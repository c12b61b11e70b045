"""The demo's picture: partitions by time coloured by owner, rebalances marked, and each
member's lag beneath. matplotlib comes from the optional ``demo`` extra."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from demo.timeline import Interval

COLOURS = {"A": "#1f77b4", "B": "#ff7f0e", "consumer": "#2ca02c", "unowned": "#999999"}


def render(path: Path, *, t0: float, partitions: int, ivals: Sequence[Interval],
           phases: Sequence[tuple[float, str]], rebalances: Sequence[float],
           lag: Mapping[str, Sequence[tuple[float, int]]], title: str, members: Sequence[str]) -> None:
    try:
        import matplotlib
    except ImportError as exc:  # pragma: no cover - the Makefile installs the extra first
        raise SystemExit("the demo needs matplotlib: pip install -e '.[demo]' (make demo does)") from exc
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch

    fig, (top, bottom) = plt.subplots(2, 1, figsize=(13, 7.5), sharex=True,
                                      gridspec_kw={"height_ratios": [3, 1.4]})
    for i in ivals:
        top.broken_barh([(i.start - t0, i.end - i.start)], (i.partition - 0.4, 0.8),
                        facecolors=COLOURS.get(i.member, "#d62728"), edgecolor="white", linewidth=0.5)
    for n, (t, label) in enumerate(phases):
        for ax in (top, bottom):
            ax.axvline(t - t0, color="black", linestyle="--", linewidth=1)
        # labels on two alternating rows above the partitions, so close steps stay readable
        top.text(t - t0, partitions - 0.45 + 0.45 * (n % 2), " " + label, va="bottom", ha="left", fontsize=9)
    for t in rebalances:
        top.plot([t - t0], [-0.75], marker="^", color="#d62728", markersize=7, clip_on=False)
    top.set_yticks(range(partitions))
    top.set_yticklabels([f"partition {p}" for p in range(partitions)])
    top.set_ylim(-0.9, partitions + 0.5)
    top.set_title(title, fontsize=11, loc="left")
    handles = [Patch(color=COLOURS[m], label=_label(m)) for m in members]
    handles.append(plt.Line2D([], [], marker="^", color="#d62728", linestyle="", label="ownership change"))
    top.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=9, frameon=False)

    for member, series in lag.items():
        if not series or (member == "unowned" and not any(v for _, v in series)):
            continue
        xs = [t - t0 for t, _ in series]
        ys = [v for _, v in series]
        bottom.step(xs, ys, where="post", color=COLOURS.get(member, "#d62728"), label=_label(member),
                    linewidth=1.3)
    bottom.set_ylabel("lag (records)")
    bottom.set_xlabel("seconds since query A started")
    bottom.set_ylim(bottom=0)
    bottom.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=9, frameon=False)
    bottom.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def _label(member: str) -> str:
    return {"A": "query A (groupkafka)", "B": "query B (groupkafka)",
            "consumer": "librdkafka consumer", "unowned": "unowned (joining or handing over)"}.get(member, member)
