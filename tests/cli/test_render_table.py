"""``render.table``: a table declared by its column names, whose last characters say how each column shows."""

from __future__ import annotations

from spillway.cli.render import table


def test_a_columns_marks_say_how_it_shows() -> None:
    made = table(("operator id", "bytes>", "why~", "total*", "sum>*"), [("a1", "10", "a reason", "3", "4")], "title")
    assert [c.header for c in made.columns] == ["operator id", "bytes", "why", "total", "sum"]
    assert [c.justify for c in made.columns] == ["left", "right", "left", "left", "right"]
    # identifiers are never wrapped; only prose is, and a word too long for its line is folded, not cut off
    assert [c.no_wrap for c in made.columns] == [True, True, False, True, True]
    assert [c.overflow for c in made.columns] == ["ellipsis", "ellipsis", "fold", "ellipsis", "ellipsis"]
    assert [c.style for c in made.columns] == ["", "", "", "bold", "bold"]
    assert (made.title, made.title_justify, made.row_count) == ("title", "left", 1)
    assert list(made.columns[2].cells) == ["a reason"]


def test_settings_reach_the_table() -> None:
    made = table(("a", "b"), [], box=None, show_edge=False)
    assert made.box is None and made.show_edge is False and made.title is None and made.row_count == 0
