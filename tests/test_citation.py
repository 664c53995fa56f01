"""How to cite: ``LICENSE`` and ``CITATION.cff`` exist, the citation file is valid Citation File Format
1.2.0 and agrees with the package, ``_config.yml`` and the book's "How to cite" section.

The schema, ``tests/data/citation-file-format-1.2.0.schema.json``, is the format's own (CC-BY-4.0,
https://github.com/citation-file-format/citation-file-format) as the ``cffconvert`` 2.0.0 wheel ships
it: ``cffconvert --validate`` checks against the same file, but needs ``jsonschema<4``, which the
notebook stack cannot use, so the test validates with ``jsonschema`` directly and offline.
"""

import json
import re
from pathlib import Path

import pytest
import yaml
from jsonschema import Draft7Validator

import accessibility

ROOT = Path(__file__).resolve().parent.parent
SCHEMA = Path(__file__).parent / "data" / "citation-file-format-1.2.0.schema.json"
#: The BibTeX entries of the intro's "How to cite" section (a ```bibtex block).
BIBTEX = re.compile(r"^```bibtex\n(?P<entries>.*?)^```$", re.S | re.M)


def _citation() -> dict:
    """CITATION.cff as JSON sees it (YAML dates become strings, as the schema expects)."""
    return json.loads(json.dumps(yaml.safe_load((ROOT / "CITATION.cff").read_text()), default=str))


def _errors(cff: dict) -> list[str]:
    schema = json.loads(SCHEMA.read_text())
    validator = Draft7Validator(schema, format_checker=Draft7Validator.FORMAT_CHECKER)
    return [f"{'/'.join(map(str, e.absolute_path)) or '(top)'}: {e.message}"
            for e in validator.iter_errors(cff)]


def _how_to_cite() -> dict:
    from pybtex.database import parse_string

    return parse_string(BIBTEX.search((ROOT / "book" / "intro.md").read_text())["entries"], "bibtex").entries


def test_citation_file_is_valid_cff():
    assert _errors(_citation()) == []


def test_the_validator_rejects_a_broken_citation_file():
    broken = {**_citation(), "cff-version": "1.1.0", "date-released": "yesterday"}
    del broken["authors"]
    errors = "\n".join(_errors(broken))
    assert "'authors' is a required property" in errors
    assert "cff-version" in errors and "date-released" in errors


def test_citation_file_names_this_version_repository_and_the_paper():
    cff = _citation()
    config = yaml.safe_load((ROOT / "_config.yml").read_text())
    assert cff["version"] == accessibility.__version__, "run `make release`, or fix CITATION.cff's version"
    assert cff["repository-code"] == config["repository"]["url"]
    paper = cff["preferred-citation"]
    assert paper["title"] == "How Many Different Outputs Can a Transformer Generate?"
    assert [a["family-names"] for a in paper["authors"]] == ["Meyer", "Michelessa", "Chaux", "Tan"]
    assert {"type": "other", "value": "arXiv:2605.22223"}.items() <= paper["identifiers"][0].items()


def test_licence_file_matches_the_declared_licence():
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["license"]
    assert declared == "MIT" == _citation()["license"]
    assert (ROOT / "LICENSE").read_text().startswith("MIT License\n\nCopyright (c) 2026 The accessibility "
                                                     "contributors\n")


def test_how_to_cite_agrees_with_the_citation_file():
    cff, entries = _citation(), _how_to_cite()
    book, paper = entries["accessibility"], entries["meyer2026howmany"]
    assert book.fields["version"] == cff["version"] and book.fields["url"] == cff["repository-code"]
    assert paper.fields["title"] == cff["preferred-citation"]["title"]
    assert f"arXiv:{paper.fields['eprint']}" == cff["preferred-citation"]["identifiers"][0]["value"]
    assert " ".join(book.fields["title"].split()) == cff["title"]
    assert [p.last_names[0] for p in paper.persons["author"]] == ["Meyer", "Michelessa", "Chaux", "Tan"]


@pytest.mark.parametrize("field", ["title", "eprint", "year"])
def test_how_to_cite_gives_the_paper_as_the_references_do(field):
    """The paper's entry in the section is the one ``book/references.bib`` cites the paper by."""
    from pybtex.database import parse_file

    cited = parse_file(ROOT / "book" / "references.bib").entries["meyer2026howmany"]
    assert _how_to_cite()["meyer2026howmany"].fields[field] == cited.fields[field]
