"""`loadgen report RESULTS… --plots DIR`: the comparison table, and PNG plots of it (matplotlib, no display).

    output_tok_s.png        aggregate output tok/s vs concurrency, one line per configuration, a panel per
                            prompt length
    request_tok_s.png       per-request decode tok/s (mean) vs concurrency, same layout
    accept_length.png       accept length vs draft budget, one line per top-k × prompt length (mean over the
                            concurrencies, bars from the lowest to the highest cell)
    tokens_per_joule.png    output tokens per joule vs concurrency (only when some input has power)

Failed cells are left out of every plot, never drawn as zero. A plot without data is not written; the
report says which and why.
"""

from __future__ import annotations

import os

from loadgen.results.compare import Run

BUDGET_KEYS = ("speculative_ddtree_budget", "speculative_num_draft_tokens")
BUDGET_PARAMS = ("budget", "ddtree_budget", "num_draft_tokens")
TOPK_KEYS = ("speculative_eagle_topk",)
TOPK_PARAMS = ("topk", "top_k")


def _ok(cell: dict) -> bool:
    return cell.get("status", "ok") == "ok"


def _number(*candidates):
    for v in candidates:
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            return float(v)
        if isinstance(v, str):
            try:
                return float(v)
            except ValueError:
                continue
    return None


def budget_of(run: Run) -> float | None:
    """The draft budget measured: the server's own report first, else the sweep parameter."""
    si = run.server_info
    return _number(si.get(BUDGET_KEYS[0]), *(run.params.get(k) for k in BUDGET_PARAMS),
                   si.get(BUDGET_KEYS[1]))


def topk_of(run: Run) -> float | None:
    return _number(*(run.server_info.get(k) for k in TOPK_KEYS), *(run.params.get(k) for k in TOPK_PARAMS))


def series_vs_concurrency(runs: list[Run], get) -> dict[int, dict[str, list[tuple[int, float]]]]:
    """{context: {config: [(concurrency, value), …]}} over ok cells with a value (pure, for tests)."""
    out: dict[int, dict[str, list[tuple[int, float]]]] = {}
    for r in runs:
        for (ctx, conc, rate), cell in sorted(r.cells.items()):
            if rate:
                continue  # open-loop cells have no concurrency axis
            v = get(cell) if _ok(cell) else None
            if v is not None:
                out.setdefault(ctx, {}).setdefault(r.name, []).append((conc, v))
    return out


def accept_series(runs: list[Run]) -> dict[str, list[tuple[float, float, float, float]]]:
    """{"top-k K, prompt N": [(budget, mean, low, high), …]} of accept length over each run's ok cells."""
    groups: dict[str, list[tuple[float, float, float, float]]] = {}
    for r in runs:
        budget = budget_of(r)
        if budget is None:
            continue
        topk = topk_of(r)
        by_ctx: dict[int, list[float]] = {}
        for (ctx, _, _), cell in r.cells.items():
            v = (cell.get("accept_length") or {}).get("value") if _ok(cell) else None
            if v is not None:
                by_ctx.setdefault(ctx, []).append(v)
        for ctx, values in by_ctx.items():
            label = (f"top-k {topk:g}, " if topk is not None else "") + f"prompt {ctx}"
            groups.setdefault(label, []).append((budget, sum(values) / len(values), min(values), max(values)))
    return {label: sorted(pts) for label, pts in sorted(groups.items(), key=lambda kv: _label_key(kv[0]))}


def _label_key(label: str) -> tuple:
    """'top-k 8, prompt 1024' sorts by its numbers (8, 1024), not as text."""
    return tuple(float(w.rstrip(",")) for w in label.split() if w.rstrip(",").replace(".", "", 1).isdigit())


def _colors(runs: list[Run]) -> dict[str, str]:
    import matplotlib
    cmap = matplotlib.colormaps["tab10" if len(runs) <= 10 else "tab20"]
    return {r.name: cmap(i % cmap.N) for i, r in enumerate(runs)}


