"""Text laws: miss-term folding (reference 4.7) and the headline law (reference 2.7)."""

from __future__ import annotations

import polars as pl
import pytest
from hypothesis import given
from hypothesis import strategies as st

from memframe.text import fold_expr, fold_term, fold_terms, headline, rfc3339

terms = st.lists(st.text(max_size=12), max_size=8)

# Unicode White_Space, what the reference's trim strips (narrower than str.isspace)
WHITE_SPACE = "\t\n\x0b\x0c\r \x85\xa0\u1680" + "".join(map(chr, range(0x2000, 0x200B))) + \
    "\u2028\u2029\u202f\u205f\u3000"


@given(terms)
def test_folded_terms_are_fixed_points_unique_and_alphanumeric(raw):
    folded = fold_terms(raw)
    assert len(folded) == len(set(folded))
    for term in folded:
        assert fold_term(term) == term
        assert any(ch.isalnum() for ch in term)
        assert term == term.strip(WHITE_SPACE)


@given(terms)
def test_folding_keeps_query_order_of_first_occurrences(raw):
    folded = fold_terms(raw)
    firsts = []
    for t in raw:
        f = fold_term(t)
        if f not in firsts and any(ch.isalnum() for ch in f):
            firsts.append(f)
    assert folded == firsts


@given(st.lists(st.text(max_size=12), min_size=1, max_size=20))
def test_the_polars_fold_matches_the_python_fold(raw):
    got = pl.Series(raw, dtype=pl.String).to_frame("t").select(fold_expr(pl.col("t")))["t"]
    assert got.to_list() == [fold_term(t) for t in raw]


def test_latin_diacritics_fold_to_their_base_letter():
    assert fold_term("À ç Ñ ø Ł") == "a c n o l"
    assert fold_terms(["Retreival", "RETREIVAL", "  ", "-+-"]) == ["retreival"]


def test_headline_examples_from_the_reference():
    assert headline("x\n") == "x"
    assert headline("a\nb") == "a…"
    assert headline("\nabc") == "…"
    assert headline("y" * 150) == "y" * 140 + "…"
    assert headline("y" * 140) == "y" * 140
    assert headline("a\r\n") == "a"
    assert headline("a\r\nb") == "a…"
    for sep in ["\r", "\x0b", "\x0c", "\x85", "\u2028", "\u2029"]:
        assert headline(f"secret-first{sep}inject-second") == "secret-first…"


@given(st.text(max_size=300))
def test_headline_is_one_line_of_at_most_141_chars(text):
    h = headline(text)
    assert len(h) <= 141
    assert not any(b in h for b in ["\n", "\r", "\x0b", "\x0c", "\x85", "\u2028", "\u2029"])
    assert text.startswith(h.removesuffix("…"))


def test_rfc3339_trims_fractional_zeros_and_keeps_nanoseconds():
    raw = ["2026-07-21T23:36:24.016162617Z", "2026-07-23T12:00:00Z", "2026-07-23T12:00:00.5Z"]
    s = pl.Series(raw).str.to_datetime(time_unit="ns", time_zone="UTC")
    assert pl.select(rfc3339(pl.lit(s))).to_series().to_list() == raw


@given(st.lists(st.one_of(st.none(), st.text(max_size=40)), max_size=30))
def test_sha256_is_the_same_vectorised_and_row_by_row(values):
    import hashlib

    from memframe import text
    from memframe.text import sha256_hex

    series = pl.Series("v", values, dtype=pl.String)
    prefix = pl.Series("p", [f"h{i}" if i % 3 else None for i in range(len(values))],
                       dtype=pl.String)
    want = [None if v is None else hashlib.sha256(v.encode()).hexdigest() for v in values]
    joined = [None if v is None or p is None else hashlib.sha256((p + v).encode()).hexdigest()
              for p, v in zip(prefix.to_list(), values, strict=True)]
    for stream_rows in (text.STREAM_ROWS, 1):  # in place, and on the streaming engine
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(text, "STREAM_ROWS", stream_rows)
            assert sha256_hex(series).to_list() == want
            assert sha256_hex(series, prefix=prefix).to_list() == joined
    assert sha256_hex(series, vectorised=False).to_list() == want
    assert sha256_hex(series, prefix=prefix, vectorised=False).to_list() == joined


# The engine's closed table (reference 4.7), restated: 19 base letters, 82 letters in all.
ENGINE_TABLE = {
    "a": "àáâãäåāăą", "c": "çćĉċč", "d": "ď", "e": "èéêëēĕėęě", "g": "ĝğġģ", "h": "ĥ",
    "i": "ìíîïĩīĭįı", "j": "ĵ", "k": "ķ", "l": "ĺļľł", "n": "ñńņň", "o": "òóôõöøōŏő",
    "r": "ŕŗř", "s": "śŝşš", "t": "ţť", "u": "ùúûüũūŭůűų", "w": "ŵ", "y": "ýÿ", "z": "źżž",
}


def test_every_letter_of_the_engine_table_folds_to_its_base():
    letters = [(ch, base) for base, group in ENGINE_TABLE.items() for ch in group]
    assert len(letters) == 82
    for ch, base in letters:
        assert fold_term(ch) == base, ch
        assert fold_term(ch.upper()) == base, ch.upper()  # lowercased first, then folded


@pytest.mark.parametrize("term", ["ș", "ț", "đ", "ơ", "ư", "ŷ", "ǎ", "ß", "æ", "œ", "ħ", "ŧ",
                                  "bucurești", "đường", "Ș"])
def test_letters_outside_the_table_are_left_as_they_are(term):
    assert fold_term(term) == term.lower()
    assert fold_terms([term.upper()]) == [term.upper().lower()]


def test_the_polars_fold_uses_the_same_closed_table():
    raw = ["BUCUREȘTI", "Đường", "Café", "ŁÓDŹ"]
    got = pl.DataFrame({"t": raw}).select(fold_expr(pl.col("t")))["t"].to_list()
    assert got == ["bucurești", "đường", "cafe", "lodz"]


def test_a_character_newer_than_pythons_unicode_tables_folds_as_polars_does():
    # U+16EA0 (Unicode 17) is unassigned in Python 3.11's tables; Polars lowercases it.
    raw = ["\U00016ea0", "A\U00016ea0É"]
    got = pl.Series(raw, dtype=pl.String).to_frame("t").select(fold_expr(pl.col("t")))["t"]
    assert [fold_term(t) for t in raw] == got.to_list()
