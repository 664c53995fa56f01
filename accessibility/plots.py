"""Figures and tables for the book: seaborn/matplotlib, labelled axes, one function per figure.

Every ``plot_*`` function takes the data it draws (arrays, dataclasses or tables computed elsewhere
in the package), returns the matplotlib ``Figure`` and never saves or shows it; chapters show it
with :func:`glue_figure` and add the caption. :func:`format_table` prepares tables for display and
:func:`glue` stores values for the book's text.

Size policy: a figure is at most :data:`MAX_WIDTH` inches wide, the width of the book's content
column at the resolution it is drawn in, so it is never scaled down and its text keeps the size
it was drawn with; panels that do not fit side by side are stacked.
"""

from __future__ import annotations

import os

import matplotlib.pyplot as plt
import seaborn as sns

from accessibility import BOOK_BUILD_ENV

#: Widest figure (inches): the book's content column at the figures' resolution.
MAX_WIDTH = 6.4
#: Text cells of a table longer than this many characters may wrap (numbers and short labels never do).
PROSE_CELL = 24
#: Smallest legend text (points) that stays readable at that width.
MIN_LEGEND_POINTS = 8.0


def use_style() -> None:
    """The book's plotting style (seaborn whitegrid, readable sizes)."""
    sns.set_theme(style="whitegrid", context="notebook", palette="colorblind",
                  rc={"legend.fontsize": "small", "legend.title_fontsize": "small"})


def new_figure(width: float = MAX_WIDTH, height: float = 4.0):
    """A figure with one axes, in the book's style."""
    use_style()
    return plt.subplots(figsize=(width, height), layout="constrained")


def check_figure(fig) -> None:
    """Raise ValueError when ``fig`` breaks the size policy: wider than :data:`MAX_WIDTH` or with
    legend text smaller than :data:`MIN_LEGEND_POINTS`."""
    width = fig.get_figwidth()
    if width > MAX_WIDTH + 1e-9:
        raise ValueError(f"figure width must be at most {MAX_WIDTH} in (the content column), got {width:.2f}")
    legends = [ax.get_legend() for ax in fig.axes] + list(fig.legends)
    sizes = [t.get_fontsize() for leg in legends if leg is not None for t in leg.get_texts()]
    if sizes and min(sizes) < MIN_LEGEND_POINTS:
        raise ValueError(f"legend text must be at least {MIN_LEGEND_POINTS} pt, got {min(sizes):.1f}")


def glue(name: str, value, display: bool = True) -> None:
    """:func:`myst_nb.glue` for the book's ``{glue}`` roles; without myst-nb (a notebook opened on
    Colab) the value is only displayed, when ``display`` asks for it. A NumPy scalar is glued as the
    Python number it holds (a ``{glue:text}`` with a format spec cannot parse ``np.float64(...)``).
    """
    import numpy as np

    if isinstance(value, np.generic):
        value = value.item()
    try:
        from myst_nb import glue as myst_glue
    except ImportError:
        if display:
            from IPython.display import display as show

            show(value)
        return
    myst_glue(name, value, display=display)


def glue_all(values) -> None:
    """:func:`glue` each value of the mapping ``values`` under its name, none displayed (values the
    text quotes)."""
    for name, value in values.items():
        glue(name, value, display=False)


def glue_figure(name: str, fig) -> None:
    """Show ``fig`` exactly once and close it.

    In the book (:data:`BOOK_BUILD_ENV` set) the figure is only glued under ``name``, for the
    captioned ``{glue:figure}``; elsewhere (Jupyter, Colab, tests) it is the cell's output and
    glued as well. Closing it keeps the inline backend from showing it a second time. Raises
    ValueError when the figure breaks the size policy (:func:`check_figure`).
    """
    check_figure(fig)
    if os.environ.get(BOOK_BUILD_ENV) != "1":
        from IPython.display import display

        display(fig)
    glue(name, fig, display=False)
    plt.close(fig)


