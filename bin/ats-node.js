#!/usr/bin/env node
"use strict";
// Runs the TypeScript CLI (node/cli.ts) through ts-node in transpile-only mode: types are checked by
// `npm run lint` (tsc --noEmit), not at every start.
const path = require("node:path");

require("ts-node").register({
  transpileOnly: true,
  project: path.join(__dirname, "..", "tsconfig.json"),
});

require("../node/cli.ts").main(process.argv.slice(2));
