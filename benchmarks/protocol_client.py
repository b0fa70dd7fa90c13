"""A Streamlit session without a browser: the messages a browser tab exchanges with the server, and nothing else.

:class:`ProtocolClient` stands in for a laptop in the class benchmark (``benchmarks/bench_browser.py``): the server
cannot tell it from a browser tab, so it puts exactly a tab's load on the server (the same WebSocket messages, the
same script reruns, the same payloads sent), while the drawing that a laptop does for itself costs nothing here.

What it does, as Streamlit's frontend does it (Streamlit 1.67: ``web/server/starlette/starlette_websocket.py``,
``runtime/app_session.py``, ``runtime/scriptrunner_utils/script_run_context.py``; the frontend's ``App.tsx``
``sendRerunBackMsg`` and ``WidgetStateManager``):

* **Open a page**: GET the page's HTML and the scripts, stylesheets, font and icon it names (``_static_urls``),
  ``/_stcore/health`` and ``/_stcore/host-config`` (a browser with an empty cache; one request after another,
  where a browser makes several at once), then connect to ``ws://HOST/_stcore/stream``
  (subprotocol ``streamlit``, ``Origin`` of the page, permessage-deflate offered as Chromium offers it; Streamlit
  accepts it only with ``server.enableWebsocketCompression``, off by default) and send a
  ``BackMsg.rerun_script`` whose ``ClientState`` names the page by ``page_name`` (the URL path, e.g.
  ``OD_release``; ``page_script_hash`` empty: the browser does not know the hashes before the first
  ``new_session``), no widget states, and the browser's ``context_info``.
* **Read the run**: ``new_session`` and ``navigation`` (the script hash of the page that ran, sent in every later
  rerun as ``page_script_hash``, as the frontend's ``AppNavigation`` keeps it), ``delta`` messages (elements by
  their delta path; root container 1 is the sidebar), ``ref_hash`` messages (an element the client said it has
  cached: resolved from its own cache) and ``script_finished``. ``FINISHED_EARLY_FOR_RERUN`` (a callback's or
  ``st.rerun``'s rerun) is not the end; ``FINISHED_SUCCESSFULLY`` is.
* **Widget states**: every widget drawn in the last run has a state, its current value as the server sent it
  (``value`` when ``set_value``, else ``default``), encoded in the field the browser uses (slider:
  ``double_array_value``; number input: ``int_value`` or ``double_value`` by its data type; select box and radio:
  ``string_value`` of the shown option; checkbox/toggle: ``bool_value``; text input: ``string_value``). Widgets
  that the last successful run did not draw are dropped (``WidgetStateManager.removeInactive``). Buttons have no
  state until clicked. Every rerun sends all states, with the changed one changed. Not modelled: a form (a browser
  holds a changed form widget back until the form is submitted; :meth:`ProtocolClient.set_value` sends it at once).
* **Message cache**: messages the server marks ``metadata.cacheable`` are kept by hash and their hashes are sent
  in ``cached_message_hashes``; the server then sends a ``ref_hash`` instead of the element. An entry not used for
  ``CACHE_MAX_AGE`` runs is dropped (Streamlit's ``global.maxCachedMessageAge``).

Errors are collected, never raised in the middle of a run: an ``exception`` element in the run (the page showed a
traceback), ``FINISHED_WITH_COMPILE_ERROR``, ``page_not_found``, a ``ref_hash`` the client cannot resolve, a closed
socket, and a run that does not finish within ``timeout_s`` (:class:`RunTimeout`).
"""

from __future__ import annotations

import asyncio
import functools
import http.client
import re
import time
import urllib.request
from dataclasses import dataclass, field

from streamlit.proto.BackMsg_pb2 import BackMsg
from streamlit.proto.ClientState_pb2 import ClientState
from streamlit.proto.Element_pb2 import Element
from streamlit.proto.ForwardMsg_pb2 import ForwardMsg
from streamlit.proto.WidgetStates_pb2 import WidgetState

CACHE_MAX_AGE = 2          # runs an unused cached message is kept (Streamlit's global.maxCachedMessageAge)
SIDEBAR_ROOT = 1           # delta_path[0] of the sidebar (RootContainer.SIDEBAR)
BROWSER_HEADERS = {"User-Agent": "odlab-protocol-client", "Accept-Encoding": "gzip, deflate, br, zstd"}


class RunTimeout(Exception):
    """A run did not reach ``script_finished`` in time."""