def format_table(table, decimals: int | dict = 2, *, default: int = 2):
    """A table (DataFrame or Series) ready to show, as a pandas ``Styler``.

    ``decimals``: one number of decimals for every float column, or a mapping column -> decimals
    (other float columns get ``default``). Columns whose values are all whole numbers show none
    (2774, not 2774.0); booleans read yes / no; missing values read "—" (never NaN). A named index
    (or a MultiIndex) becomes ordinary leading columns, so there is no extra header row for index
    names, and a default 0, 1, 2, ... index is not shown; long column labels may wrap after "_", "/"
    and spaces, cells are tightly padded and tables of more than six (eight) columns are set at 90 %
    (80 %) of the text size, so that they fit the column. Numbers never wrap; text cells longer than
    :data:`PROSE_CELL` characters do.

    >>> import pandas as pd
    >>> df = pd.DataFrame({"n": [2774.0, 3.0], "ratio_pg19": [22.474747, None]},
    ...                   index=pd.Index(["a", "b"], name="model"))
    >>> html = format_table(df).to_html()
    >>> "2774.0" in html, "2774" in html, "22.47" in html, "nan" in html.lower(), "—" in html
    (False, True, True, False, True)
    >>> prose = pd.DataFrame({"why": ["a reason of many more words"]})
    >>> html = format_table(prose).to_html()
    >>> "white-space: normal" in html, ">0</th>" in html
    (True, False)
    """
    import hashlib

    import numpy as np
    import pandas as pd

    df = table.to_frame() if isinstance(table, pd.Series) else table.copy()
    named = any(n is not None for n in df.index.names)
    if named:
        df = df.reset_index()
    hidden = named or (isinstance(df.index, pd.RangeIndex) and df.index.start == 0 and df.index.step == 1)
    formats = {}
    for column in df.columns:
        values = df[column]
        if pd.api.types.is_bool_dtype(values):
            formats[column] = lambda v: "yes" if v else "no"
        elif pd.api.types.is_integer_dtype(values):
            formats[column] = "{:d}"
        elif pd.api.types.is_float_dtype(values):
            finite = values[np.isfinite(values)]
            digits = decimals.get(column, default) if isinstance(decimals, dict) else decimals
            whole = len(finite) and bool((finite == finite.round()).all()) and finite.abs().max() < 1e15
            formats[column] = "{:.0f}" if whole else f"{{:.{digits}f}}"
    wrap = {ord("_"): "_\u200b", ord("/"): "/\u200b"}
    # ids from the content, not random: a rebuilt page or notebook twin stays the same
    styler = df.style.format(formats, na_rep="—").set_uuid(hashlib.sha1(df.to_csv().encode()).hexdigest()[:8])
    styler = styler.format_index(lambda label: str(label).translate(wrap), axis=1)
    if hidden:
        styler = styler.hide(axis="index")
    columns = df.shape[1] + (0 if hidden else df.index.nlevels)
    size = "0.8em" if columns > 8 else "0.9em" if columns > 6 else "1em"  # the wider, the smaller
    tight = [("padding", "0.25em 0.2em" if columns > 8 else "0.25em 0.3em"), ("font-size", size)]
    # white-space per column, not in a `td` rule: `#T_x td` outranks the per-cell rules of set_properties
    styler = styler.set_table_styles([{"selector": "th", "props": [("white-space", "normal"), *tight]},
                                      {"selector": "td", "props": tight}])
    prose = [c for c in df.columns if not pd.api.types.is_numeric_dtype(df[c])
             and df[c].astype(str).str.len().max() > PROSE_CELL]
    rest = [c for c in df.columns if c not in prose]
    if rest:
        styler = styler.set_properties(subset=rest, **{"white-space": "nowrap"})
    return styler.set_properties(subset=prose, **{"white-space": "normal"}) if prose else styler


# --- theory (bounds and corollaries) ---


def plot_levels_by_precision(r, log_levels_by_precision):
    """ln(levels per coordinate) against the support radius r, one line per precision convention.

    ``log_levels_by_precision`` maps a label to an array shaped like ``r`` (from
    :func:`accessibility.bounds.log_levels`). Relative conventions are flat; exact float counts grow.
    """
    fig, ax = new_figure()
    for label, values in log_levels_by_precision.items():
        ax.plot(r, values, label=label, linestyle="--" if label.startswith("exact") else "-")
    ax.set(xscale="log", xlabel="support radius r", ylabel="ln(levels per coordinate)")
    ax.legend(fontsize="small", ncol=2)
    return fig


def plot_fraction_bound(n, log10_bound_by_m, *, n_star_by_m=None):
    """Corollary 4.6: log10 of the accessible-fraction bound against the output length n.

    ``log10_bound_by_m`` maps m to an array shaped like ``n`` (from
    :func:`accessibility.bounds.log10_fraction_bound`); ``n_star_by_m`` marks C·m with dotted lines.
    """
    fig, ax = new_figure()
    for m, values in log10_bound_by_m.items():
        (line,) = ax.plot(n, values, label=f"m = {m}")
        if n_star_by_m is not None:
            ax.axvline(n_star_by_m[m], color=line.get_color(), linestyle=":", linewidth=1)
    ax.set(xlabel="output length n (tokens)", ylabel="log10 bound on the accessible fraction")
    ax.legend(fontsize="small")
    return fig


def _plain_log_ticks(ax, axis: str = "both") -> None:
    """Log-axis ticks at 1, 2 and 5 times powers of ten, written as plain numbers (300, not 3×10²)."""
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    for which in ("x", "y") if axis == "both" else (axis,):
        target = ax.xaxis if which == "x" else ax.yaxis
        target.set_major_locator(LogLocator(subs=(1.0, 2.0, 5.0)))
        target.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
        target.set_minor_formatter(NullFormatter())


