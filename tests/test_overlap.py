"""The read-ahead and write-behind threads of a unit (ube_stream.shards.overlap):
order, back-pressure, errors handed over as themselves, no thread left behind."""
import threading
import time

import pytest

from ube_stream.shards.overlap import ReadAhead, WriteBehind


def _threads():
    return {t.name for t in threading.enumerate()}


def test_read_ahead_yields_in_order_and_prepares_in_its_thread():
    seen = []

    def prepare(x):
        seen.append(threading.current_thread().name)
        return x * 2

    with ReadAhead(iter(range(100)), prepare=prepare, depth=2) as ahead:
        assert list(ahead) == [2 * i for i in range(100)]
    assert set(seen) == {"ube-read-ahead"}
    assert "ube-read-ahead" not in _threads()


def test_read_ahead_stays_at_most_depth_items_ahead():
    produced = []

    def items():
        for i in range(50):
            produced.append(i)
            yield i

    with ReadAhead(items(), depth=3) as ahead:
        it = iter(ahead)
        assert next(it) == 0
        time.sleep(0.2)
        # one handed out, three in the queue, one waiting to be put
        assert len(produced) <= 1 + 3 + 1


def test_read_ahead_raises_the_iterators_error_where_its_item_would_come():
    class Broken(ValueError):
        pass

    def items():
        yield 1
        yield 2
        raise Broken("row 3 is bad")

    got = []
    with ReadAhead(items()) as ahead:
        with pytest.raises(Broken, match="row 3 is bad"):
            for x in ahead:
                got.append(x)
    assert got == [1, 2]


def test_read_ahead_close_part_way_closes_the_generator_in_its_thread():
    closed = []

    def items():
        try:
            for i in range(10 ** 6):
                yield i
        finally:
            closed.append(threading.current_thread().name)

    ahead = ReadAhead(items(), depth=1)
    for x in ahead:
        if x == 5:
            break
    ahead.close()
    assert closed == ["ube-read-ahead"]
    assert "ube-read-ahead" not in _threads()


def test_write_behind_runs_calls_in_order_and_wait_returns_when_all_ran():
    out = []
    with WriteBehind(depth=2) as behind:
        for i in range(200):
            behind.submit(out.append, i)
        behind.wait()
        assert out == list(range(200))
    assert "ube-write-behind" not in _threads()


def test_write_behind_hands_over_the_first_error_and_drops_later_calls():
    out = []

    def write(i):
        if i == 3:
            raise OSError(28, "No space left on device", "/out/shards/x.tokens")
        out.append(i)

    behind = WriteBehind(depth=1)
    with pytest.raises(OSError) as info:
        for i in range(50):
            behind.submit(write, i)
        behind.wait()
    assert info.value.filename == "/out/shards/x.tokens" and info.value.errno == 28
    behind.close()
    assert out == [0, 1, 2]
    assert "ube-write-behind" not in _threads()


def test_write_behind_close_without_wait_drops_what_has_not_started():
    started = threading.Event()
    release = threading.Event()
    out = []

    def slow(i):
        started.set()
        release.wait(5)
        out.append(i)

    behind = WriteBehind(depth=4)
    for i in range(4):
        behind.submit(slow, i)
    started.wait(5)
    closer = threading.Thread(target=behind.close)
    closer.start()
    time.sleep(0.05)    # close() has said stop, and waits for the running call
    release.set()
    closer.join(5)
    assert not closer.is_alive()
    assert out == [0]   # the call that had started finishes; the rest are dropped


def test_a_unit_run_in_this_process_leaves_no_thread(tmp_path):
    import json

    from ube_stream import train
    from ube_stream.shards import encode_corpus

    texts = [f"document {i}: some text, 日本語の文 {i}" for i in range(300)]
    corpus = tmp_path / "c.jsonl"
    corpus.write_text("".join(json.dumps({"text": t}) + "\n" for t in texts), encoding="utf-8")
    tok = train(iter(texts), vocab_size=600, substrate="ube", workers=1, show_progress=False)
    before = threading.active_count()
    manifest = encode_corpus([str(corpus)], tokenizer=tok, output=str(tmp_path / "out"), workers=1,
                             unit_rows=100, show_progress=False)
    assert manifest["totals"]["documents"] == 300 and len({s["unit_id"] for s in manifest["shards"]}) == 3
    assert threading.active_count() == before
    assert not {n for n in _threads() if n.startswith("ube-")}


def test_unthreaded_does_the_same_in_the_calling_thread():
    def items():
        yield 1
        yield 2
        raise KeyError("gone")

    got, calls = [], []
    with ReadAhead(items(), prepare=lambda x: (x, threading.current_thread().name), threaded=False) as ahead:
        with pytest.raises(KeyError):
            for x in ahead:
                got.append(x)
    main = threading.current_thread().name
    assert got == [(1, main), (2, main)]
    with WriteBehind(threaded=False) as behind:
        for i in range(5):
            behind.submit(lambda i: calls.append((i, threading.current_thread().name)), i)
        behind.wait()
    assert calls == [(i, main) for i in range(5)]
    assert not {n for n in _threads() if n.startswith("ube-")}


# --------------------------------------------------------------------------- OrderedMap

def _slow_square(x):
    time.sleep(0.001 * (x % 3))   # later items often finish first
    return x * x


@pytest.mark.parametrize("threads", [1, 2, 3])
def test_ordered_map_keeps_the_input_order(threads):
    from ube_stream.shards.overlap import OrderedMap

    names = set()

    def fn(x):
        names.add(threading.current_thread().name)
        return _slow_square(x)

    with OrderedMap(iter(range(60)), fn, threads) as mapped:
        assert list(mapped) == [x * x for x in range(60)]
    assert (names == {threading.current_thread().name}) == (threads == 1)
    assert not any(name.startswith("ube-map") for name in _threads())


def test_ordered_map_takes_at_most_depth_items_ahead():
    from ube_stream.shards.overlap import OrderedMap

    taken = []

    def items():
        for i in range(100):
            taken.append(i)
            yield i

    with OrderedMap(items(), lambda x: x, threads=2, depth=4) as mapped:
        it = iter(mapped)
        assert next(it) == 0
        time.sleep(0.2)
        assert len(taken) <= 1 + 4 + 1   # one yielded, four in flight, one being taken


@pytest.mark.parametrize("where", ["fn", "items"])
def test_ordered_map_raises_where_the_failing_item_would_come(where):
    from ube_stream.shards.overlap import OrderedMap

    class Broken(ValueError):
        pass

    def items():
        for i in range(50):
            if where == "items" and i == 17:
                raise Broken(i)
            yield i

    def fn(x):
        if where == "fn" and x == 17:
            raise Broken(x)
        return _slow_square(x)

    got = []
    with pytest.raises(Broken) as info:
        with OrderedMap(items(), fn, threads=3) as mapped:
            for value in mapped:
                got.append(value)
    assert info.value.args == (17,) and got == [x * x for x in range(17)]
    assert not any(name.startswith("ube-map") for name in _threads())


def test_ordered_map_closed_early_leaves_no_thread():
    from ube_stream.shards.overlap import OrderedMap

    with OrderedMap(iter(range(1000)), _slow_square, threads=3) as mapped:
        for value in mapped:
            if value > 20:
                break
    assert not any(name.startswith("ube-map") for name in _threads())
