"""The manifest reader's YAML loader reads exactly what PyYAML's safe loader reads."""

from __future__ import annotations

import functools
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
import yaml

from bench import workloads
from provisioner.app.manifests import ManifestError, load_documents, load_yaml_documents

EDGES = """\
a: &x {b: 1, c: [1, 2.5, true, null, 2020-01-01, "s", 0x1f, ~, '1', yes, 1_000]}
d: *x
e:
  <<: *x
  f: 2
? null
: 3
1: int key
!!str 5: tagged
g: !!binary aGVsbG8=
h: !!set {a, b}
---
---
r: &r [*r, plain, "quoted"]
"""


def test_it_reads_what_safe_load_all_reads() -> None:
    acyclic = EDGES.rsplit("---\n", 1)[0]
    text = acyclic + "---\n" + yaml.safe_dump_all(workloads.karpenter_diverse(60).objects)
    ours = load_yaml_documents(text)
    assert len(ours) == 63
    assert ours == list(yaml.safe_load_all(text))


def test_aliases_share_one_object_as_in_pyyaml() -> None:
    first, _, third = load_yaml_documents(EDGES)
    assert isinstance(first, dict)
    assert first["a"] is first["d"]
    assert isinstance(third, dict)
    assert third["r"][0] is third["r"]


def test_unhashable_keys_are_a_yaml_error() -> None:
    with pytest.raises(yaml.YAMLError, match="unhashable key"):
        load_yaml_documents("? [1, 2]\n: nope\n")


def test_a_bad_file_names_the_line(tmp_path: object) -> None:
    from pathlib import Path  # noqa: PLC0415

    bad = Path(str(tmp_path)) / "bad.yaml"
    bad.write_text("kind: Pod\nmetadata: {name: [\n")
    with pytest.raises(ManifestError, match=r"bad.yaml: invalid YAML: line \d"):
        load_documents([str(bad)])


PLAIN = """\
apiVersion: v1
kind: Pod
metadata: {name: a, labels: {"yes": "no", on: off, n: y}}
spec:
  ints: [0, -3, +7, 017, 0x1f, 0b101, 1_000, 1:30, '12']
  floats: [1.5, -.inf, .nan, 1e3, 1.0e+3, 6.8523015e+5, 190:20:30.15]
  words: [true, False, yes, NO, null, ~, "", '', "null", plain text, a:b, -dash]
  times: [2001-12-14t21:59:43.10-05:00, 2002-12-14, "2002-12-14"]
  nested:
  - - deep
    - {k: v}
  - []
  - {}
  block: |
    line one
    line two
  folded: >-
    folded
    text
  1: int key
  2.5: float key
  true: bool key
---
---
- a list document
- 3
...
--- plain scalar document
"""


def test_plain_text_is_built_from_the_parser_events(monkeypatch: pytest.MonkeyPatch) -> None:
    from provisioner.app import manifests  # noqa: PLC0415

    def composed(text: str) -> list[object]:
        raise AssertionError("plain text went through the composer")

    monkeypatch.setattr(manifests, "_from_nodes", composed)
    ours = load_yaml_documents(PLAIN)
    expected = list(yaml.safe_load_all(PLAIN))
    assert repr(ours) == repr(expected)  # nan != nan; repr also checks types and key order
    assert len(ours) == 4
    assert ours[1] is None


@pytest.mark.parametrize(
    "text",
    [
        "a: &x [1]\nb: *x\n",
        "a: !!str 5\n",
        "a: !!binary aGVsbG8=\n",
        "a: {<<: {b: 1}, c: 2}\n",
        "? null\n: 3\n",
        "2001-12-14: date key\n",
        "a: b\n---\nc: !!set {d, e}\n",
    ],
)
def test_anything_else_reads_as_pyyaml_reads_it(text: str) -> None:
    assert load_yaml_documents(text) == list(yaml.safe_load_all(text))


@pytest.mark.parametrize("text", ["a: [1, 2\n", "a: 1\n---\nb: c: d\n", "a: =\n", "a: *nope\n"])
def test_errors_are_pyyamls(text: str) -> None:
    with pytest.raises(yaml.YAMLError) as ours:
        load_yaml_documents(text)
    with pytest.raises(yaml.YAMLError) as theirs:
        list(yaml.load_all(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader)))
    assert str(ours.value) == str(theirs.value)


