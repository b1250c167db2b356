"""Issue 26: the explorer answers only requests naming the address it serves (DNS rebinding), says in one line
when it cannot serve (a busy port, a missing dependency).

Was: any ``Host`` header was served, so a web page whose name was rebound to 127.0.0.1 could read the traces and
run SQL through the user's browser."""
from __future__ import annotations

import json
import re
import socket
import sys

import dash
import pytest

from explorer import cli
from explorer.app import create_app
from explorer.hostcheck import AllowedHosts, HostCheck, protect

PORT = 8050
FOREIGN = ["evil.example", "evil.example:8050", "127.0.0.1.evil.example:8050", "127.0.0.1:8051", "localhost",
           "[::2]:8050", "", "127.0.0.1:8050@evil.example", "0.0.0.0:8050"]
LOCAL = ["127.0.0.1:8050", "localhost:8050", "LOCALHOST:8050", "[::1]:8050"]


@pytest.fixture(scope="module")
def client(served_dir):
    app = create_app(served_dir)
    protect(app.server, "127.0.0.1", PORT)
    return app.server.test_client()


def _routes(client) -> list[tuple[str, str, bytes | None]]:
    """(method, path, body) of every kind of route: Dash pages, layout, dependencies, a component bundle, an
    asset, a callback (the router, the SQL page's), the timeline API, the docs."""
    page = client.get("/timeline?trace=single.nprof", headers={"Host": "127.0.0.1:8050"})
    assert page.status_code == 200
    bundle = re.search(r'src="(/_dash-component-suites/[^"]+)"', page.get_data(as_text=True)).group(1)
    deps = client.get("/_dash-dependencies", headers={"Host": "127.0.0.1:8050"}).get_json()
    router = next(d for d in deps if "page.children" in d["output"])
    body = json.dumps({"output": router["output"],
                       "outputs": [{"id": o.split(".")[0], "property": o.split(".")[1]}
                                   for o in router["output"].strip(".").split("...")],
                       "inputs": [{"id": i["id"], "property": i["property"],
                                   "value": "/query" if i["property"] == "pathname" else
                                   "?trace=single.nprof&sql=SELECT+count(*)+FROM+instructions"}
                                  for i in router["inputs"]],
                       "state": [{"id": s["id"], "property": s["property"], "value": None} for s in router["state"]],
                       "changedPropIds": ["url.pathname"]}).encode()
    return [("GET", "/", None), ("GET", "/timeline?trace=single.nprof", None), ("GET", "/_dash-layout", None),
            ("GET", "/_dash-dependencies", None), ("GET", bundle, None), ("GET", "/assets/timeline.js", None),
            ("GET", "/api/timeline/view?trace=single.nprof&t0=0&t1=1000000&w=800", None),
            ("GET", "/api/timeline/at?trace=single.nprof&row=0&t=1000", None),
            ("GET", "/api/frames/wait?token=x&timeout=0", None),
            ("GET", "/doc/explorer", None), ("POST", "/_dash-update-component", body)]


def test_every_registered_url_rule_is_refused_for_a_foreign_host(client) -> None:
    """Each URL rule the app registers (a new API endpoint included), its variable parts filled in."""
    rules = list(client.application.url_map.iter_rules())
    assert any(r.rule == "/api/frames/wait" for r in rules) and any(r.rule == "/api/timeline/at" for r in rules)
    for rule in rules:
        path = re.sub(r"<[^>]+>", "x", rule.rule)
        for method in sorted((rule.methods or {"GET"}) - {"HEAD", "OPTIONS"}):
            r = _request(client, method, path, b"{}" if method == "POST" else None, {"Host": "evil.example"})
            assert r.status_code == 403, (method, rule.rule, r.status_code)


def _request(client, method: str, path: str, body: bytes | None, headers: dict):
    return client.open(path, method=method, data=body, headers={"Content-Type": "application/json", **headers})


def test_a_foreign_host_gets_403_from_every_route(client) -> None:
    for method, path, body in _routes(client):
        for host in FOREIGN:
            r = _request(client, method, path, body, {"Host": host})
            assert r.status_code == 403, (method, path, host, r.status_code)
            assert b"--allow-host" in r.data and b"single.nprof" not in r.data and b"instructions" not in r.data


def test_the_served_addresses_are_answered(client) -> None:
    for method, path, body in _routes(client):
        for host in LOCAL:
            r = _request(client, method, path, body, {"Host": host})
            assert r.status_code == 200, (method, path, host, r.status_code, r.data[:300])
    r = _request(client, *_routes(client)[-1], {"Host": "127.0.0.1:8050"})
    assert b"count_star()" in r.data  # the SQL page's query ran for the local request


