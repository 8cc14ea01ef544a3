'use strict';
// The native module, loaded once (loader.js finds the .node file).
module.exports = require('../loader.js').load();