def _place_labels(ax, labels, **text) -> None:
    """Annotate points ``[(label, (x, y)), ...]``, each at the first of a few offsets (right or left,
    then further above or below) where it overlaps no marker, no label placed before it and not the
    legend."""
    offsets = [((dx, dy), "left" if dx > 0 else "right")
               for dy in (4, -10, 14, -20, 24, -30) for dx in (4, -4)]
    from matplotlib.transforms import Bbox

    ax.figure.draw_without_rendering()  # settle the constrained layout first: positions are final
    renderer = ax.figure.canvas.get_renderer()
    legend = ax.get_legend()
    taken = [legend.get_window_extent(renderer)] if legend is not None else []
    taken += [t.get_window_extent(renderer) for t in ax.texts]  # labels placed by earlier calls
    taken += [Bbox.from_extents(x - 3.5, y - 3.5, x + 3.5, y + 3.5)  # the markers
              for points in ax.collections for x, y in ax.transData.transform(points.get_offsets())]
    for label, xy in sorted(labels, key=lambda item: -item[1][1]):
        for offset, ha in offsets:
            note = ax.annotate(label, xy, xytext=offset, textcoords="offset points", ha=ha, **text)
            box = note.get_window_extent(renderer)
            if not any(box.overlaps(other) for other in taken):
                taken.append(box)
                break
            note.remove()
        else:  # crowded everywhere: the first place, overlapping
            taken.append(ax.annotate(label, xy, xytext=offsets[0][0], textcoords="offset points",
                                     **text).get_window_extent(renderer))


def plot_theory_vs_experiment(theory):
    """Published experimental slope against the theoretical slope, ball bound and heuristic, per model.

    ``theory`` is :func:`accessibility.published.theory_table`; the experimental slope is the PG-19
    figure slope where published, else the authors' table slope. A thin line joins each model's ball
    bound and its cone-and-cells heuristic (the published conventions, not a bound); dotted lines
    mark ratios 1, 5, 10 and 20. Models whose points coincide (same C and slope, e.g. Pythia-1b and
    -1.4b) share one label.
    """
    import numpy as np

    fig, ax = new_figure(MAX_WIDTH, 4.6)
    experiment = theory["slope_pg19"].fillna(theory["slope_table"])
    for name in theory.index:
        ax.plot([theory.loc[name, "slope"], theory.loc[name, "slope_cone_cells"]], [experiment[name]] * 2,
                color="grey", linewidth=0.6)
    labels: dict[tuple, list[str]] = {}
    for name in theory.index:  # one label per point: coincident models are listed together
        key = (round(float(np.log(theory.loc[name, "slope"])), 2), round(float(np.log(experiment[name])), 2))
        labels.setdefault(key, []).append(name)
    for names in labels.values():
        ax.annotate(", ".join(names), (theory.loc[names[0], "slope"], experiment[names[0]]),
                    fontsize="x-small", xytext=(4, -3), textcoords="offset points")
    ax.scatter(theory["slope"], experiment, label="ball bound C (ln|V|)", zorder=3)
    ax.scatter(theory["slope_cone_cells"], experiment, marker="s",
               label="cone and cells heuristic (published)", zorder=3)
    x_lim = (theory["slope_cone_cells"].min() / 1.5, 1.5 * theory["slope"].max())
    y_lim = (experiment.min() / 1.5, 1.5 * experiment.max())
    for ratio in (1, 5, 10, 20):
        ax.plot(x_lim, [x / ratio for x in x_lim], color="grey", linewidth=0.7, linestyle=":")
        x_label = min(x_lim[1] / 1.25, y_lim[1] / 1.25 * ratio)
        if x_label / ratio > y_lim[0]:
            ax.annotate(f"{ratio}×", (x_label, x_label / ratio), fontsize="x-small", color="grey")
    ax.set(xscale="log", yscale="log", xlim=x_lim, ylim=y_lim,
           xlabel="theoretical slope C (tokens per vector)", ylabel="experimental slope (tokens per vector)")
    _plain_log_ticks(ax)
    ax.legend(loc="lower right")  # the upper left holds the "1×" label
    return fig


def plot_lower_bound_ratio(eps_over_r, ratio_by_label, *, marks=None, reference=None):
    """The construction's k/C against the precision, one line per vocabulary.

    ``eps_over_r`` holds values of the relative precision ε/r (the x axis, log scale); ``ratio_by_label``
    maps a label (a vocabulary) to k/C at each (from :func:`accessibility.construction.lower_bound_ratio`);
    ``marks`` maps a precision's name to its ε/r, drawn as a dotted vertical line; ``reference`` is an
    optional ``(label, ratios)`` drawn dashed in grey (e.g. one digit per token).
    """
    fig, ax = new_figure(MAX_WIDTH, 4.2)
    for label, ratios in ratio_by_label.items():
        ax.plot(eps_over_r, ratios, label=label, linewidth=1.2)
    if reference is not None:
        ax.plot(eps_over_r, reference[1], color="grey", linestyle="--", label=reference[0])
    for name, value in (marks or {}).items():
        ax.axvline(value, color="grey", linestyle=":", linewidth=1)
        ax.annotate(name, (value, 0.02), rotation=90, fontsize="small", ha="right", va="bottom",
                    xytext=(-2, 0), textcoords="offset points")
    ax.set(xscale="log", ylim=(0, 1.05), xlabel="precision ε / r", ylabel="k / C (attained / bound)")
    fig.legend(*ax.get_legend_handles_labels(), fontsize="small", loc="outside lower center", ncol=3,
               title="|V|")
    return fig


