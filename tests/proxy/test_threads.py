"""The threading rule's laws (``replay.proxy.threads``), over any recorded histories."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from turnlog.replay.proxy.threads import ThreadIndex, chain

ITEMS = st.lists(st.sampled_from([b"a", b"b", b"c"]), min_size=1, max_size=6)


def _index(histories):
    index = ThreadIndex()
    for n, keys in enumerate(histories):
        index.add(f"c{n}", keys, [(f"c{n}", i + 1) for i in range(len(keys))])
    return index


def _common(a, b):
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    return n


@given(st.lists(ITEMS, min_size=1, max_size=5), ITEMS)
def test_the_match_is_an_extended_conversation_else_the_longest_common_prefix(histories, request):
    match = _index(histories).match(request)
    extended = [keys for keys in histories if request[:len(keys)] == keys]
    longest = max(_common(keys, request) for keys in histories)
    if extended:
        assert match.extends and match.matched == max(map(len, extended))
        assert request[:match.matched] == histories[int(match.conversation_id[1:])]
    elif longest == 0:
        assert match is None
    else:
        assert not match.extends and match.matched == longest
        owner = histories[int(match.conversation_id[1:])]
        assert _common(owner, request) == longest and match.at == (match.conversation_id, longest)


@given(st.lists(ITEMS, min_size=1, max_size=5), ITEMS)
def test_a_branch_shares_exactly_its_parents_prefix(histories, extra):
    index = _index(histories)
    parent = histories[0]
    keep = len(parent) // 2 + 1
    index.branch("c0", keep, "fork")
    index.add("fork", extra, [("fork", i + 1) for i in range(len(extra))])
    match = index.match(parent[:keep] + extra, only="fork")
    assert match.conversation_id == "fork" and match.extends
    assert match.matched == keep + len(extra)
    assert match.at == ("fork", len(extra))
    assert chain(parent[:keep]) == chain(parent)[:keep]
