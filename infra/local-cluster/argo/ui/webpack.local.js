'use strict'; /* eslint-env node */
// The Argo UI's own webpack configuration (ui/webpack.config.js of the Argo module, beside this file in the
// build's copy), built against npm's argo-ui 1.0.0 in place of the argo-ui git commit ui/package.json names.
// That package is the argo-ui library as of 2021; two of its files expect the dependencies of that time.
const path = require('path');
const config = require('./webpack.config.js');

// argo-ui's form-field.tsx does `require('uuid/v1')`, a path uuid dropped in version 8; the uuid of the lock
// file (8.3.2, which other packages bring) has the same function as `v1` of its main module.
config.resolve.alias = {...config.resolve.alias, 'uuid/v1$': path.resolve(__dirname, 'uuid-v1.js')};

// argo-ui's logs-viewer.scss does `@import 'node_modules/xterm/dist/xterm'`, the stylesheet of its own xterm
// (2.4.0, installed under node_modules/argo-ui); the UI's xterm 4 keeps it elsewhere (css/xterm.css). Sass
// looks the path up in argo-ui's folder too.
const scss = config.module.rules.find(rule => String(rule.test) === String(/\.scss$/));
scss.use = scss.use.map(loader =>
    loader === 'sass-loader'
        ? {loader, options: {sassOptions: {includePaths: [path.resolve(__dirname, 'node_modules/argo-ui')]}}}
        : loader
);

// No source maps: the Argo Server embeds these files in its binary (34 MB with them, under 10 MB without).
config.devtool = false;

module.exports = config;
