from __future__ import annotations

import pytest
import yaml

from provisioner.apis.errors import ApiValidationError
from provisioner.apis.manifest import ManifestError, parse_documents
from provisioner.apis.nodepool import NodePool
from tests.unit.apis.conftest import base, substitute


def test_examples_parse_by_kind_skipping_other_kinds(shared):
    path = shared / "karpenter" / "examples" / "spot.yaml"
    documents = parse_documents(yaml.safe_load_all(substitute(path.read_text())), source=path.name)
    assert [(d.kind, d.index) for d in documents] == [("NodePool", 0)]
    assert isinstance(documents[0].obj, NodePool)


def test_bad_document_names_file_index_and_field():
    bad = base("NodePool")
    bad["spec"]["weight"] = 0
    with pytest.raises(ManifestError) as err:
        parse_documents([None, base("NodeOverlay"), bad], source="pools.yaml")
    assert str(err.value) == (
        "pools.yaml document 2: NodePool default: spec.weight: must be between 1 and 100"
    )
    assert isinstance(err.value.__cause__, ApiValidationError)


@pytest.mark.parametrize(
    ("document", "message"),
    [
        ([1, 2], "pools.yaml document 0: not an object"),
        ({"apiVersion": "v1"}, "pools.yaml document 0: kind: required value"),
        ({"kind": "Pod"}, "pools.yaml document 0: kind: unsupported kind Pod"),
    ],
)
def test_documents_that_are_not_objects(document, message):
    with pytest.raises(ManifestError, match="^" + message.replace(".", r"\.") + "$"):
        parse_documents([document], source="pools.yaml", skip_unknown=False)