def _plot_vs_concurrency(series, colors, ylabel: str, title: str, path: str) -> None:
    import matplotlib.pyplot as plt
    contexts = sorted(series)
    fig, axes = plt.subplots(1, len(contexts), figsize=(5.6 * len(contexts) + 1.8, 4.4), squeeze=False,
                             layout="constrained")
    handles = {}
    for ax, ctx in zip(axes[0], contexts):
        concs = sorted({c for pts in series[ctx].values() for c, _ in pts})
        for name, pts in series[ctx].items():
            handles[name], = ax.plot([c for c, _ in pts], [v for _, v in pts], marker="o", label=name,
                                     color=colors[name])
        if len(concs) > 2 and concs[-1] / max(concs[0], 1) >= 8:
            ax.set_xscale("log", base=2)
        ax.set_xticks(concs, [str(c) for c in concs])
        ax.minorticks_off()
        ax.set_title(f"prompt {ctx} tokens")
        ax.set_xlabel("concurrency")
        ax.set_ylabel(ylabel)
        ax.set_ylim(bottom=0)
        ax.grid(True, alpha=0.3)
    # one legend for the figure: a configuration missing from a panel (failed cells) is still named
    order = [n for n in colors if n in handles]
    fig.legend([handles[n] for n in order], order, loc="outside right upper", fontsize=8)
    fig.suptitle(title)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _plot_accept(series, path: str, source: str) -> None:
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(6.4, 4.4))
    for label, pts in series.items():
        xs = [p[0] for p in pts]
        ys = [p[1] for p in pts]
        err = [[p[1] - p[2] for p in pts], [p[3] - p[1] for p in pts]]
        ax.errorbar(xs, ys, yerr=err, marker="o", capsize=3, label=label)
    budgets = sorted({p[0] for pts in series.values() for p in pts})
    if len(budgets) > 2 and budgets[-1] / max(budgets[0], 1) >= 4:
        ax.set_xscale("log", base=2)
    ax.set_xticks(budgets, [f"{b:g}" for b in budgets])
    ax.minorticks_off()
    ax.set_xlabel("draft budget")
    ax.set_ylabel(f"accept length (tokens per verify step; {source})")
    ax.set_ylim(bottom=0)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    ax.set_title("Accept length vs draft budget\n(mean over the concurrencies; bars: lowest to highest cell)",
                 fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def write_plots(runs: list[Run], out_dir: str) -> tuple[list[str], list[str]]:
    """Write the PNGs; returns (files written, notes on plots left out)."""
    import matplotlib
    matplotlib.use("Agg")
    os.makedirs(out_dir, exist_ok=True)
    colors = _colors(runs)
    written, notes = [], []
    simple = [
        ("output_tok_s.png", lambda c: c.get("output_tok_s"), "output tok/s (all requests)",
         "Aggregate output throughput vs concurrency"),
        ("request_tok_s.png", lambda c: (c.get("request_tok_s") or {}).get("mean"),
         "tok/s per request (mean)", "Per-request decode speed vs concurrency"),
        ("tokens_per_joule.png", lambda c: (c.get("power") or {}).get("output_tokens_per_j"),
         "output tokens per joule", "Energy efficiency vs concurrency"),
    ]
    for name, get, ylabel, title in simple:
        series = series_vs_concurrency(runs, get)
        if not series:
            why = ("no cell has power data (measure with --dcgm URL or --nvml)" if "joule" in name
                   else "no successful cell")
            notes.append(f"{name} not written: {why}")
            continue
        path = os.path.join(out_dir, name)
        _plot_vs_concurrency(series, colors, ylabel, title, path)
        written.append(path)
    acc = accept_series(runs)
    if acc:
        sources = {(c.get("accept_length") or {}).get("source") for r in runs for c in r.cells.values()}
        sources.discard(None)
        path = os.path.join(out_dir, "accept_length.png")
        _plot_accept(acc, path, "/".join(sorted(sources)) or "unknown source")
        written.append(path)
    else:
        notes.append("accept_length.png not written: no configuration with both a known draft budget (server "
                     "info speculative_ddtree_budget or a 'budget' parameter) and an accept length")
    return written, notes


def plots_available() -> bool:
    """Whether matplotlib (the `plots` extra) is installed."""
    try:
        import matplotlib  # noqa: F401  (optional: only the plots need it)
    except ImportError:
        return False
    return True