@dataclass
class Run:
    """One script run as the client received it, from the request to ``script_finished``.

    ``ms``: from sending the request to receiving ``script_finished``; ``bytes``: WebSocket payload bytes received
    (decompressed if the server compresses, as the browser benchmark counts them); ``elements``: delta path ->
    element of the run (``ref_hash`` messages resolved); ``errors``: what went wrong in this run (empty when fine).
    """

    ms: float = 0.0
    bytes: int = 0
    messages: int = 0
    status: str = ""
    elements: dict[tuple[int, ...], Element] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)

    def find(self, kind: str, label: str, *, sidebar: bool | None = None) -> Element | None:
        """The first element of type ``kind`` (``"slider"``, ``"metric"``, ...) whose label contains ``label``."""
        for path, el in sorted(self.elements.items()):
            if el.WhichOneof("type") != kind or (sidebar is not None and (path[:1] == (SIDEBAR_ROOT,)) != sidebar):
                continue
            if label in getattr(el, kind).label:
                return el
        return None


def widget_state(el: Element) -> WidgetState | None:
    """The state the browser keeps for widget element ``el`` (its current value), or None for an element without
    one (not a widget, a button, a kind this client does not model: the server then keeps its last value)."""
    kind = el.WhichOneof("type")
    w = getattr(el, kind) if kind else None
    if w is None or not getattr(w, "id", ""):
        return None
    s = WidgetState(id=w.id)
    if kind == "slider" and w.type == w.SELECT_SLIDER:   # the browser sends the options' labels, not indices
        s.string_array_value.data.extend(w.options[int(i)] for i in (w.value if w.set_value else w.default))
    elif kind == "slider":
        s.double_array_value.data.extend(w.value if w.set_value else w.default)
    elif kind == "number_input":
        if w.set_value:
            v = w.value
        elif w.HasField("default"):
            v = w.default
        else:
            return None   # empty (value=None): the browser sends no value either
        if w.data_type == w.INT:
            s.int_value = int(v)
        else:
            s.double_value = v
    elif kind in ("selectbox", "radio"):
        if w.set_value:
            s.string_value = w.raw_value
        elif w.HasField("default") and 0 <= w.default < len(w.options):
            s.string_value = w.options[w.default]
        else:
            return None
    elif kind == "checkbox":
        s.bool_value = w.value if w.set_value else w.default
    elif kind == "text_input":
        if w.set_value:
            s.string_value = w.value
        elif w.HasField("default"):
            s.string_value = w.default
        else:
            return None
    else:
        return None
    return s


FETCHED_RELS = {"stylesheet", "modulepreload", "preload", "icon"}   # what a browser loads of <link rel=...>


def _static_urls(base: str, html: str) -> list[str]:
    """What a browser fetches of the page's HTML at once: ``<script src>`` and the ``<link>`` files of the kinds in
    ``FETCHED_RELS`` (not e.g. ``service-desc``), as absolute URLs on ``base``."""
    out = []
    for m in re.finditer(r"<(script|link)\b([^>]*)>", html):
        attrs = dict(re.findall(r'([a-z-]+)="([^"]*)"', m.group(2)))
        u = attrs.get("src" if m.group(1) == "script" else "href")
        if not u or u.startswith(("http://", "https://", "data:")):
            continue
        if m.group(1) == "link" and not FETCHED_RELS & set(attrs.get("rel", "").split()):
            continue
        out.append(base + "/" + u.removeprefix("./").lstrip("/"))
    return out


class _FromHandler(urllib.request.HTTPHandler):
    """HTTP from a given local address (another loopback address, 127.0.0.2, …: another machine to the server)."""

    def __init__(self, source: str):
        super().__init__()
        self.source = source

    def http_open(self, req):
        return self.do_open(functools.partial(http.client.HTTPConnection, source_address=(self.source, 0)), req)


@functools.cache
def _opener(source: str | None):
    """127.0.0.1 directly, never a proxy; from the local address ``source`` when given."""
    return urllib.request.build_opener(urllib.request.ProxyHandler({}), *([_FromHandler(source)] if source else []))


def _get(url: str, headers: dict = BROWSER_HEADERS, source: str | None = None) -> bytes:
    with _opener(source).open(urllib.request.Request(url, headers=headers), timeout=60) as r:
        return r.read()


def fetch_page_assets(url: str, path: str, source: str | None = None) -> int:
    """GET a page as a browser with an empty cache does before its WebSocket: the HTML, every script and stylesheet
    it names, the health and host-config endpoints. Returns the bytes received."""
    html = _get(f"{url}/{path}", {"User-Agent": BROWSER_HEADERS["User-Agent"]}, source)   # uncompressed, to read it
    n = len(html)
    for u in _static_urls(url, html.decode("utf-8", "replace")):
        n += len(_get(u, source=source))
    for ep in ("_stcore/health", "_stcore/host-config"):
        n += len(_get(f"{url}/{ep}", source=source))
    return n