HALVES = [
    "a: 1\n---\nb: [2, 3]\n---\nc: {d: e}\n---\nf: g\n",
    "a: &x [1]\nb: *x\n---\nc: !!str 5\n---\nd: 1\n---\ne: &y {f: 2}\ng: *y\n",
    "--- |\n  block\n  ---\n  text\n---\n--- >\n  folded\n...\n--- plain\n---\n- x\n",
    "a: 1\n---\nb: 'quoted\n--- inside'\n---\nc: 3\n",
    "a: 1\n---\nb: [1,\n---\n]\n---\nc: 3\n",
    "a: 1\n---\nb: 2\n---\nc: [\n---\nd: 4\n",
    "a: 1\n---\nb: 2\n---\nc: d: e\n---\nf: 6\n",
    "%YAML 1.1\n---\na: 1\n---\nb: 2\n",
]


def _outcome(read: Any) -> object:
    try:
        return read()
    except yaml.YAMLError as error:
        return f"{type(error).__name__}: {error}"


@pytest.mark.parametrize("text", HALVES)
def test_two_halves_read_what_the_whole_reads(text: str, monkeypatch: pytest.MonkeyPatch) -> None:
    import os  # noqa: PLC0415

    forks: list[int] = []
    fork = os.fork

    def counted() -> int:
        forks.append(1)
        return fork()

    monkeypatch.setattr(os, "fork", counted)
    halves = _outcome(lambda: load_yaml_documents(text, workers=2, parallel_from=0))
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    whole = _outcome(lambda: list(yaml.load_all(text, Loader=loader)))
    assert repr(halves) == repr(whole)
    # with other threads alive (servers left by earlier tests) the read stays in one process
    alone = threading.active_count() == 1
    assert len(forks) == (1 if alone and not text.startswith("%") else 0)


def test_a_large_file_is_read_in_two_processes_when_nothing_else_runs() -> None:
    # a fresh interpreter: no other threads, so the second half is read by a forked child
    program = """
import os, yaml
from provisioner.app.manifests import load_yaml_documents
forks = []
fork = os.fork
def counted():
    forks.append(1)
    return fork()
os.fork = counted
text = "".join(f"---\\nkind: Pod\\nmetadata: {{name: p{i}}}\\n" for i in range(200))
docs = load_yaml_documents(text, workers=2, parallel_from=0)
assert docs == list(yaml.safe_load_all(text)), "two halves differ from the whole"
print(len(forks), len(docs))
"""
    result = subprocess.run(
        [sys.executable, "-c", program],
        capture_output=True,
        text=True,
        check=False,
        cwd=Path(__file__).resolve().parents[3],
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["1", "200"]


def test_small_files_and_one_worker_read_in_one_process(monkeypatch: pytest.MonkeyPatch) -> None:
    import os  # noqa: PLC0415

    def no_fork() -> int:
        raise AssertionError("forked")

    monkeypatch.setattr(os, "fork", no_fork)
    text = HALVES[0]
    assert load_yaml_documents(text, workers=2) == list(yaml.safe_load_all(text))
    assert load_yaml_documents(text, workers=1, parallel_from=0) == list(yaml.safe_load_all(text))


def test_a_plain_scalar_is_what_pyyamls_resolver_makes_it() -> None:
    from provisioner.app import manifests  # noqa: PLC0415

    assert manifests._RESOLVED_FIRST is not None
    loader = manifests._Loader("")
    texts = [c + tail for c in map(chr, range(33, 127)) for tail in ("", "1", "es", "0:30")]
    texts += ["bench-1", "yes", "~", "1.5", "2001-12-14", "0x1f", "-.inf", "é", "NULL"]
    for text in texts:
        if text in ("<<", "="):
            continue
        tag = loader.resolve(yaml.ScalarNode, text, (True, False))
        node = yaml.ScalarNode(tag, text)
        expected = _outcome(functools.partial(loader.construct_object, node))
        ours = _outcome(functools.partial(manifests._plain_scalar, loader, text))
        assert repr(ours) == repr(expected), text
    loader.dispose()