def plot_construction(certificates, *, measured=None):
    """The lower bound: lengths every sampled sequence of which greedy decoding reproduced, against m,
    next to the upper bound C·m.

    ``certificates`` are :class:`accessibility.construction.Certificate` (one per m, same model);
    ``measured`` optionally maps a label to ``(m values, n_50 values)`` of a cramming run to show beside.
    """
    fig, ax = new_figure()
    m, slope = [c.m for c in certificates], certificates[0].slope
    ax.plot(m, [slope * x for x in m], color="grey", linestyle="--", label="upper bound C·m (Corollary 4.6)")
    ok = [c for c in certificates if c.all_reproduced]
    ax.scatter([c.m for c in ok], [c.length for c in ok], zorder=3,
               label="construction: every sampled sequence of length k·m reproduced")
    for label, (ms, n50) in (measured or {}).items():
        ax.plot(ms, n50, marker="s", linestyle=":", label=label)
    ax.set(xlabel="prompt length m (vectors)", ylabel="sequence length n (tokens)", xticks=m)
    ax.legend(fontsize="small", loc="upper left")
    return fig


# --- geometry and decoder cells ---


def plot_support_growth(table):
    """Radii (left, log scale) and pairwise cosines (right) of the support against the prompt length ℓ.

    ``table`` is :meth:`accessibility.geometry.GeometryResult.table` (one row per ℓ; the pooled row
    ``all`` is skipped).
    """
    use_style()
    rows = table.drop(index="all", errors="ignore")
    ell = rows.index.astype(float)
    fig, (left, right) = plt.subplots(1, 2, figsize=(MAX_WIDTH, 3.4), layout="constrained")
    for key, label in (("r_inf", "$r_\\infty$ (max |coordinate|)"), ("r_2", "$r_2$"), ("r_1", "$r_1$")):
        left.plot(ell, rows[key], marker="o", label=label)
    left.set(yscale="log", ylabel="largest norm")
    left.legend(fontsize="small")
    right.plot(ell, rows["mean_cos"], marker="o", label="mean cosine")
    right.plot(ell, rows["min_cos"], marker="s", label="min cosine")
    right.set(ylabel="pairwise cosine")
    right.legend(fontsize="small")
    for ax in (left, right):  # powers of two, labelled as plain numbers
        ax.set_xscale("log", base=2)
        ax.set(xticks=list(ell), xticklabels=[f"{x:g}" for x in ell], xlabel="prompt length ℓ (tokens)")
        ax.xaxis.set_minor_locator(plt.NullLocator())
    return fig


def plot_sample_size_trend(trend, *, d_model: int | None = None):
    """Refined slopes C (left) and the smallest pairwise cosine (right) against the pooled sample count.

    ``trend`` is :func:`accessibility.geometry.sample_size_trend` (one row per doubling). The ball's C,
    which a relative precision makes independent of the samples, is the dashed reference; ``d_model``
    marks the counts d (below it the ellipsoid is flat) and 10·d.
    """
    use_style()
    n = trend.index.astype(float)
    fig, (left, right) = plt.subplots(1, 2, figsize=(MAX_WIDTH, 3.4), layout="constrained")
    for key, marker in (("box", "s"), ("cone", "^"), ("ellipsoid", "o")):
        left.plot(n, trend[key], marker=marker, label=key)
    left.axhline(float(trend["ball"].iloc[-1]), color="grey", linestyle="--", label="ball")
    left.set(ylabel="slope C (tokens per vector)")
    right.plot(n, trend["min_cos"], marker="s", color="C3", label="min cosine")
    right.set(ylabel="smallest pairwise cosine")
    for ax in (left, right):
        ax.set_xscale("log", base=2)
        ax.set(xticks=list(n), xticklabels=[f"{x:g}" for x in n], xlabel="pooled samples")
        ax.xaxis.set_minor_locator(plt.NullLocator())
        ax.tick_params(axis="x", labelrotation=45)
        if d_model is not None:
            for x, text in ((d_model, "d"), (10 * d_model, "10·d")):
                if n.min() <= x <= n.max():
                    ax.axvline(x, color="grey", linewidth=0.8, linestyle=":")
                    ax.annotate(text, (x, 1), xycoords=("data", "axes fraction"), ha="left", va="top",
                                fontsize="small", color="grey")
        ax.legend(fontsize="small")
    return fig


