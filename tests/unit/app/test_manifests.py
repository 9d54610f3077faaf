"""The manifest reader's YAML loader reads exactly what PyYAML's safe loader reads."""

from __future__ import annotations

import functools
import random
import threading
from pathlib import Path
from typing import Any

import pytest
import yaml

from bench import workloads
from provisioner.app.manifests import ManifestError, load_documents, load_yaml_documents
from tests.freshfork import run_counting_forks

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


def test_a_value_pyyaml_cannot_build_is_a_manifest_error(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("kind: Pod\nmetadata:\n  name: a\n  annotations:\n    at: 2001-13-45\n")
    with pytest.raises(ManifestError, match=r"bad.yaml: invalid YAML: month must be in 1..12"):
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


ANCHORED = """\
kind: Pod
metadata:
  labels: &id001
    app: web
    tier: &t front
spec:
  affinity:
    podAntiAffinity:
      labelSelector:
        matchLabels: *id001
  tier: *t
  list: &l [1, 2]
  again: *l
---
kind: Pod
metadata:
  labels: &id001
    app: db
spec:
  selector: *id001
"""


def test_anchors_and_aliases_are_built_from_the_parser_events(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # what PyYAML's dumper writes for objects a generator shares (the bench's constraint mix)
    from provisioner.app import manifests  # noqa: PLC0415

    def composed(text: str) -> list[object]:
        raise AssertionError("anchored text went through the composer")

    monkeypatch.setattr(manifests, "_from_nodes", composed)
    documents = load_yaml_documents(ANCHORED)
    assert documents == list(yaml.safe_load_all(ANCHORED))
    first: Any = documents[0]
    second: Any = documents[1]
    anti = first["spec"]["affinity"]["podAntiAffinity"]
    assert anti["labelSelector"]["matchLabels"] is first["metadata"]["labels"]
    assert first["spec"]["again"] is first["spec"]["list"]
    assert second["spec"]["selector"] is second["metadata"]["labels"]  # anchors per document
    assert second["spec"]["selector"] == {"app": "db"}


@pytest.mark.parametrize(
    "text",
    [
        "a: &x 1\nb: &x 2\nc: *x\n",
        "a: &x {b: *x}\n",
        "a: &x [1]\n---\nb: *x\n",
        "a: &x {b: 1}\nc:\n  <<: *x\n  d: 2\n",
        "? &k key\n: 1\n*k : 2\n",
        "&x [1]: 2\n",
    ],
)
def test_odd_anchors_read_as_pyyaml_reads_them(text: str) -> None:
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    theirs = _outcome(lambda: repr(list(yaml.load_all(text, Loader=loader))))
    assert _outcome(lambda: repr(load_yaml_documents(text))) == theirs


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
import yaml
from provisioner.app.manifests import load_yaml_documents
text = "".join(f"---\\nkind: Pod\\nmetadata: {{name: p{i}}}\\n" for i in range(200))
docs = load_yaml_documents(text, workers=2, parallel_from=0)
assert docs == list(yaml.safe_load_all(text)), "two halves differ from the whole"
print(len(forks), len(docs))
"""
    assert run_counting_forks(program) == ["1", "200"]


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


def _libyaml(text: str) -> list[object]:
    """What libyaml's safe loader (the one `jointer plan` uses) reads."""
    return list(yaml.load_all(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader)))


def _lines_or_declined(text: str) -> object:
    """What the line reader makes of ``text``, or "declined" when it leaves it to libyaml."""
    from provisioner.app import manifests  # noqa: PLC0415

    try:
        return manifests._from_lines(text)
    except manifests._NotPlainError:
        return "declined"


def test_plain_manifests_are_read_line_by_line(monkeypatch: pytest.MonkeyPatch) -> None:
    from provisioner.app import manifests  # noqa: PLC0415

    def parsed(text: str) -> list[object]:
        raise AssertionError("plain manifests went to libyaml")

    monkeypatch.setattr(manifests, "_from_events", parsed)
    monkeypatch.setattr(manifests, "_from_nodes", parsed)
    objects = workloads.karpenter_diverse(100).objects + workloads.gpu_gangs(40).objects
    objects += workloads.realistic_mix(40).objects + workloads.constraint_mix(60).objects
    for text in (
        yaml.safe_dump_all(objects, sort_keys=False),  # with anchors for shared selectors
        yaml.safe_dump_all(objects, explicit_start=True, width=40),
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: 'it''s'\n  labels:\n    a: b c\n",
    ):
        assert repr(load_yaml_documents(text)) == repr(_libyaml(text))


ODD = [
    # what the line reader reads itself
    "a: &x\n  b: 1\nc:\n  d: *x\n  e: *x\n---\na: &x\n- 1\nb: *x\n",
    "- k: &a-1\n    v: 1\n  m: *a-1\n- k: &a_2\n  - x\n",
    "a: 12345678901234567890123\nb: -1.5e-300\nc: .inf\nd: 0x1F\ne: 017\nf: 1_000\ng: 1:30\n",
    "a: yes\nb: Off\nc: null\nd: ~\ne: 2001-12-14\nf: 2001-12-14t21:59:43.10-05:00\n",
    "a: 'True'\nb: ''\nc: '1'\nd: 'it''s'\ne: it's\nf: x:y\ng: http://h:80/p\n",
    "a:\n- x\n- nested\nb:\n  - y\n  - k: v\n    l:\n    - z\nc: []\nd: {}\n",
    "- a\n- b: 1\n  c:\n    d: 2\n- x\n",
    "a: 2001-13-45x\nb: --x\n",
    "a: 1\na: 2\nb:\n  c: 3\nb: 4\n",
    "a:\n      deep: 1\nb: 2\n",
    "---\na: 1\n---\nb: 2",
    "a: 1\n\n\nb: 2\n\n",
    # what it leaves to libyaml
    "a: é\n",
    "a: 1\r\nb: 2\r\n",
    "a:\tb\n",
    "a: b # comment\n",
    'a: "quoted"\n',
    "a: &x 1\nb: *x\n",
    "a: &x\n  b: *x\n",
    "a: *x\nb: &x\n  c: 1\n",
    "a: &x\n  b: 1\nc: &x\n  d: 2\n",
    "---\na: &x\n  b: 1\n---\nc: *x\n",
    "a: &x\nb: 1\n",
    "a: &x\n",
    "a: & x\n  b: 1\n",
    "a: &x.y\n  b: 1\n",
    "a: *x y\n",
    "- &x\n  a: 1\n- *x\n",
    "a: !!str 5\n",
    "<<: {a: 1}\n",
    "a:\nb: 1\n",
    "a: 1\n---\n",
    "---\n---\na: 1\n",
    "",
    "a: long text\n  continued here\n",
    "- long\n  continued\n",
    "a: 'two\n  lines'\n",
    "a: |\n  block\n",
    "a: -\n",
    "a: - b\n",
    "a: b:\n",
    "a: b: c\n",
    "a:  b\n",
    "a: b \n",
    "a: 1\n  b: 2\n",
    "a:\n    b: 1\n  c: 2\n",
    "a: 1\n- x\n",
    "a:\n  - x\n- y\n",
    "- - x\n",
    "1: int key\n",
    "true: bool key\n",
    "2001-12-14: date key\n",
    "a: =\n",
    "a: [1]\n",
    "%YAML 1.1\n---\na: 1\n",
    "a: 1\n...\n",
    "--- a\n",
    "  a: 1\n",
    "plain scalar\n",
    "- ---\n",
    "- -x\n",
]


@pytest.mark.parametrize("text", ODD)
def test_odd_text_reads_as_pyyaml_reads_it(text: str) -> None:
    expected = _outcome(lambda: _libyaml(text))
    assert repr(_outcome(lambda: load_yaml_documents(text))) == repr(expected)
    lines = _lines_or_declined(text)
    assert lines == "declined" or repr(lines) == repr(expected)


def test_an_alias_read_line_by_line_is_the_anchored_object() -> None:
    text = "a: &x\n  b: 1\nc:\n  d: *x\n---\na: &x\n  b: 2\nc: *x\n"
    lines: Any = _lines_or_declined(text)
    assert lines == _libyaml(text)
    assert lines[0]["c"]["d"] is lines[0]["a"]
    assert lines[1]["c"] is lines[1]["a"]  # anchors hold within their document
    assert lines[1]["c"] == {"b": 2}


def test_the_line_reader_reads_the_plain_odd_texts_itself() -> None:
    read = [text for text in ODD if _lines_or_declined(text) != "declined"]
    assert read == ODD[:12]


def _random_value(rng: random.Random, depth: int) -> object:
    words = ["app", "k8s.io/x", "1", "yes", "500m", "True", "", "it's", "a b", "-x", "x:y", "~"]
    odd = ["x: y", "- z", "<<", "=", "-", "a #b", "[1]", "é", "...", "a\nb", " lead", "long " * 20]
    roll = rng.random()
    if depth > 3 or roll < 0.4:
        word = rng.choice(odd if rng.random() < 0.02 else words)
        number = rng.randint(-(10**20), 10**20)
        return rng.choice([word, number, rng.random() * 10 ** rng.randint(-5, 20), True, None])
    if roll < 0.7:
        keys = ["yes", "1", "x: y"] if rng.random() < 0.05 else ["k", "key", "x.y", "a-b", "c_d"]
        return {rng.choice(keys): _random_value(rng, depth + 1) for _ in range(rng.randint(0, 4))}
    return [_random_value(rng, depth + 2) for _ in range(rng.randint(0, 4))]


def _mutated(rng: random.Random, text: str) -> str:
    lines = text.split("\n")
    for _ in range(rng.randint(1, 2)):
        at = rng.randrange(len(lines))
        edit = rng.randrange(5)
        if edit == 0:
            lines[at] = " " + lines[at]
        elif edit == 1:
            lines[at] = lines[at][1:]
        elif edit == 2:
            lines[at : at + 1] = []
        elif edit == 3:
            lines.insert(at, lines[at])
        else:
            lines.insert(at, "---")
        lines = lines or [""]
    return "\n".join(lines)


def test_the_line_reader_never_differs_from_pyyaml() -> None:
    rng = random.Random(7)  # noqa: S311 - a fixed seed, not a secret
    read = 0
    for _ in range(2000):
        documents = [{"kind": _random_value(rng, 1)} for _ in range(rng.randint(1, 3))]
        text = yaml.safe_dump_all(
            documents,
            sort_keys=rng.random() < 0.5,
            indent=rng.choice([2, 2, 3, 4]),
            width=rng.choice([20, 80, 1000]),
            explicit_start=rng.random() < 0.5,
        )
        if rng.random() < 0.5:
            text = _mutated(rng, text)
        lines = _lines_or_declined(text)
        if lines == "declined":
            continue
        read += 1
        assert repr(lines) == repr(_outcome(functools.partial(_libyaml, text))), text
    assert read > 300  # the line reader read a good share itself
