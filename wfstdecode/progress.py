"""Per-stage progress lines of a graph build: shared by the CLI, the demo and the recipes, and
kept free of heavy imports so that ``wfstdecode info`` can print a build.json's stages too."""

from __future__ import annotations


def print_stage(info: dict, file=None) -> None:
    """One line per finished build stage: sizes, seconds, peak memory and any extra figures, to
    ``file`` (stdout by default)."""
    extra = {
        k: v
        for k, v in info.items()
        if k not in ("stage", "states", "arcs", "seconds", "peak_rss_mb")
    }
    print(f"  {info['stage']:<14} {info['states']:>10,} states {info['arcs']:>11,} arcs "
          f"{info['seconds']:8.2f} s  peak {info['peak_rss_mb']:8.1f} MB  {extra or ''}",
          file=file, flush=True)  # fmt: skip
