"""Hypothesis strategies for hostile request bodies, shared by every fuzz module.

Three families, from the most to the least structured:

* :func:`mutated` — a *valid* request of a surface with one to three fields replaced, removed or added:
  a value of another type, a huge string, a 10k-deep nesting, ``1e308``, ``-0``, ``NaN`` as bare text,
  a very long array. These reach deep into the parsers, which fully random input never does.
* :func:`json_documents` — any JSON document at all (not necessarily an object).
* :func:`raw_bodies` — bytes that are not clean JSON: invalid UTF-8 inside strings, duplicate keys,
  truncated documents, random binary.

A value that orjson cannot write (nesting past 254 levels, integers past 64 bits, ``NaN``) is carried as
:class:`Raw` JSON text and spliced in by :func:`encode`, so the bodies reach the gateway exactly as a
hostile client would write them.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import Any, Final

import orjson
from hypothesis import strategies as st

__all__ = ["Dup", "Raw", "encode", "json_documents", "json_values", "mutated", "nasty_values", "raw_bodies"]


@dataclass(frozen=True)
class Raw:
    """JSON text spliced into a document as is (it may not be valid JSON: that is the point)."""

    text: str


@dataclass(frozen=True)
class Dup:
    """An object written with its pairs in order, keys possibly repeated (``{"a":1,"a":"x"}``)."""

    pairs: tuple[tuple[str, Any], ...]


def encode(value: Any) -> bytes:
    """Serialise ``value`` to JSON bytes, splicing :class:`Raw` text and writing :class:`Dup` pairs."""
    out: list[bytes] = []
    _encode(value, out)
    return b"".join(out)


def _encode(value: Any, out: list[bytes]) -> None:
    if isinstance(value, Raw):
        out.append(value.text.encode("utf-8", "surrogatepass"))
    elif isinstance(value, Dup):
        _encode_pairs(value.pairs, out)
    elif isinstance(value, dict):
        _encode_pairs(tuple(value.items()), out)
    elif isinstance(value, list):
        out.append(b"[")
        for i, item in enumerate(value):
            if i:
                out.append(b",")
            _encode(item, out)
        out.append(b"]")
    elif isinstance(value, int) and not isinstance(value, bool) and not -(2**63) <= value < 2**64:
        out.append(str(value).encode())  # orjson refuses integers past 64 bits; a client may not
    elif isinstance(value, str):
        out.append(_string(value))
    else:
        out.append(orjson.dumps(value))


def _string(text: str) -> bytes:
    """A JSON string; a lone surrogate (which orjson refuses to write) as its ``\\udXXX`` escape, the way
    a client that builds JSON by hand would send it."""
    try:
        return orjson.dumps(text)
    except orjson.JSONEncodeError:
        return json.dumps(text).encode()


def _encode_pairs(pairs: tuple[tuple[str, Any], ...], out: list[bytes]) -> None:
    out.append(b"{")
    for i, (key, item) in enumerate(pairs):
        if i:
            out.append(b",")
        out.append(_string(key))
        out.append(b":")
        _encode(item, out)
    out.append(b"}")


def _deep(n: int, open_: str, close: str, leaf: str = "1") -> Raw:
    return Raw(open_ * n + leaf + close * n)


_NASTY_TEXT: Final = (
    "NaN", "Infinity", "-Infinity", "1e999", "-1e999", "-0", "-0.0", "1e308", "-1e308", "5e-324",
    "123456789012345678901234567890", "-9223372036854775809", "18446744073709551616", "1E+2",
    '"\\ud800"', '"\\udfff"', '"\\u0000"', "true", "null",
)
"""Number and string literals at the edges of what a JSON parser (and a float) accepts."""

_DEPTHS: Final = (64, 254, 255, 300, 1000, 1024, 1025, 10_000)
"""Around orjson's write limit (254: a body that parses but cannot be re-serialised) and read limit
(1024), and the issue's 10k."""


_LONG: Final = (10**3, 10**4, 10**5) if os.environ.get("FREELLM_FUZZ_EXAMPLES") else (10**3, 10**4)
"""Lengths of the very long arrays. 100k invalid elements cost a surface ~2 s of validation (pydantic
builds one error per element: docs/fuzzing.md), so the normal run stops at 10k and a long hunt goes on."""


def json_values(max_leaves: int = 12) -> st.SearchStrategy[Any]:
    """Plain JSON values (orjson-writable): the ordinary building blocks."""
    scalars = (
        st.none()
        | st.booleans()
        | st.integers(min_value=-(2**63), max_value=2**64 - 1)
        | st.floats(allow_nan=False, allow_infinity=False)
        | st.text(max_size=40)
    )
    return st.recursive(
        scalars,
        lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner, max_size=4),
        max_leaves=max_leaves,
    )


def nasty_values() -> st.SearchStrategy[Any]:
    """Values chosen to break parsers: huge, deep, long, at the edges of numbers and strings."""
    return st.one_of(
        st.sampled_from([Raw(t) for t in _NASTY_TEXT]),
        st.sampled_from(_DEPTHS).map(lambda n: _deep(n, "[", "]")),
        st.sampled_from(_DEPTHS).map(lambda n: _deep(n, '{"a":', "}")),
        st.sampled_from(_DEPTHS).map(lambda n: _deep(n, '{"content":[', "]}", '"x"')),
        st.sampled_from((10**5, 10**6, 4 * 10**6)).map(lambda n: "x" * n),
        st.sampled_from(_LONG).map(lambda n: Raw("[" + ",".join(["0"] * n) + "]")),
        st.sampled_from(_LONG).map(lambda n: Raw("[" + ",".join(['{"type":"text","text":"a"}'] * n) + "]")),
        st.sampled_from((10**4,)).map(lambda n: {f"k{i}": i for i in range(n)}),
        st.sampled_from(["", " ", "\x00", "\u202e", "\U0010ffff", "\ud800", "..", "../../etc/passwd", "%00", "${HOME}"]),
        st.sampled_from([0, -1, 2**31, 2**63 - 1, -(2**63), 2**64, 10**30, -(10**30), 1e308, -0.0, 5e-324]),
        st.sampled_from([[], {}, [None], [[]], [{}], {"": None}]),
    )