def plot_box_widths(widths, r_inf):
    """Sorted per-coordinate widths w_i of the box, as a fraction of the ball's 2r (log scale).

    Each coordinate contributes ln(1 + w_i/ε) to the box numerator instead of ln(1 + 2r/ε).
    """
    import numpy as np

    fig, ax = new_figure(6.4, 3.4)
    ratio = np.sort(np.asarray(widths, dtype=float))[::-1] / (2 * r_inf)
    ax.plot(np.arange(1, ratio.size + 1), ratio)
    ax.axhline(1.0, color="grey", linestyle=":", linewidth=1)
    ax.set(yscale="log", xlabel="coordinate (sorted by width)", ylabel="width $w_i$ / $2r_\\infty$")
    return fig


def plot_slopes(slopes: dict, *, reference: dict | None = None):
    """Bar chart of slope bounds C (tokens per prompt vector), one bar per support or refinement.

    ``slopes`` maps a label to a value (None is skipped); ``reference`` adds dotted horizontal lines
    (e.g. a measured cramming slope).
    """
    fig, ax = new_figure(6.4, 3.4)
    shown = {k: v for k, v in slopes.items() if v is not None}
    ax.bar(list(shown), list(shown.values()), color=sns.color_palette()[: len(shown)])
    for label, value in (reference or {}).items():
        ax.axhline(value, color="black", linestyle=":", linewidth=1)
        ax.annotate(label, (0, value), xytext=(2, 3), textcoords="offset points", fontsize="small")
    ax.set(ylabel="slope bound C (tokens per vector)")
    ax.tick_params(axis="x", labelrotation=20)
    return fig


def plot_partitions(partitions, *, points=None, titles=None):
    """Side-by-side 2-D pictures of decoder cells (:class:`accessibility.cells.Partition2D`).

    Tokens are coloured by the area they own across all panels (largest first, a cycle of 20
    colours), so the same token has the same colour in every panel; ``points`` (shape (n, 2)) are
    sample projections drawn on top.
    """
    import numpy as np
    from matplotlib.colors import ListedColormap

    use_style()
    fig, axes = plt.subplots(1, len(partitions), figsize=(MAX_WIDTH, MAX_WIDTH / len(partitions) + 0.7),
                             layout="constrained",
                             squeeze=False)
    ids, area = np.unique(np.concatenate([p.tokens.ravel() for p in partitions]), return_counts=True)
    rank = {int(t): i for i, t in enumerate(ids[np.argsort(-area, kind="stable")])}
    cmap = ListedColormap(sns.color_palette("tab20", 20))
    for k, (ax, part) in enumerate(zip(axes[0], partitions)):
        colour = np.vectorize(lambda t: rank[int(t)] % 20)(part.tokens)
        ax.pcolormesh(part.a, part.b, colour, cmap=cmap, vmin=0, vmax=19, shading="nearest")
        if points is not None:
            ax.scatter(points[:, 0], points[:, 1], s=3, color="black", alpha=0.5, linewidths=0)
        ax.set(xlabel="principal component 1", ylabel="principal component 2" if k == 0 else None,
               title=(titles[k] if titles else part.assign) + f" ({len(np.unique(part.tokens))} tokens)")
        ax.set_aspect("equal")
    return fig


def plot_share_distribution(shares, *, samples: int | None = None, labels=None):
    """Cell shares sorted from largest (rank 1) on log-log axes, with the uniform share 1/|V|.

    ``shares`` is one array or a mapping label -> array; ``samples`` draws the resolution floor 1/N.
    """
    import numpy as np

    fig, ax = new_figure(6.4, 3.8)
    series = shares if isinstance(shares, dict) else {"shares": shares}
    for label, p in series.items():
        p = np.sort(np.asarray(p, dtype=float))[::-1]
        p = p[p > 0]
        ax.plot(np.arange(1, p.size + 1), p, label=label)
    size = np.asarray(next(iter(series.values()))).size
    ax.axhline(1 / size, color="grey", linestyle="--", linewidth=1, label="uniform 1/|V|")
    if samples:
        ax.axhline(1 / samples, color="grey", linestyle=":", linewidth=1, label="floor 1/N")
    ax.set(xscale="log", yscale="log", xlabel="token rank", ylabel="cell share $p_v$")
    ax.legend(fontsize="small")
    return fig


