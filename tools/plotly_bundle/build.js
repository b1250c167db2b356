// Builds explorer/assets/vendor/plotly-explorer.min.js: plotly.js's own esbuild configuration
// (node_modules/plotly.js/esbuild-config.js) with entry.js as the entry point, minified.
const fs = require('fs');
const path = require('path');
const esbuild = require('esbuild');
const { environmentPlugin } = require('esbuild-plugin-environment');
const InlineCSSPlugin = require('esbuild-plugin-inline-css');

const version = require('plotly.js/package.json').version;
const out = path.join(__dirname, '..', '..', 'explorer', 'assets', 'vendor', 'plotly-explorer.min.js');
const banner = `/* plotly.js v${version} (MIT licence, https://github.com/plotly/plotly.js), a partial bundle of the` +
    ' trace types the explorer draws: bar, scatter, pie, heatmap, treemap. Built by tools/plotly_bundle (npm ci &&' +
    ' node build.js); the licences of the bundled packages are at the end of this file. */';

esbuild.build({
    entryPoints: [path.join(__dirname, 'entry.js')],
    outfile: out,
    format: 'iife',
    globalName: 'Plotly',
    bundle: true,
    minify: true,
    legalComments: 'eof',
    banner: { js: banner },
    plugins: [InlineCSSPlugin(), environmentPlugin({ NODE_DEBUG: false })],
    alias: { stream: 'stream-browserify' },
    define: { global: 'window', 'define.amd': 'false' },
    target: 'es2016',
    logLevel: 'info',
}).then(() => {
    const kb = (fs.statSync(out).size / 1024).toFixed(0);
    console.log(`wrote ${path.relative(process.cwd(), out)} (${kb} KiB)`);
});