def test_a_foreign_origin_cannot_change_state(client) -> None:
    """A state-changing request (a callback POST) must carry no Origin or the served one; GETs are not
    state-changing (a page may embed an image from anywhere; the Host check still applies)."""
    _, path, body = _routes(client)[-1]
    for origin in ["http://evil.example", "http://127.0.0.1:8051", "null", "https://localhost:8050.evil.example",
                   "file://"]:
        r = _request(client, "POST", path, body, {"Host": "127.0.0.1:8050", "Origin": origin})
        assert r.status_code == 403, origin
    for origin in ["http://127.0.0.1:8050", "http://localhost:8050"]:
        assert _request(client, "POST", path, body, {"Host": "127.0.0.1:8050", "Origin": origin}).status_code == 200
    r = _request(client, "GET", "/_dash-layout", None, {"Host": "127.0.0.1:8050", "Origin": "http://evil.example"})
    assert r.status_code == 200


def test_allowed_hosts_oracle() -> None:
    a = AllowedHosts("127.0.0.1", 8050, ["explorer.corp", "proxy.corp:443"])
    assert all(a.allows(h) for h in LOCAL + ["explorer.corp", "explorer.corp:9999", "proxy.corp:443"])
    assert not any(a.allows(h) for h in FOREIGN + ["proxy.corp", "proxy.corp:8050"])
    assert AllowedHosts("127.0.0.1", 80).allows("localhost")  # port 80: browsers leave it out
    assert AllowedHosts("127.0.0.1", 8050, ["*"]).allows("anything:1")
    assert AllowedHosts("0.0.0.0", 8050).allows(f"{socket.gethostname()}:8050")
    assert AllowedHosts("10.1.2.3", 8050).allows("10.1.2.3:8050")
    assert a.allows_origin("https://proxy.corp") and not a.allows_origin("https://proxy.corp:8443")


def test_main_wraps_the_served_app_and_passes_allow_host(served_dir, monkeypatch, capsys) -> None:
    import waitress

    seen: dict = {}
    monkeypatch.setattr(waitress, "serve", lambda wsgi, **kw: seen.update(kw, wsgi=wsgi))
    assert cli.main([str(served_dir / "single.nprof"), "--port", "8124", "--allow-host", "box.corp"]) == 0
    mw = seen["wsgi"].wsgi_app
    assert isinstance(mw, HostCheck) and mw.allowed.allows("box.corp") and mw.allowed.allows("localhost:8124")
    assert not mw.allowed.allows("evil.example:8124")


def test_debug_server_is_wrapped_too(served_dir, monkeypatch) -> None:
    seen: dict = {}
    monkeypatch.setattr(dash.Dash, "run", lambda self, **kw: seen.update(wsgi=self.server.wsgi_app))
    assert cli.main([str(served_dir / "single.nprof"), "--debug"]) == 0
    assert isinstance(seen["wsgi"], HostCheck)


def test_a_busy_port_is_one_line(served_dir, capsys) -> None:
    """Was: waitress's OSError traceback."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen(1)
        port = s.getsockname()[1]
        assert cli.main([str(served_dir / "single.nprof"), "--port", str(port)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1] == f"neuron-explorer: error: cannot serve on 127.0.0.1:{port}: the port is in use (another " \
                      f"neuron-explorer?): pick another --port"


def test_a_missing_dependency_is_one_line(served_dir, monkeypatch, capsys) -> None:
    for name in list(sys.modules):
        if name == "explorer.app" or name.startswith(("dash_mantine_components",)):
            monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "dash_mantine_components", None)
    assert cli.main([str(served_dir / "single.nprof")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "dash_mantine_components" in err and "Traceback" not in err


def test_create_app_is_protected_before_any_port_is_chosen(served_dir) -> None:
    """``create_app(path).run()`` from Python is protected too: loopback names on any port, ``allow_hosts``."""
    c = create_app(served_dir).server.test_client()
    assert c.get("/_dash-layout").status_code == 200  # the test client's Host: localhost
    assert c.get("/_dash-layout", headers={"Host": "127.0.0.1:9"}).status_code == 200
    assert c.get("/_dash-layout", headers={"Host": "evil.example:8050"}).status_code == 403
    c = create_app(served_dir, allow_hosts=("box.corp",)).server.test_client()
    assert c.get("/_dash-layout", headers={"Host": "box.corp:1234"}).status_code == 200
