/* plotly.js (4.8 MB, ~1-2 s to compile and run on a small machine) loaded as the page starts, on the pages that
 * draw plotly graphs, instead of when the first graph arrives: Dash's Graph loads it lazily, after the page's
 * sections came from the server, so the browser sat idle while the server computed and then spent 1-2 s on
 * plotly.js before drawing anything. Dash's Graph waits on `window.Plotly || load()`: until plotly.js has run,
 * window.Plotly is a thenable resolved by this load, so the Graph waits for it (one load, never two); plotly.js
 * sets window.Plotly itself when it runs. Not on the Summary of a single trace (its charts are HTML bars:
 * explorer/bars.py) nor the Timeline (a canvas): there plotly.js loads lazily as before, if a graph needs it. */
(function () {
    if (window.Plotly) { return; }
    const path = window.location.pathname.replace(/\/+$/, '');
    const page = path.slice(path.lastIndexOf('/') + 1);
    let prefix = '/';
    try {
        prefix = JSON.parse(document.getElementById('_dash-config').textContent).requests_pathname_prefix || '/';
    } catch (e) { /* no config: the app is served at / */ }
    if (prefix.replace(/\/+$/, '') === path || ['summary', 'timeline'].includes(page)) { return; }
    const s = document.createElement('script');
    s.src = prefix + '_dash-component-suites/plotly/package_data/plotly.min.js';
    s.async = true;
    const loaded = new Promise((resolve, reject) => {
        s.onload = () => resolve(window.Plotly);
        s.onerror = (e) => { window.Plotly = undefined; reject(e); };
    });
    loaded.catch(() => {});  // a failed load is reported by the Graph that waits on it
    window.__nxPlotlyPreload = true;
    window.Plotly = {then: (ok, fail) => loaded.then(ok, fail)};
    document.head.appendChild(s);
})();
