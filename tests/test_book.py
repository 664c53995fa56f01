"""The book's sources: every chapter has an up-to-date .ipynb twin that reads as a notebook, shows
the values and outputs of the executed book and installs a package ref that exists, whose package is
HEAD's; releases pin that ref; a twin runs alone; the execution cache follows the package."""

import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import jupytext
import nbformat
import pytest

import accessibility

ROOT = Path(__file__).resolve().parent.parent
_spec = importlib.util.spec_from_file_location("book_sync", ROOT / "book" / "sync.py")
sync = sys.modules["book_sync"] = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(sync)

CHAPTERS = sync.chapters()
CODE = [c for c in CHAPTERS if c.exists() and sync.has_code(c)]
PLAIN = [c for c in CHAPTERS if c.exists() and not sync.has_code(c)]
#: What notebook clients would show raw: MyST roles, directives and colon fences.
RAW_MYST = ("{glue", "{prf:", "{numref", "{eq}", "{doc}", "{cite}", ":::", "```{")
#: The glue keys a chapter's text pastes: ``{glue:text}`key:spec``` roles and ``{glue:figure} key``.
GLUE_KEY = re.compile(r"\{glue(?::\w*)?\}`(?P<role>[^`:]+)"
                      r"|^(?:`{3,}|:{3,})\{glue:\w+\}\s*(?P<directive>\S+)", re.M)


def _code(path):
    """A chapter's or twin's code cells, without the twin's install cell."""
    return [c.source.strip() for c in jupytext.read(path).cells
            if c.cell_type == "code" and not c.source.startswith(sync.MARKER)]


def _book_build():
    spec = importlib.util.spec_from_file_location("book_build", ROOT / "book" / "_ext" / "book_build.py")
    book_build = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(book_build)
    return book_build


def _cells(nb):
    return [(c.cell_type, c.source.strip(), c.metadata.get("tags", [])) for c in nb.cells]


def _git_checkout() -> bool:
    try:
        return subprocess.run(["git", "rev-parse", "--is-inside-work-tree"], cwd=ROOT,
                              capture_output=True, text=True).stdout.strip() == "true"
    except FileNotFoundError:
        return False


@pytest.mark.parametrize("md", CHAPTERS, ids=lambda p: p.stem)
def test_chapter_has_an_up_to_date_twin(md):
    """The twin's code is the chapter's, and its markdown is the chapter's rewritten with the values
    the twin keeps (so that no build is needed to check it)."""
    assert md.exists(), f"{md} is listed in _toc.yml but missing"
    twin = md.with_suffix(".ipynb")
    if md in PLAIN:
        assert not twin.exists(), f"{twin.name}: a page without code has no twin (run `make twins`)"
        assert "kernelspec" not in md.read_text(), f"{md.name}: no notebook header, so no launch buttons"
        return
    assert twin.exists(), f"{twin.name} missing: run `make twins`"
    nb = nbformat.read(twin, as_version=4)
    assert _code(twin) == _code(md), f"{twin.name}: code differs from {md.name}: run `make twins`"
    assert _cells(nb) == _cells(sync.twin(md, sync.named_ref(nb), sync.from_twin(md))), \
        f"{twin.name}: markdown differs from {md.name}: run `make twins`"
    assert "formats" not in nb.metadata.get("jupytext", {}), "a twin is generated, never paired"


@pytest.mark.parametrize("md", CODE, ids=lambda p: p.stem)
def test_install_cell_is_the_twins_first_code_cell(md):
    """Only the twin installs: the chapter has no install cell, so a re-pin executes nothing again."""
    assert sync.MARKER not in md.read_text(), f"{md.name} has an install cell: run `make twins`"
    twin = nbformat.read(md.with_suffix(".ipynb"), as_version=4)
    first = next(c for c in twin.cells if c.cell_type == "code")
    assert first.source.strip() == sync.install_cell_source(sync.current_ref()).strip(), "run `make twins`"
    assert "remove-cell" in first.metadata.get("tags", [])
    assert max(map(len, first.source.splitlines())) <= 90, "notebook clients show 90 characters, not more"


def test_every_twin_names_one_ref_that_exists():
    refs = {sync.named_ref(nbformat.read(md.with_suffix(".ipynb"), as_version=4)) for md in CODE}
    assert len(refs) == 1 and None not in refs, f"the twins name {refs}: run `make twins`"
    if not _git_checkout():
        pytest.skip("not inside a git checkout: cannot check that the twins' ref exists")
    ref = refs.pop()
    found = subprocess.run(["git", "cat-file", "-e", f"{ref}^{{commit}}"], cwd=ROOT, capture_output=True)
    assert found.returncode == 0, (
        f"the twins install {ref}, which this repository does not have: pin an existing commit with "
        "`make twins REF=<commit>` (or `make release TAG=...`), or fetch the tag")


