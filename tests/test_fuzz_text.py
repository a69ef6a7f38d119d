"""User text, fuzzed: rich markup and non-ASCII characters in every user-facing string (task names,
keys, paths, plugins), and overrides and first arguments of any length. Each must be refused with exit
2 and one line that shows the text as written."""

from __future__ import annotations

from fuzz_support import dump, fuzz, refuse
from hypothesis import given
from hypothesis import strategies as st

# rich markup, brackets, escapes, non-ASCII letters and invisible or right-to-left characters
FRAGMENTS = ["[/x]", "[bold]", "[Errno 28]", "[/]", "[", "]", "\\", "ü", "日本", "é", "\u202e", "\u00a0", "a", "_"]
TEXT = st.lists(st.sampled_from(FRAGMENTS), min_size=1, max_size=6).map("".join)


def _shown(text: str, line: str) -> bool:
    """The user's text appears in the message as written (or as its repr), markup not swallowed."""
    return text in line or repr(text)[1:-1] in line


@fuzz(60)
@given(text=TEXT, where=st.sampled_from(["task.kind", "eval.other_class", "features.path", "key", "section key",
                                         "config path", "plugin"]))
def test_markup_and_non_ascii_text_in_user_strings(text, where):
    files, args = {}, ["c.yaml"]
    if where == "task.kind":
        data, expect = {"task": {"kind": text}}, ["task.kind"]
    elif where == "eval.other_class":
        data, expect = {"eval": {"other_class": text}}, ["eval.other_class"]
    elif where == "features.path":
        data, expect = {"features": {"kind": "file", "path": f"{text}.npy"}}, ["features.path"]
    elif where == "key":
        data, expect = {f"zz{text}": 1}, ["unknown key"]
    elif where == "section key":
        data, expect = {"train": {f"zz{text}": 1}}, ["unknown key"]
    elif where == "plugin":
        data, expect = {"plugins": [text]}, ["plugins"]
    else:
        data, args, expect = None, [f"zz{text}.yaml"], ["no such file"]
    if data is not None:
        files["c.yaml"] = dump(data)
    line = refuse(files, args, expect, "markup text")
    if where in ("task.kind", "eval.other_class", "features.path", "config path"):
        assert _shown(text, line), line


LONG_TEXT = st.tuples(st.text(st.characters(codec="utf-8", exclude_characters="\x00"), max_size=20),
                      st.integers(0, 600)).map(lambda t: ((t[0] or "a") * t[1])[: t[1]])  # any length up to 600


@fuzz(60)
@given(text=LONG_TEXT, shape=st.sampled_from(["value", "key", "path"]))
def test_override_strings_of_any_length(text, shape):
    """Overrides and first arguments of any length (a first argument of 256 characters or more was
    taken as a file name and exited 1), with any characters."""
    if shape == "value":  # a value that is not a number: refused for task.L
        refuse({}, [f"task.L=x{text}"], ["task.L", "override"], "long override")
    elif shape == "key":
        refuse({}, [f"zz{text}=1"], ["zz", "override", "config"], "long override")
    else:
        refuse({}, [f"zz{text.replace('=', '')}.yaml"], ["no such file", "not a file"], "long override")