class ProtocolClient:
    """One browser-tab-like session on a Streamlit server at ``url`` (``http://127.0.0.1:PORT``)::

        async with ProtocolClient(url) as c:
            run = await c.open("OD_release")       # run.errors, run.elements, run.ms
            run = await c.step_slider("ε")         # one step up, timed to script_finished

    ``fetch_assets=False`` skips the page's files (the WebSocket alone); ``timeout_s`` bounds each run; ``source``
    connects from that local address (``127.0.0.2``, …), as another machine would.
    """

    def __init__(self, url: str, *, timeout_s: float = 120.0, fetch_assets: bool = True, source: str | None = None):
        self.url = url.rstrip("/")
        self.source = source
        self.timeout_s = timeout_s
        self.fetch_assets = fetch_assets
        self.ws = None
        self.page_name = ""
        self.page_script_hash = ""
        self.widgets: dict[str, WidgetState] = {}
        self.last: Run | None = None
        self._cache: dict[str, tuple[ForwardMsg, int]] = {}   # hash -> (message, run count when last used)
        self._runs_done = 0
        self.closed: str | None = None

    async def __aenter__(self) -> ProtocolClient:
        return self

    async def __aexit__(self, *exc) -> None:
        await self.close()

    async def close(self) -> None:
        if self.ws is not None:
            await self.ws.close()
            self.ws = None

    # -- opening a page --------------------------------------------------------------------------------------------
    async def open(self, page_name: str = "") -> Run:
        """Fetch the page's files, connect and run the page named by its URL path (``""``: the main page)."""
        from websockets.asyncio.client import connect

        t0 = time.perf_counter()
        self.page_name = page_name
        if self.fetch_assets:
            await asyncio.to_thread(fetch_page_assets, self.url, page_name, self.source)
        ws_url = "ws" + self.url.removeprefix("http") + "/_stcore/stream"
        self.ws = await connect(ws_url, subprotocols=["streamlit"], origin=self.url, max_size=None,
                                ping_interval=None, open_timeout=self.timeout_s, proxy=None,
                                user_agent_header=BROWSER_HEADERS["User-Agent"],
                                **({"local_addr": (self.source, 0)} if self.source else {}))
        run = await self._rerun(first=True)
        run.ms = (time.perf_counter() - t0) * 1000   # the whole open: files, connection, first run
        return run

    # -- inputs ----------------------------------------------------------------------------------------------------
    def widget(self, kind: str, label: str) -> Element:
        """The sidebar or main-area widget of ``kind`` whose label contains ``label`` in the last run."""
        el = self.last.find(kind, label) if self.last else None
        if el is None:
            raise LookupError(f"no {kind} labelled {label!r} in the last run")
        return el

    async def set_value(self, kind: str, label: str, value) -> Run:
        """Change a widget as a person does in the browser, and time the rerun it causes."""
        el = self.widget(kind, label)
        s = widget_state(el)
        if s is None:
            raise LookupError(f"{kind} {label!r}: this client does not model its state")
        field_name = s.WhichOneof("value")
        if field_name.endswith("_array_value"):
            arr = getattr(s, field_name).data
            del arr[:]
            arr.extend(value if isinstance(value, list | tuple) else [value])
        else:
            setattr(s, field_name, value)
        self.widgets[s.id] = s
        return await self._rerun()

    async def step_slider(self, label: str) -> Run:
        """One step up on a slider (ArrowRight in the browser), at its maximum one step down; returns the run."""
        w = self.widget("slider", label).slider
        cur = (w.value if w.set_value else w.default)[0]
        new = cur + w.step if cur + w.step <= w.max + 1e-12 else cur - w.step
        decimals = max(0, -int(f"{w.step:e}".split("e")[1])) + 2
        return await self.set_value("slider", label, round(new, decimals))

    async def step_live(self, name: str) -> Run:
        """One step up on slider ``name`` of a page's live component (odapp/components/live), at its maximum one step
        down, as the component sends it on release: its state ``{name: value}`` as JSON; returns the run."""
        import json

        for el in (self.last.elements.values() if self.last else ()):
            if el.WhichOneof("type") != "bidi_component":
                continue
            spec = json.loads(el.bidi_component.json or "null") or {}
            c = next((c for c in spec.get("controls", ()) if c.get("name") == name), None)
            if c is None:
                continue
            old = self.widgets.get(el.bidi_component.id)
            cur = json.loads(old.json_value).get(name, c["value"]) if old is not None else c["value"]
            new = cur + c["step"] if cur + c["step"] <= c["max"] + 1e-12 else cur - c["step"]
            s = WidgetState(id=el.bidi_component.id, json_value=json.dumps({name: round(new, 10)}))
            self.widgets[s.id] = s
            return await self._rerun()
        raise LookupError(f"no live slider {name!r} in the last run")

    async def step_epsilon(self) -> Run:
        """One step of ε: the sidebar's slider, or the page's live slider when the page holds ε itself."""
        if self.last is not None and self.last.find("slider", "ε") is not None:
            return await self.step_slider("ε")
        return await self.step_live("epsilon")

    async def rerun(self) -> Run:
        """A rerun with nothing changed (the browser's ``r``)."""
        return await self._rerun()

    # -- the protocol ----------------------------------------------------------------------------------------------
    def _client_state(self, first: bool) -> ClientState:
        cs = ClientState(query_string="")
        if first or not self.page_script_hash:
            cs.page_name, cs.page_script_hash = self.page_name, ""
        else:
            cs.page_script_hash = self.page_script_hash
        cs.widget_states.widgets.extend(self.widgets.values())
        cs.cached_message_hashes.extend(self._cache)
        ci = cs.context_info
        ci.timezone, ci.timezone_offset, ci.locale = "UTC", 0, "en-US"
        ci.url, ci.is_embedded, ci.color_scheme = f"{self.url}/{self.page_name}", False, "light"
        return cs

    async def _rerun(self, first: bool = False) -> Run:
        run = Run()
        if self.ws is None or self.closed:
            run.errors.append(f"socket closed: {self.closed or 'not open'}")
            self.last = run
            return run
        msg = BackMsg()
        msg.rerun_script.CopyFrom(self._client_state(first))
        t0 = time.perf_counter()
        try:
            await self.ws.send(msg.SerializeToString())
            await asyncio.wait_for(self._read_run(run), self.timeout_s)
        except TimeoutError:
            run.errors.append(f"timeout: no finished run within {self.timeout_s:g} s")
            self.closed = "an earlier run timed out"   # its messages may still come: this session is done
        except Exception as e:  # websockets' ConnectionClosed and its kin: the server went away
            self.closed = f"{type(e).__name__}: {e}"
            run.errors.append(f"socket closed: {type(e).__name__}")
        run.ms = (time.perf_counter() - t0) * 1000
        self.last = run
        return run

    async def _read_run(self, run: Run) -> None:
        seen: set[str] = set()
        while True:
            data = await self.ws.recv()
            run.bytes += len(data)
            run.messages += 1
            fm = ForwardMsg()
            fm.ParseFromString(data)
            kind = fm.WhichOneof("type")
            if kind == "ref_hash":
                cached = self._cache.get(fm.ref_hash)
                if cached is None:
                    run.errors.append("ref_hash of a message the client does not hold")
                    continue
                self._cache[fm.ref_hash] = (cached[0], self._runs_done)
                path = tuple(fm.metadata.delta_path)
                fm = cached[0]
                kind = "delta"
            else:
                path = tuple(fm.metadata.delta_path)
                if fm.metadata.cacheable and fm.hash:
                    self._cache[fm.hash] = (fm, self._runs_done)
            if kind == "new_session":
                self.page_script_hash = fm.new_session.page_script_hash
                run.elements.clear()
                seen.clear()
            elif kind == "navigation":   # an app with pages (st.navigation, or pages/ run through it): the page run
                self.page_script_hash = fm.navigation.page_script_hash
            elif kind == "delta" and fm.delta.WhichOneof("type") == "new_element":
                el = fm.delta.new_element
                run.elements[path] = el
                etype = el.WhichOneof("type")
                if etype == "exception":
                    run.errors.append(f"exception: {el.exception.type}: {el.exception.message.splitlines()[0][:120]}"
                                      if el.exception.message else f"exception: {el.exception.type}")
                s = widget_state(el)
                if s is not None:
                    seen.add(s.id)
                    # the browser takes a value the server sets (set_value), else keeps the one it has
                    if s.id not in self.widgets or getattr(getattr(el, etype), "set_value", False):
                        self.widgets[s.id] = s
                elif etype and getattr(getattr(el, etype), "id", ""):
                    seen.add(getattr(el, etype).id)
            elif kind == "page_not_found":
                run.errors.append(f"page not found: {fm.page_not_found.page_name!r}")
            elif kind == "script_finished":
                status = ForwardMsg.ScriptFinishedStatus.Name(fm.script_finished)
                if fm.script_finished == ForwardMsg.FINISHED_EARLY_FOR_RERUN:
                    continue   # a callback's or st.rerun's rerun follows
                run.status = status
                if fm.script_finished == ForwardMsg.FINISHED_WITH_COMPILE_ERROR:
                    run.errors.append("compile error")
                elif fm.script_finished == ForwardMsg.FINISHED_SUCCESSFULLY:
                    self.widgets = {k: v for k, v in self.widgets.items() if k in seen}
                self._runs_done += 1
                self._cache = {h: (m, used) for h, (m, used) in self._cache.items()
                               if self._runs_done - used <= CACHE_MAX_AGE}
                return