def test_twins_install_the_package_of_head():
    """A reader on Colab runs the package the twins pin: it must be HEAD's, so every commit that
    changes the package is followed by re-pinned twins (`make twins REF=HEAD`, then commit them)."""
    if not _git_checkout():
        pytest.skip("not inside a git checkout: cannot compare the twins' package with HEAD's")
    ref = sync.current_ref()
    diff = ["git", "diff", "--stat", "--stat-count=10", ref, "HEAD", "--", "accessibility", "pyproject.toml"]
    changed = subprocess.run(diff, cwd=ROOT, capture_output=True, text=True, check=True).stdout.strip()
    assert not changed, (f"the package changed since {ref[:12]}, which the twins install: run "
                         f"`make twins REF=HEAD` and commit the twins\n{changed}")


@pytest.mark.parametrize("md", CODE, ids=lambda p: p.stem)
def test_twin_shows_glued_values_not_their_names(md):
    """Notebook clients render no glue: the twin shows each value as the page does, never its key."""
    keys = {m["role"] or m["directive"] for m in GLUE_KEY.finditer(md.read_text())}
    assert keys or md.stem == "notation", f"{md.name}: the pattern finds no glue key"
    nb = nbformat.read(md.with_suffix(".ipynb"), as_version=4)
    markdown = "\n".join(c.source for c in nb.cells if c.cell_type == "markdown")
    # in code font, or as a bare word outside maths ($r_2$ is a symbol) when the key is no word of
    # prose (art_bf16, fig-levels)
    prose = re.sub(r"\$\$.*?\$\$|\$[^$\n]+\$", " ", markdown, flags=re.S)
    word = lambda key: re.search(rf"(?<![\w-]){re.escape(key)}(?![\w-])", prose)
    named = sorted(key for key in keys if f"`{key}`" in markdown or re.search(r"[_\d-]", key) and word(key))
    assert not named, f"{md.with_suffix('.ipynb').name} names glue keys instead of their values: {named}"
    assert keys - {k for k in keys if k.startswith("fig-")} <= set(nb.metadata["accessibility"]["glue"])


def test_twins_show_the_books_default_mode():
    """The twins show what a reader who opens them gets (the book's defaults), not quick mode:
    `make twins` builds the book in default mode before writing them."""
    quick = [md.stem for md in CODE
             if nbformat.read(md.with_suffix(".ipynb"), as_version=4).metadata["accessibility"]["quick"]]
    assert not quick, f"twins written from a quick-mode build: {quick}; run `make twins`"


def test_twins_show_the_outputs_of_the_executed_book():
    """Tables and figures are outputs of the twin's cells, each figure in the cell that draws it."""
    nb = nbformat.read(ROOT / "book" / "theorem45.ipynb", as_version=4)
    figure = next(c for c in nb.cells if c.cell_type == "code" and 'glue_figure("fig-levels"' in c.source)
    assert any("image/png" in o.get("data", {}) for o in figure.outputs)
    assert any("text/html" in o.get("data", {}) for c in nb.cells if c.cell_type == "code" for o in c.outputs)
    hidden = [c for c in nb.cells if c.cell_type == "code" and "remove-output" in c.metadata.get("tags", [])]
    assert all(not c.outputs for c in hidden)
    for md in CODE:  # nbval fails a cell that has outputs but no execution count ("unrun")
        twin = nbformat.read(md.with_suffix(".ipynb"), as_version=4)
        assert all(c.execution_count for c in twin.cells if c.cell_type == "code" and c.outputs), md.stem


@pytest.mark.parametrize("md", CODE, ids=lambda p: p.stem)
def test_twin_renders_without_myst(md):
    """What JupyterLab and Colab show: the twin as nbconvert renders it, with no MyST syntax left."""
    from nbconvert import HTMLExporter

    html, _ = HTMLExporter().from_notebook_node(nbformat.read(md.with_suffix(".ipynb"), as_version=4))
    left = [raw for raw in RAW_MYST if raw in html]
    assert not left, f"{md.with_suffix('.ipynb').name} shows raw MyST: {left}"


