"""The soak's plot from its CSV: ``python -m soak.plot samples.csv [-o soak.png]``.

Panels: RSS, the driver JVMs' live heap, open files and threads per process role, the checkpoints, trigger p99 and the
group's lag, over minutes since the run started; faults as vertical lines."""

from __future__ import annotations

import argparse
import os
import sys

from soak.rules import read_rows, series

PANELS = (  # (title, metric, subject filter)
    ("RSS (MB)", "rss_mb", None),
    ("driver JVM heap after a full GC (MB)", "live_heap_mb", None),
    ("open files", "fds", None),
    ("threads", "threads", None),
    ("checkpoint files", "files", "checkpoint"),
    ("trigger p99 per minute (ms)", "p99_ms", "trigger"),
    ("group lag (records)", "lag", "group"),
)


def plot(csv_path: str, png: str) -> str:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    samples = read_rows(csv_path)
    by = series(samples)
    faults = [(s.t_s / 60, s.metric) for s in samples if s.subject == "fault"]
    fig, axes = plt.subplots(len(PANELS), 1, figsize=(11, 3 * len(PANELS)), sharex=True)
    for ax, (title, metric, only) in zip(axes, PANELS, strict=True):
        for (subject, m), points in sorted(by.items()):
            if m != metric or (only and only not in subject):
                continue
            ax.plot([t / 60 for t, _ in points], [v for _, v in points], marker=".", label=subject)
        for t, name in faults:
            ax.axvline(t, color="red", alpha=0.4, linestyle="--")
            ax.text(t, 1.0, name, transform=ax.get_xaxis_transform(), fontsize=7, color="red", va="top")
        ax.set_title(title, fontsize=10)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=7, loc="upper left", ncol=4)
    axes[-1].set_xlabel("minutes since the run started")
    fig.tight_layout()
    fig.savefig(png, dpi=80)
    plt.close(fig)
    return png


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m soak.plot", description=__doc__.split("\n\n")[0])
    p.add_argument("csv")
    p.add_argument("-o", "--out", help="PNG (default: soak.png beside the CSV)")
    args = p.parse_args(argv)
    print(plot(args.csv, args.out or os.path.join(os.path.dirname(os.path.abspath(args.csv)), "soak.png")))
    return 0


if __name__ == "__main__":
    sys.exit(main())
