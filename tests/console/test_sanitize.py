from rich.console import Console

from symphony_tui.console.sanitize import clean, inert, one_line


def test_csi_colour_and_clear_screen_removed():
    assert clean("\x1b[31mred\x1b[0m \x1b[2Jok") == "red ok"


def test_osc52_clipboard_write_removed_bel_and_st():
    assert clean("a\x1b]52;c;ZXZpbA==\x07b") == "ab"
    assert clean("a\x1b]52;c;ZXZpbA==\x1b\\b") == "ab"


def test_osc8_hyperlink_keeps_label_only():
    assert clean("\x1b]8;;https://evil\x1b\\click\x1b]8;;\x1b\\") == "click"


def test_unterminated_osc_swallows_rest_not_the_terminal():
    assert clean("safe\x1b]0;title without end") == "safe"


def test_c1_controls_and_8bit_csi_removed():
    assert clean("x\x9b31my\x9dtitle\x9cz\x85") == "xyz"


def test_c0_del_and_bidi_controls_removed():
    assert clean("a\x00b\x07c\x08d\x7fe\u202efg\u2066h") == "abcdefgh"


def test_other_escapes_removed():
    assert clean("a\x1bcb\x1b(Bc\x1b=d") == "abcd"


def test_newlines_single_line_vs_multiline():
    assert clean("one\r\ntwo\rthree\nfour") == "one two three four"
    assert clean("one\r\ntwo\rthree", multiline=True) == "one\ntwo\nthree"
    assert clean("a\tb") == "a    b"


def test_non_strings_and_none():
    assert clean(None) == ""
    assert clean(42) == "42"


def test_one_line_collapses_and_truncates():
    assert one_line("  a   b\n\nc  ") == "a b c"
    assert one_line("abcdefghij", 5) == "abcd…"
    assert one_line("abc", 5) == "abc"


def test_inert_text_shows_markup_literally():
    text = inert("[bold]x[/bold] :smile: \x1b[1mY")
    assert text.plain == "[bold]x[/bold] :smile: Y"
    assert text.spans == []
    console = Console(record=True, width=80, color_system="truecolor", force_terminal=True)
    console.print(text)
    out = console.export_text(styles=True)
    assert "[bold]x[/bold]" in out
    assert "\x1b[1m" not in out  # no bold from the agent's markup or escape
    assert "😄" not in out


def test_inert_multiline_keeps_lines():
    assert inert("a\nb\x1b[31m", multiline=True).plain == "a\nb"