def test_notebook_markdown_rewrites_myst():
    md = ROOT / "book" / "theorem45.md"  # labels resolve against a real chapter
    text = "\n".join([
        "(sec-x)=",
        "The slope is {glue:text}`slope_model:.1f` by {prf:ref}`Corollary 4.6 <cor-46>`, "
        "see {numref}`fig-levels`",
        "and {eq}`eq-thm45` {cite}`meyer2026howmany`; next: {doc}`corollaries`.",
        "",
        "```{prf:theorem} 4.5, finitely many",
        ":label: thm-x",
        ":nonumber:",
        "",
        "Body.",
        "```",
        "",
        ":::{note}",
        "Careful.",
        ":::",
    ])
    out = sync.notebook_markdown(text, md, values={"slope_model": {"text/plain": "11.66"}})
    assert out.startswith("The slope is 11.7 by Corollary 4.6, see Figure 1\n"
                          "and (2) [Meyer et al., 2026]; "
                          "next: *Corollaries 4.6 and 4.10: a linear slope and an exponential cliff*.")
    assert "**Theorem 4.5 (finitely many).**\n\nBody." in out and "**Note.**\n\nCareful." in out
    assert not any(raw in out for raw in RAW_MYST) and "(sec-x)=" not in out
    numbered = sync.notebook_markdown("$$\nx = 1\n$$ (eq-packing)", md)
    assert numbered == "$$\nx = 1\n\\tag{1}\n$$"
    assert sync.notebook_markdown("{glue:text}`name` and {glue:md}`command`", md, values={
        "name": {"text/plain": "'n_50 <x>'"}, "command": {"text/markdown": "`make book`"}}) \
        == "n\\_50 \\<x\\> and `make book`"  # plain text escaped, markdown as it is
    with pytest.raises(ValueError, match="no value for the glue key 'slope_model'"):
        sync.notebook_markdown("{glue:text}`slope_model:.1f`", md, values={})
    with pytest.raises(ValueError, match="no notebook rendering for the role"):
        sync.notebook_markdown("{unknownrole}`x`", md)
    with pytest.raises(ValueError, match="unknown figure target"):
        sync.notebook_markdown("{numref}`fig-does-not-exist`", md)


@pytest.mark.parametrize("md", CODE, ids=lambda p: p.stem)
def test_chapters_define_nothing_reusable(md):
    """Chapters call the package; functions and classes belong in it, where they are tested."""
    assert not any(re.search(r"^\s*(def|class)\s", code, re.M) for code in _code(md))


@pytest.mark.parametrize("md", CODE, ids=lambda p: p.stem)
def test_chapters_show_figures_once_and_format_tables(md):
    """Figures go through ``plots.glue_figure`` (shown once); no cell ends in a bare rounded table."""
    code = _code(md)
    assert not any(re.search(r"glue\(\s*[\"']fig-", c) for c in code), "use plots.glue_figure for figures"
    assert "from myst_nb" not in "\n".join(code), "import glue from accessibility.plots (no myst-nb on Colab)"
    last_lines = [c.strip().splitlines()[-1] for c in code if c.strip()]
    assert not [line for line in last_lines if re.fullmatch(r"[\w.\[\]\"' ]+\.round\(.*\)", line)], \
        "show tables with plots.format_table"


#: A chapter's shell command that writes a shipped run: ``accessibility ... --save <SHIPPED>/NAME ...``.
SHIPPED = "accessibility/data/runs"
SHIPPED_COMMAND = re.compile(rf"^accessibility .*--save {SHIPPED}/(?P<name>[\w.-]+)(?:[ \t].*)?$", re.M)


@pytest.mark.parametrize("md", CODE, ids=lambda p: p.stem)
def test_regenerating_commands_are_the_shipped_runs_own(md):
    """The shell command a chapter gives for regenerating a shipped run is the one in that run's
    config.json (which its REGENERATE switch reruns), so that it makes the run the chapter reads."""
    from accessibility.results import load_run

    for found in SHIPPED_COMMAND.finditer(md.read_text()):
        assert found.group(0).strip() == load_run(found["name"]).command, f"{md.name}: {found['name']}"


def test_references_to_unnumbered_statements_carry_their_text():
    """Theorems numbered as in the paper are ``:nonumber:``; a bare ``{prf:ref}`label``` to one
    renders as "Corollary " with no number, so such references must spell out their text."""
    sources = {md: md.read_text() for md in CHAPTERS if md.exists()}
    unnumbered = {label for text in sources.values()
                  for label in re.findall(r"^:label: (\S+)\n(?::[a-z]+:.*\n)*?:nonumber:", text, re.M)}
    assert "cor-46" in unnumbered                      # the pattern finds the paper's statements
    bare = [(md.name, label) for md, text in sources.items()
            for label in re.findall(r"\{prf:ref\}`([^`<>\s]+)`", text) if label in unnumbered]
    assert not bare, f"write {{prf:ref}}`Corollary 4.6 <cor-46>`-style references: {bare}"