def any_value() -> st.SearchStrategy[Any]:
    return st.one_of(json_values(), nasty_values())


Path = tuple[str | int, ...]


def _paths(value: Any, prefix: Path = ()) -> list[Path]:
    """Every path into ``value`` (dict keys and list indexes), the root included."""
    found: list[Path] = [prefix]
    if isinstance(value, dict):
        for key, item in value.items():
            found += _paths(item, (*prefix, key))
    elif isinstance(value, list):
        for i, item in enumerate(value):
            found += _paths(item, (*prefix, i))
    return found


def _copy(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _copy(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_copy(v) for v in value]
    return value


def _set(doc: Any, path: Path, new: Any) -> Any:
    if not path:
        return new
    parent = doc
    for part in path[:-1]:
        parent = parent[part]
    parent[path[-1]] = new
    return doc


def _delete(doc: Any, path: Path) -> Any:
    if not path:
        return doc
    parent = doc
    for part in path[:-1]:
        parent = parent[part]
    del parent[path[-1]]
    return doc


@st.composite
def _mutation(draw: st.DrawFn, doc: Any) -> Any:
    paths = _paths(doc)
    path = draw(st.sampled_from(paths))
    target: Any = doc
    for part in path:
        target = target[part]
    op = draw(st.sampled_from(("replace", "replace", "replace", "delete", "add", "wrap", "dup")))
    if op == "replace" or (op in ("delete", "dup") and not path):
        return _set(doc, path, draw(any_value()))
    if op == "delete":
        return _delete(doc, path)
    if op == "wrap":  # the right value, one level too deep or too shallow in a list
        return _set(doc, path, draw(st.sampled_from(([target], {"value": target}, [[target]]))))
    if op == "add":
        if isinstance(target, dict):
            key = draw(st.sampled_from(("stream", "model", "n", "metadata", "extra", "__proto__", "")) | st.text(max_size=8))
            target[key] = draw(any_value())
        elif isinstance(target, list):
            target.append(draw(any_value()))
        else:
            return _set(doc, path, draw(any_value()))
        return doc
    # dup: the parent object written with this key twice, the second time with a hostile value
    parent_path, last = path[:-1], path[-1]
    parent: Any = doc
    for part in parent_path:
        parent = parent[part]
    if not isinstance(parent, dict):
        return _set(doc, path, draw(any_value()))
    pairs = (*parent.items(), (last, draw(any_value())))
    return _set(doc, parent_path, Dup(tuple(pairs)))


@st.composite
def mutated(draw: st.DrawFn, valid: dict[str, Any]) -> bytes:
    """``valid`` with one to three mutations, serialised (see the module docstring)."""
    doc: Any = _copy(valid)
    for _ in range(draw(st.integers(min_value=1, max_value=3))):
        if isinstance(doc, Dup | Raw):
            break
        doc = draw(_mutation(doc))
    return encode(doc)


def json_documents() -> st.SearchStrategy[bytes]:
    """Any JSON document: objects with random keys, arrays, bare scalars, and the nasty values."""
    return st.one_of(json_values(max_leaves=30), nasty_values()).map(encode)


_INVALID_UTF8: Final = (b"\xff", b"\xfe", b"\xc0\x80", b"\xed\xa0\x80", b"\xf4\x90\x80\x80", b"\x80", b"\xe2\x82", b"\x00")


@st.composite
def raw_bodies(draw: st.DrawFn, valid: dict[str, Any]) -> bytes:
    """Bytes that are not clean JSON, mostly built from ``valid`` so the parser gets past the first byte."""
    text = encode(valid)
    kind = draw(st.sampled_from(("utf8", "utf8", "dupkeys", "truncate", "binary", "bom", "trailing", "escape")))
    if kind == "utf8":  # invalid UTF-8 inside a string value
        quotes = [i for i, b in enumerate(text) if b == ord('"')]
        at = draw(st.sampled_from(quotes)) + 1
        return text[:at] + draw(st.sampled_from(_INVALID_UTF8)) + text[at:]
    if kind == "dupkeys":  # every top-level key twice: first valid, then hostile
        pairs: list[tuple[str, Any]] = []
        for key, value in valid.items():
            pairs.append((key, value))
            pairs.append((key, draw(any_value())))
        return encode(Dup(tuple(pairs)))
    if kind == "truncate":
        return text[: draw(st.integers(min_value=0, max_value=max(0, len(text) - 1)))]
    if kind == "bom":
        return b"\xef\xbb\xbf" + text
    if kind == "trailing":
        return text + draw(st.sampled_from((b" x", b"}", b",", b"\x00", b"\n{}", b"//c")))
    if kind == "escape":  # an escape sequence JSON does not have, or a lone surrogate
        at = text.index(b'"') + 1
        return text[:at] + draw(st.sampled_from((b"\\x41", b"\\ud800", b"\\u12", b"\\", b"\\U0001f600"))) + text[at:]
    return draw(st.binary(max_size=256))