def plot_entropy_vs_samples(history, *, log_vocab: float):
    """H against ln N (Monte-Carlo samples), with ln|V| (uniform cells) and ln N (the floor) as lines.

    ``history`` is :attr:`accessibility.cells.CellShares.history`, or a mapping label -> history.
    """
    import numpy as np

    fig, ax = new_figure(6.4, 3.6)
    series = history if isinstance(history, dict) else {"H": history}
    for label, hist in series.items():
        ax.plot([h["log_samples"] for h in hist], [h["entropy_H"] for h in hist], marker="o", label=label)
    logn = np.array([h["log_samples"] for hist in series.values() for h in hist])
    ax.axhline(log_vocab, color="grey", linestyle="--", linewidth=1, label="ln|V|")
    ax.plot([logn.min(), logn.max()], [logn.min(), logn.max()], color="grey", linestyle=":", linewidth=1,
            label="ln N")
    ax.set(xlabel="ln N (Monte-Carlo samples)", ylabel="H (nats)")
    ax.legend(fontsize="small")
    return fig


# --- cramming ---


def plot_cram_setup(m: int = 2, n: int = 6, prefix: bool = True):
    """Schematic of cramming: ``[prefix] [mem]_1..m t_1..t_{n-1}`` in, ``t_2..t_n`` predicted."""
    import matplotlib.patches as patches

    fig, ax = new_figure(MAX_WIDTH, 2.3)
    cells = ([("BOS", "0.85")] if prefix else []) + [(f"mem$_{i + 1}$", "#f4a582") for i in range(m)]
    cells += [(f"$t_{j}$", "#92c5de") for j in range(1, n)]
    first_pred = len(cells) - (n - 1)
    for i, (text, color) in enumerate(cells):
        ax.add_patch(patches.FancyBboxPatch((i, 0), 0.86, 0.7, boxstyle="round,pad=0.03", fc=color, ec="k"))
        ax.text(i + 0.43, 0.35, text, ha="center", va="center")
        if i >= first_pred:
            j = i - first_pred + 2
            ax.annotate("", (i + 0.43, 1.35), (i + 0.43, 0.75), arrowprops=dict(arrowstyle="->"))
            ax.text(i + 0.43, 1.6, f"$t_{{{j}}}$?", ha="center", va="center")
    ax.text(len(cells) / 2, -0.45, "frozen causal LM; only the mem vectors are trained;\nloss and "
            "exact-match check on $t_2..t_n$", ha="center", va="top", fontsize=9)
    ax.set(xlim=(-0.2, len(cells) + 0.1), ylim=(-0.7, 1.9))
    ax.axis("off")
    return fig


def plot_accessibility_curves(capacities_by_m, *, points=None, n_max=None):
    """Accessibility(n), the fraction of targets with capacity >= n, one step curve per m.

    ``points`` optionally maps m to ``(ns, accessibility)`` of the published per-point protocol,
    drawn as markers on the same axes.
    """
    import numpy as np

    from accessibility.law import accessibility_curve

    fig, ax = new_figure()
    top = n_max or max(max(c) for c in capacities_by_m.values()) + 2
    ns = np.arange(1, top + 1)
    colors = sns.color_palette("colorblind", len(capacities_by_m))
    for color, (m, caps) in zip(colors, sorted(capacities_by_m.items())):
        ax.step(ns, accessibility_curve(caps, ns), where="post", color=color,
                label=f"m = {m} (capacity search)")
        if points and m in points:
            ax.plot(*points[m], "o", color=color, mfc="none", label=f"m = {m} (fixed-n runs)")
    ax.axhline(0.5, color="0.5", lw=0.8, ls=":")
    ax.set(xlabel="target length n (tokens)", ylabel="accessibility(n)", ylim=(-0.03, 1.03))
    fig.legend(loc="outside lower center", ncol=2 if len(ax.get_lines()) > 4 else 4)  # never over a curve
    return fig


def plot_linear_law(summary, *, label: str = "measured", published: dict | None = None):
    """n_50(m) with its confidence interval, the least-squares line and the line through 0.

    ``summary`` is a :class:`accessibility.law.CramSummary` (:func:`accessibility.law.summarize`, or
    ``CramSummary.from_json`` of a saved run's summary). ``published`` optionally maps m to the
    published protocol's n_50 on the same targets, drawn as open squares.
    """
    import numpy as np

    fig, ax = new_figure()
    ms = np.array(summary.ms)
    y = np.array([p.n50 for p in summary.points])
    ci = np.array([(p.low, p.high) for p in summary.points], dtype=float)
    ci = np.where(np.isfinite(ci), ci, y[:, None])
    ax.errorbar(ms, y, yerr=[y - ci[:, 0], ci[:, 1] - y], fmt="o", capsize=3, label=f"{label} n$_{{50}}$")
    x = np.linspace(0, ms.max() * 1.05, 50)
    if summary.fit is not None:
        fit, origin = summary.fit, summary.fit_origin
        r2 = "undefined" if fit.r2 is None else f"{fit.r2:.3f}"
        sign = "−" if fit.intercept < 0 else "+"
        line = f"fit: {fit.slope:.2f} m {sign} {abs(fit.intercept):.2f} (R² = {r2}, {fit.n_points} points)"
        apart = np.abs(fit.slope * x + fit.intercept - origin.slope * x).max() > 0.05 * max(y.max(), 1e-9)
        if not apart:  # the two lines would be drawn on top of each other: one line, both fits named
            line += f"\nthrough 0: {origin.slope:.2f} m"
        ax.plot(x, fit.slope * x + fit.intercept, label=line)
        if apart:
            ax.plot(x, origin.slope * x, ls="--", label=f"through 0: {origin.slope:.2f} m")
    if published:
        ax.plot(list(published), list(published.values()), "s", mfc="none", ms=9,
                label="published protocol n$_{50}$ (logistic)")
    ax.set(xlabel="m ([mem] vectors)", ylabel="n$_{50}$ (tokens)", xlim=(0, None), ylim=(0, None))
    ax.legend(loc="upper left")
    return fig