def test_release_pins_the_released_commit(tmp_path):
    """``make release``: version bumped (package, CITATION.cff, "How to cite"), twins pinned to the
    release commit with the values they showed, buttons at the tag."""
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    repo = tmp_path / "repo"
    for rel in ["_toc.yml", "_config.yml", "accessibility/__init__.py", "book/references.bib", "CITATION.cff",
                "book/sync.py", "book/_ext/book_build.py", *[str(md.relative_to(ROOT)) for md in CHAPTERS],
                *[str(md.relative_to(ROOT).with_suffix(".ipynb")) for md in CODE]]:
        (repo / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / rel, repo / rel)
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.org",
           "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.org", "PYTHONPATH": str(ROOT)}
    git = lambda *a: subprocess.run(["git", *a], cwd=repo, env=env, check=True, capture_output=True,  # noqa: E731
                                    text=True).stdout.strip()
    git("init", "-q")
    git("add", "-A")
    git("commit", "-q", "-m", "start")
    run = subprocess.run([sys.executable, "book/sync.py", "--release", "v9.8.7"], cwd=repo, env=env,
                         capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    package = git("rev-parse", "HEAD~1")
    assert git("rev-parse", "v9.8.7^{commit}") == git("rev-parse", "HEAD")
    assert git("status", "--porcelain") == ""
    assert '__version__ = "9.8.7"' in git("show", f"{package}:accessibility/__init__.py")
    assert 'version: "9.8.7"' in git("show", f"{package}:CITATION.cff")
    assert "  version = {9.8.7}," in git("show", f"{package}:book/intro.md")
    assert git("diff", "--name-only", package, "HEAD", "--", "accessibility") == ""  # the tag's package
    for md in CHAPTERS:
        if sync.has_code(md):
            nb = nbformat.read(repo / md.relative_to(ROOT).with_suffix(".ipynb"), as_version=4)
            assert sync.named_ref(nb) == package
            shown = nbformat.read(md.with_suffix(".ipynb"), as_version=4).metadata["accessibility"]
            assert nb.metadata["accessibility"] == shown  # the values the twin showed: nothing re-executed
    assert re.search(r"^\s+branch: v9\.8\.7$", (repo / "_config.yml").read_text(), re.M)
    again = subprocess.run([sys.executable, "book/sync.py", "--release", "v9.8.7"], cwd=repo, env=env,
                           capture_output=True, text=True)
    assert again.returncode != 0 and "exists already" in again.stderr


#: Chapters run alone by the slow test: both read committed data through the installed package
#: (theorem45 the published table, cramming the saved SmolLM2 runs of `load_run`).
ALONE = ["theorem45", "cramming"]


@pytest.mark.slow
@pytest.mark.parametrize("name", ALONE)
def test_twin_runs_alone_after_its_install_cell(name, tmp_path):
    """A twin copied to an empty folder runs to the end in a fresh virtual environment where only its
    install cell has run (Colab's preinstalled torch stands in as torch 2.13.0, the repository as its
    local path, at the ref the twin names)."""
    import nbclient

    if not _git_checkout():
        pytest.skip("not inside a git checkout: the install cell installs a commit of it")
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    py = venv / "bin" / "python"
    # the "preinstalled" packages stay as they are
    constraints = {"PIP_CONSTRAINT": str(ROOT / ".ci" / "constraints.txt")}
    env = {**os.environ, **constraints, "PYTHONPATH": "", "ACCESSIBILITY_QUICK": "1", "HF_HUB_OFFLINE": "1"}
    env.pop("VIRTUAL_ENV", None)
    subprocess.run([str(py), "-m", "pip", "install", "-q", "torch==2.13.0", "ipykernel"], check=True, env=env)
    subprocess.run([str(py), "-m", "ipykernel", "install", "--prefix", str(tmp_path / "jupyter"),
                    "--name", "alone"], check=True, env=env, capture_output=True)
    nb = nbformat.read(ROOT / "book" / f"{name}.ipynb", as_version=4)
    install = nb.cells[next(i for i, c in enumerate(nb.cells) if c.cell_type == "code")]
    url = sync.repository_url()
    assert f'repository = "{url}"' in install.source
    install.source = install.source.replace(f'repository = "{url}"', f'repository = "file://localhost{ROOT}"')
    folder = tmp_path / "empty"
    folder.mkdir()
    nb.metadata["kernelspec"] = {"name": "alone", "display_name": "alone", "language": "python"}
    env_kernel = {**env, "JUPYTER_PATH": str(tmp_path / "jupyter" / "share" / "jupyter"),
                  "PATH": f"{venv / 'bin'}:{os.environ['PATH']}"}
    old = dict(os.environ)
    os.environ.update(env_kernel)
    try:
        client = nbclient.NotebookClient(nb, timeout=1800, kernel_name="alone",
                                         resources={"metadata": {"path": str(folder)}})
        client.execute()
    finally:
        os.environ.clear()
        os.environ.update(old)
    shown = json.dumps([o for c in nb.cells for o in c.get("outputs", [])])
    assert "Traceback" not in shown
    installed = subprocess.run([str(py), "-c", "import accessibility; print(accessibility.__file__)"],
                               capture_output=True, text=True, cwd=folder, env=env).stdout
    assert str(venv) in installed  # the package came from the install cell, not from this checkout
    shutil.rmtree(venv, ignore_errors=True)  # gigabytes (torch): not kept in pytest's temporary folders


def test_book_extension_prints_paper_numbers_and_author_year_labels():
    from docutils import nodes
    from pybtex.database import parse_string
    from sphinx_proof.nodes import unenumerable_node

    book_build = _book_build()
    doc = nodes.document(None, None)
    for title in (" (4.5, finitely many accessible sequences)", " (Packing lemma)"):
        statement = unenumerable_node()
        statement += nodes.title("", title)
        doc += statement
    book_build._paper_numbered_titles(None, doc)
    assert [t.astext() for t in doc.findall(nodes.title)] == ["4.5 (finitely many accessible sequences)",
                                                               " (Packing lemma)"]
    bib = parse_string("""
        @article{a, author = {Meyer, A. and Michelessa, B. and Chaux, C. and Tan, D.}, year = {2026}}
        @article{b, author = {Ben Allal, Loubna and Lozhkov, Anton}, year = {2025}}""", "bibtex")
    assert [book_build.author_year_label(e) for e in bib.entries.values()] == ["Meyer et al., 2026",
                                                                                "Ben Allal and Lozhkov, 2025"]


def test_execution_cache_is_emptied_when_the_package_changes(tmp_path, monkeypatch):
    """jupyter-cache keys a chapter on its code only: the book's extension empties the cache when
    the package, its data, pyproject.toml or the installed versions change; quick mode has its own."""
    from types import SimpleNamespace

    book_build = _book_build()
    repo = tmp_path / "repo"
    (repo / "accessibility" / "data").mkdir(parents=True)
    (repo / "pyproject.toml").write_text("[project]\n")
    (repo / "accessibility" / "data" / "run.json").write_text("{}")
    key = book_build.inputs_key(repo)
    assert book_build.inputs_key(repo) == key
    (repo / "accessibility" / "data" / "run.json").write_text('{"n50": 3}')
    assert book_build.inputs_key(repo) != key
    key = book_build.inputs_key(repo)
    for name in ("inflight.json", "inflight-rank1.json"):    # a run going on in a shipped run's folder
        (repo / "accessibility" / "data" / name).write_text("{}")
    assert book_build.inputs_key(repo) == key
    (repo / "accessibility" / "data" / "records-rank1.jsonl").write_text("{}\n")
    assert book_build.inputs_key(repo) != key

    app = SimpleNamespace(outdir=str(tmp_path / "_build" / "html"))
    keys = iter(["a", "a", "b", "b"])
    monkeypatch.setattr(book_build, "inputs_key", lambda: next(keys))
    monkeypatch.delenv(book_build.EXECUTE_ENV, raising=False)
    monkeypatch.delenv(accessibility.QUICK_ENV, raising=False)

    def build():
        config = SimpleNamespace(nb_execution_mode="cache", nb_execution_cache_path="")
        book_build._execution_cache(app, config)
        return Path(config.nb_execution_cache_path)

    cache = build()
    assert cache == tmp_path / "_build" / ".jupyter_cache" / "default"
    (cache / "executed").mkdir(parents=True)
    assert build() == cache and (cache / "executed").exists()   # same package: kept
    assert build() == cache and not cache.exists()               # another package: emptied
    monkeypatch.setenv(accessibility.QUICK_ENV, "1")
    assert build().name == "quick"
    monkeypatch.setenv(book_build.EXECUTE_ENV, "force")           # CI: every chapter executed fresh
    config = SimpleNamespace(nb_execution_mode="cache", nb_execution_cache_path="")
    book_build._execution_cache(app, config)
    assert config.nb_execution_mode == "force" and config.nb_execution_cache_path == ""
