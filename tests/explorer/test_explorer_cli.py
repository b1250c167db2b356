"""The ``neuron-explorer`` entry point: defaults (127.0.0.1, no debug), URL printed, paths checked."""
from __future__ import annotations

import dash
import pytest

from explorer import cli


def test_defaults_bind_localhost_without_debug():
    a = cli.parse_args([])
    assert (a.path, a.host, a.port, a.debug) == (None, "127.0.0.1", 8050, False)


def test_main_serves_the_given_folder_with_waitress(served_dir, monkeypatch, capsys):
    seen = {}
    import waitress

    monkeypatch.setattr(waitress, "serve", lambda wsgi, **kw: seen.update(kw, wsgi=wsgi))
    monkeypatch.setattr(dash.Dash, "run", lambda self, **kw: pytest.fail("the development server was used"))
    assert cli.main([str(served_dir), "--port", "8123"]) == 0
    out = capsys.readouterr()
    assert "http://127.0.0.1:8123/" in out.out
    assert seen["host"] == "127.0.0.1" and seen["port"] == 8123 and seen["threads"] == 8
    seen["app"] = [a for a in [getattr(seen["wsgi"], "_explorer_app", None)] if a][0]
    store = seen["app"]._explorer_ctx.store
    assert store.root == served_dir.resolve()
    # the first listed trace is broken: reported, not fatal, and the next good one opens first
    assert "broken.nprof" in out.err
    assert store.default_key() == "run/rank00000_window000.nprof"


def test_debug_uses_the_development_server(served_dir, monkeypatch, capsys):
    seen = {}
    monkeypatch.setattr(dash.Dash, "run", lambda self, **kw: seen.update(kw))
    assert cli.main([str(served_dir / "single.nprof"), "--debug"]) == 0
    assert seen["debug"] is True and seen["host"] == "127.0.0.1"


def test_missing_path_exits_with_message():
    with pytest.raises(SystemExit, match="no such file"):
        cli.resolve_path("/nonexistent/trace.nprof")


def test_no_argument_opens_the_bundled_sample_or_a_demo(monkeypatch, tmp_path):
    p = cli.resolve_path(None)
    if cli.SAMPLE.is_file():
        assert p == cli.SAMPLE_DIR
    else:
        assert p.suffix == ".nprof" and p.is_file()


@pytest.mark.slow
def test_no_argument_serves_the_sample_folder_eager_gpt_first(monkeypatch, capsys):
    """The Quickstart's ``neuron-explorer``: every bundled sample is listed (Compare has a partner, the DDP ranks
    form a run for Collectives) and the eager GPT step opens first."""
    if not cli.SAMPLE.is_file():
        pytest.skip("the bundled samples are not installed")
    seen = {}
    import waitress

    monkeypatch.setattr(waitress, "serve", lambda wsgi, **kw: seen.update(wsgi=wsgi))
    assert cli.main([]) == 0
    store = seen["wsgi"]._explorer_app._explorer_ctx.store
    keys = {e.key for e in store.entries()}
    on_disk = {f.name for f in cli.SAMPLE_DIR.glob("*.nprof")}
    assert on_disk <= keys and len(on_disk) >= 4
    groups = [e for e in store.entries() if e.is_group]
    assert [len(g.members) for g in groups] == [2]  # the DDP run
    assert store.default_key() == cli.SAMPLE.name
    assert f"({len(store.entries())} traces)" in capsys.readouterr().out
