// plotly.js core with only the trace types the explorer draws (analysis/figures, explorer/): bar, scatter (in core),
// pie, heatmap, treemap. tests/explorer/test_plotly_bundle.py checks that every figure's traces are among them.
var Plotly = require('plotly.js/lib/core');

Plotly.register([
    require('plotly.js/lib/bar'),
    require('plotly.js/lib/pie'),
    require('plotly.js/lib/heatmap'),
    require('plotly.js/lib/treemap'),
]);

module.exports = Plotly;