def plot_slopes_vs_theory(rows):
    """Measured cramming slope against the Corollary 4.6 slope C, log-log, with lines of constant ratio.

    ``rows``: a DataFrame with columns ``label``, ``slope_theory``, ``slope``, ``source``
    ("published" or "this book") and ``kind`` (text or random). This book's points are labelled;
    each of the paper's models is labelled once, in grey, above a line joining its text and random
    slopes.
    """
    import numpy as np

    fig, ax = new_figure(6.4, 4.6)
    colors = dict(zip(("text", "random"), sns.color_palette("colorblind", 2)))
    for (source, kind), part in rows.groupby(["source", "kind"]):
        filled = source != "published"
        ax.scatter(part["slope_theory"], part["slope"], marker="o" if filled else "D", s=40,
                   facecolors=colors[kind] if filled else "none", edgecolors=colors[kind],
                   label=f"{source}, {kind}")
    grey = []
    for label, part in rows[rows["source"] == "published"].groupby("label"):
        x, low, high = part["slope_theory"].iloc[0], part["slope"].min(), part["slope"].max()
        ax.plot([x, x], [low, high], color="0.8", lw=0.8, zorder=1)  # a model's text and random slopes
        grey.append((label, (x, high)))
    x = np.geomspace(rows["slope_theory"].min() / 2, rows["slope_theory"].max() * 2, 10)
    for ratio in (1, 10, 100):
        ax.plot(x, x / ratio, color="0.6", lw=0.7, ls=":")
        ax.text(x[-1], x[-1] / ratio, f"ratio {ratio}", fontsize=7, ha="right", va="bottom", color="0.4")
    ax.set(xscale="log", yscale="log", xlabel="Corollary 4.6 slope C (tokens per vector, fp16 relative ε)",
           ylabel="measured slope of n$_{50}$(m)", ylim=(rows["slope"].min() / 3, x[-1] * 1.5))
    _plain_log_ticks(ax)
    ax.legend(fontsize=8, loc="upper left")
    ours = rows[rows["source"] != "published"]
    _place_labels(ax, [(r["label"], (r["slope_theory"], r["slope"])) for _, r in ours.iterrows()], fontsize=8)
    _place_labels(ax, grey, fontsize=7, color="0.35")
    return fig


def plot_slopes_overview(table):
    """Every slope of :func:`accessibility.compare.slopes_table` on one log axis, one row per model:
    proven bounds (filled markers), heuristic refinements (open markers) and measured cramming slopes
    (crosses), so the gap between theory and experiment reads along each row."""
    import numpy as np

    from accessibility.compare import BOUNDS, MEASURED

    fig, ax = new_figure(MAX_WIDTH, 0.32 * len(table) + 1.6)
    y = np.arange(len(table))[::-1]
    palette = sns.color_palette("colorblind", len(BOUNDS) + len(MEASURED))
    markers = dict(zip((*BOUNDS, *MEASURED), ("o", "s", "^", "D", "v", "P", "X", "x", "+")))
    for color, column in zip(palette, (*BOUNDS, *MEASURED)):
        values = table[column].to_numpy(float)
        if not np.isfinite(values).any():
            continue
        proven = BOUNDS.get(column) == "proven"
        measured = column in MEASURED
        status = "measured" if measured else BOUNDS[column]
        marker = markers[column]
        colors = ({"color": color} if marker in ("x", "+")       # line markers have no face
                  else {"facecolors": color if (proven or measured) else "none", "edgecolors": color})
        ax.scatter(values, y, marker=marker, s=36, label=f"{column} ({status})", linewidths=1.2, zorder=3,
                   **colors)
    labels = [f"{name} ({source})" for name, source in zip(table.index, table["source"])]
    ax.set(xscale="log", yticks=y, yticklabels=labels,
           xlabel="slope (tokens per [mem] vector; bounds at fp16 relative precision)")
    ax.grid(axis="y", color="0.92")
    fig.legend(loc="outside lower center", ncol=3)
    return fig


