"""A run's log on its way to luigid (``TaskLogSink``): decoded whole, cut by UTF-8 bytes, secrets masked."""

from __future__ import annotations

from luigi.worker.output_capture import MASK, TaskLogSink, cut_marker


def kept(pieces: list[bytes], max_bytes: int = 1 << 20, secrets: tuple[str, ...] = ()) -> dict | None:
    """The tail a run ends with after writing ``pieces``, none of it shipped before (no chunk is due)."""
    sent: list[tuple] = []
    sink = TaskLogSink(lambda *chunk: sent.append(chunk), max_bytes, secrets)
    for piece in pieces:
        sink.feed(piece)
    sink.finish()
    assert sent == []
    return sink.tail


def test_a_character_split_between_two_writes_is_kept_whole():
    word = "Grüße, 日本\n".encode()
    tail = kept([word[:3], word[3:10], word[10:]])
    assert tail is not None and tail["chunk"] == "Grüße, 日本\n" and tail["offset"] == 0


def test_bytes_that_are_not_utf8_are_replaced_and_the_rest_is_kept():
    tail = kept([b"ok \xff\xfe then\n", b"more\n"])
    assert tail is not None and tail["chunk"] == "ok \ufffd\ufffd then\nmore\n"


def test_a_character_left_unfinished_at_the_end_of_the_run_is_replaced():
    tail = kept([b"end \xc3"])
    assert tail is not None and tail["chunk"] == "end \ufffd"


def test_the_cut_counts_utf8_bytes_not_characters():
    tail = kept(["éééééé".encode()], max_bytes=7)  # 12 bytes written, room for 3 whole characters
    assert tail is not None and tail["chunk"] == "ééé" + cut_marker(7)


def test_a_run_that_wrote_nothing_has_no_log():
    assert kept([]) is None


def test_a_secret_at_the_very_end_of_a_run_is_masked_and_the_text_before_it_kept():
    tail = kept([b"connecting with ", b"hunter22"], secrets=("hunter22",))
    assert tail is not None and tail["chunk"] == f"connecting with {MASK}"


def test_text_held_back_for_a_possible_secret_is_not_lost_when_the_run_ends():
    tail = kept([b"short"], secrets=("hunter22",))
    assert tail is not None and tail["chunk"] == "short"
