"""The book's figure and table helpers: figures shown once and within the column, tables readable."""

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402

from accessibility import plots  # noqa: E402


def test_format_table_reads_as_a_table():
    df = pd.DataFrame({"n": [2774.0, 3.0], "count": [1, 2], "ratio_pg19": [22.474747, np.nan],
                       "met": [True, False], "name": ["a", None]},
                      index=pd.MultiIndex.from_tuples([("toy", "random"), ("toy", "text")],
                                                      names=["model", "kind"]))
    html = plots.format_table(df, {"ratio_pg19": 1}).to_html()
    from bs4 import BeautifulSoup

    cells = [td.get_text().strip() for td in BeautifulSoup(html, "html.parser").find_all("td")]
    assert cells == ["toy", "random", "2774", "1", "22.5", "yes", "a",
                     "toy", "text", "3", "2", "—", "no", "—"]
    assert "index_name" not in html  # no extra header row for the index names
    assert "ratio_\u200bpg19" in html  # long labels may wrap after "_"


def test_format_table_lets_prose_wrap_and_keeps_numbers_on_one_line():
    import re

    df = pd.DataFrame({"why": ["a reason of many more words than fit", "short"], "n": [1.5, 2.0]})
    html = plots.format_table(df).to_html()
    # no table-wide td rule decides white-space: it would outrank the per-cell rules below it
    assert not re.search(r"td\s*\{[^}]*white-space", html)
    rules = re.findall(r"([^{}]+)\{([^}]*)\}", html.split("</style>")[0])
    wrap = {cell: props for selectors, props in rules
            for cell in ("row0_col0", "row0_col1") if cell in selectors}
    assert "white-space: normal" in wrap["row0_col0"] and "white-space: nowrap" in wrap["row0_col1"]


def test_format_table_keeps_an_unnamed_index_and_takes_series():
    html = plots.format_table(pd.Series({"d_model": 576, "BOS": None}, dtype=object, name="toy")).to_html()
    assert "d_model" in html and "—" in html and "None" not in html and "dtype" not in html


def test_check_figure_enforces_width_and_legend_size():
    fig, ax = plots.new_figure()
    ax.plot([0, 1], label="a")
    ax.legend()
    plots.check_figure(fig)
    fig.set_figwidth(9.6)
    with pytest.raises(ValueError, match="figure width must be at most 6.4 in"):
        plots.check_figure(fig)
    fig.set_figwidth(6.4)
    ax.legend(fontsize=5)
    with pytest.raises(ValueError, match="legend text must be at least 8.0 pt"):
        plots.check_figure(fig)
    plt.close(fig)


@pytest.mark.parametrize("in_book", [False, True])
def test_glue_figure_shows_the_figure_once_and_closes_it(in_book, monkeypatch):
    import IPython.display

    shown, glued = [], []
    monkeypatch.setattr(IPython.display, "display", lambda obj, **kw: shown.append(obj))
    monkeypatch.setattr(plots, "glue", lambda name, value, display=True: glued.append((name, value, display)))
    if in_book:
        monkeypatch.setenv(plots.BOOK_BUILD_ENV, "1")
    else:
        monkeypatch.delenv(plots.BOOK_BUILD_ENV, raising=False)
    fig, ax = plots.new_figure()
    plots.glue_figure("fig-x", fig)
    assert shown == ([] if in_book else [fig])  # the book shows it through {glue:figure} only
    assert glued == [("fig-x", fig, False)]
    assert not plt.fignum_exists(fig.number)  # the inline backend will not show it again


def test_glue_without_myst_nb_displays_only_when_asked(monkeypatch):
    import builtins

    import IPython.display

    real_import = builtins.__import__

    def no_myst_nb(name, *args, **kwargs):
        if name == "myst_nb":
            raise ImportError("no myst_nb on Colab")
        return real_import(name, *args, **kwargs)

    shown = []
    monkeypatch.setattr(builtins, "__import__", no_myst_nb)
    monkeypatch.setattr(IPython.display, "display", lambda obj, **kw: shown.append(obj))
    plots.glue("x", 1.5, display=False)
    plots.glue("y", 2.5)
    assert shown == [2.5]


def test_glue_passes_numpy_scalars_as_python_numbers(monkeypatch):
    import myst_nb

    glued = []
    monkeypatch.setattr(myst_nb, "glue", lambda name, value, display=True: glued.append(value))
    plots.glue("x", np.float64(7.703125), display=False)
    plots.glue("n", np.int64(3), display=False)
    plots.glue("s", "text", display=False)
    assert glued == [7.703125, 3, "text"] and [type(v) for v in glued] == [float, int, str]


def test_linear_law_legend_writes_a_negative_intercept_with_a_minus():
    from accessibility import law

    summary = law.summarize({1: [3, 4, 5], 2: [8, 9, 10], 4: [17, 18, 19]}, d_model=64, vocab_size=16,
                            n_boot=20)  # n_50 = 4, 9, 18: least squares 4.64 m - 0.50
    fig = plots.plot_linear_law(summary)
    labels = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert any("4.64 m − 0.50" in label for label in labels) and not any("+ -" in label for label in labels)
    plt.close(fig)


def test_lower_bound_ratio_figure_has_one_line_per_vocabulary_and_labelled_axes():
    from accessibility import construction

    eps_over_r = np.logspace(-8, 0, 40)
    ratios = {str(v): [construction.lower_bound_ratio(vocab_size=v, r=1.0, eps=x) for x in eps_over_r]
              for v in (50304, 262144)}
    fig = plots.plot_lower_bound_ratio(eps_over_r, ratios, marks={"fp16": 2.0**-11},
                                       reference=("q = 1", ratios["50304"]))
    ax = fig.axes[0]
    assert [line.get_label() for line in ax.get_lines()[:3]] == ["50304", "262144", "q = 1"] and fig.legends
    assert ax.get_xscale() == "log" and "ε / r" in ax.get_xlabel() and "k / C" in ax.get_ylabel()
    assert all(0 < r <= 1 for values in ratios.values() for r in values)
    plots.check_figure(fig)
    plt.close(fig)
