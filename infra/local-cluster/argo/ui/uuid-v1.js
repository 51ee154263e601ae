// `require('uuid/v1')` of argo-ui 1.0.0 (webpack.local.js): uuid 8 and later export v1 from their main module.
module.exports = require('uuid').v1;
