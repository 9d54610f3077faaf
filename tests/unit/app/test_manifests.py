"""The manifest reader's YAML loader reads exactly what PyYAML's safe loader reads."""

from __future__ import annotations

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
