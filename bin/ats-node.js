#!/usr/bin/env node
"use strict";
// Runs the TypeScript CLI (node/cli.ts), transpiled on load by ./register-ts.js (no type check at start: types are
// checked by `npm run lint`; and not ts-node, whose REPL import slows every EventEmitter of a serving process).
require("./register-ts");

require("../node/cli.ts").main(process.argv.slice(2));
