/* plotly.js for dcc.Graph: our partial bundle (assets/vendor/plotly-explorer.min.js, 1.3 MB: the trace types the
 * explorer draws, built by tools/plotly_bundle) instead of Dash's full plotly.min.js (4.8 MB, ~1-2 s to compile
 * and run on a small machine, during which the page cannot draw). Dash's Graph waits on `window.Plotly || load()`:
 * until plotly.js has run, window.Plotly is a thenable that loads the bundle on first use (one load, never two);
 * the bundle sets window.Plotly itself when it runs. On the pages that draw plotly graphs the load starts as the
 * page starts, not when the first graph arrives (Dash's Graph loads plotly.js lazily, after the page's sections
 * came from the server); not on the Summary of a single trace (its charts are HTML bars: explorer/bars.py) nor
 * the Timeline (a canvas), where it loads when a graph first asks for it. */
(function () {
    if (window.Plotly) { return; }
    const path = window.location.pathname.replace(/\/+$/, '');
    const page = path.slice(path.lastIndexOf('/') + 1);
    let prefix = '/';
    try {
        prefix = JSON.parse(document.getElementById('_dash-config').textContent).requests_pathname_prefix || '/';
    } catch (e) { /* no config: the app is served at / */ }
    let loaded = null;
    const load = () => {
        if (loaded) { return loaded; }
        const s = document.createElement('script');
        s.src = prefix + 'assets/vendor/plotly-explorer.min.js';
        s.async = true;
        loaded = new Promise((resolve, reject) => {
            s.onload = () => resolve(window.Plotly);
            s.onerror = (e) => { window.Plotly = undefined; reject(e); };
        });
        loaded.catch(() => {});  // a failed load is reported by the Graph that waits on it
        document.head.appendChild(s);
        return loaded;
    };
    window.__nxPlotlyPreload = true;
    window.Plotly = {then: (ok, fail) => load().then(ok, fail)};
    if (!(prefix.replace(/\/+$/, '') === path || ['summary', 'timeline'].includes(page))) { load(); }
})();
