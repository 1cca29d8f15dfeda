"""Logist's on-disk JSON style is json.dumps(indent=2)'s text, byte for byte,
whichever way dump_json makes it."""

from __future__ import annotations

import json

from hypothesis import given, settings, strategies as st

from logist.store.atomic import dump_json

LEAVES = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), st.text())
DATA = st.recursive(LEAVES, lambda inner: st.one_of(st.lists(inner), st.tuples(inner, inner),
                                                     st.dictionaries(st.text(), inner)), max_leaves=20)
ODD_KEYS = st.dictionaries(st.one_of(st.integers(), st.booleans(), st.none(), st.floats(allow_nan=False)), LEAVES)


@settings(max_examples=60, deadline=None)
@given(st.one_of(DATA, ODD_KEYS))
def test_dump_json_is_json_dumps_indented(value):
    assert dump_json(value) == json.dumps(value, indent=2, ensure_ascii=False) + "\n"


def test_dump_json_refuses_what_json_dumps_refuses():
    import pytest

    with pytest.raises(TypeError, match="not JSON serializable"):
        dump_json({"x": object()})