def plot_n50_side_by_side(published: dict, ours: dict):
    """n_50(m) curves, the paper's (top, from the shipped table) and ours (bottom).

    Each argument maps a label ``"model (kind)"`` to ``(ms, n50s)``. One colour per model across
    both panels; text targets (PG-19, text) are solid lines with circles, random ones dashed with
    squares.
    """
    use_style()
    fig, axes = plt.subplots(2, 1, figsize=(MAX_WIDTH, 6.6), layout="constrained")
    split = {label: (label.rsplit(" (", 1) + [""])[:2] for label in [*published, *ours]}
    models = list(dict.fromkeys(model for model, _ in split.values()))
    colors = dict(zip(models, sns.color_palette("colorblind", len(models))))
    for ax, series, title in ((axes[0], published, "published (GPU, the paper's pipeline)"),
                              (axes[1], ours, "this book (CPU)")):
        for label, (ms, values) in series.items():
            model, kind = split[label]
            text = kind.rstrip(")") in ("PG-19", "text")
            ax.plot(ms, values, "o-" if text else "s--", color=colors[model], label=label)
        top = max(max(values) for _, values in series.values())
        right = max(max(ms) for ms, _ in series.values())
        ax.set(xlabel="m ([mem] vectors)", ylabel="n$_{50}$ (tokens)", title=title, xlim=(0, 1.05 * right),
               ylim=(0, 1.1 * top))
        ax.legend(loc="upper left")
    return fig


# --- copying ---


def plot_copy_accuracy(evals: dict, train_lengths, *, char: bool = False):
    """Exact-match string accuracy against string length, one curve per model, training range shaded.

    ``evals`` maps a label to a :class:`~accessibility.copying.CopyEval` (its Clopper-Pearson interval
    is drawn as a band); with ``char`` the character accuracy is drawn dashed in the same colour.
    """
    fig, ax = new_figure()
    low, high = train_lengths
    ax.axvspan(low, high, color="0.9", zorder=0, label=f"training lengths {low}..{high}")
    ax.axvline(1.5 * high, color="0.5", lw=0.8, ls=":")
    colors = sns.color_palette("colorblind", len(evals))
    for color, (label, e) in zip(colors, evals.items()):
        ax.plot(e.lengths, e.accuracy, "o-", color=color, ms=4, label=label)
        ax.fill_between(e.lengths, e.ci_low, e.ci_high, color=color, alpha=0.2, lw=0)
        if char:
            ax.plot(e.lengths, e.char_accuracy, "--", color=color, lw=1)
    if char:
        ax.plot([], [], "--", color="0.3", lw=1, label="character accuracy (dashed)")
    ax.set(xlabel="string length ℓ (letters)", ylabel="exact-match string accuracy", ylim=(-0.03, 1.03),
           xlim=(0, None))
    ax.legend(fontsize=8)
    return fig


def plot_copy_positions(e, lengths, train_max: int):
    """Teacher-forced accuracy at each position of the copy, for a few string lengths of one model.

    ``e`` is a :class:`~accessibility.copying.CopyEval`; position ℓ + 1 is the EOS. The dotted line
    marks the training maximum; 1/26 is chance for a letter.
    """
    fig, ax = new_figure()
    for length in lengths:
        acc = e.position_accuracy[list(e.lengths).index(length)]
        ax.plot(range(1, len(acc) + 1), acc, ".-", ms=3, label=f"ℓ = {length}")
    ax.axvline(train_max, color="0.5", lw=0.8, ls=":")
    ax.axhline(1 / 26, color="0.5", lw=0.8, ls="--")
    ax.set(xlabel="position in the copy (ℓ + 1 is the EOS)", ylabel="accuracy given the true prefix",
           ylim=(-0.03, 1.03))
    ax.legend(fontsize=8)
    return fig


def plot_copy_losses(logs: dict, *, smooth: int = 100):
    """Training loss against step, one curve per model (running mean over ``smooth`` steps, log
    scale); a dot where the stopping rule was met, a cross where the step budget ran out.

    ``logs`` maps a label to a :class:`~accessibility.copying.TrainLog`.
    """
    import numpy as np

    fig, ax = new_figure()
    colors = sns.color_palette("colorblind", len(logs))
    for color, (label, log) in zip(colors, logs.items()):
        losses = np.asarray(log.losses, dtype=float)
        k = max(1, min(smooth, losses.size))
        mean = np.convolve(losses, np.ones(k) / k, mode="valid")
        steps = np.arange(k, losses.size + 1)
        ax.plot(steps, mean, color=color, lw=1.2, label=label)
        ax.plot(steps[-1], mean[-1], "o" if log.rule_met else "x", color=color, ms=6)
    ax.plot([], [], "o", color="0.3", label="stopping rule met")
    ax.plot([], [], "x", color="0.3", label="step budget spent")
    ax.set(xlabel="training step", ylabel=f"training loss (mean of {smooth} steps)", yscale="log")
    ax.legend(fontsize=8)
    return fig
