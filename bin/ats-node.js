#!/usr/bin/env node
"use strict";
// Runs the node's command line from the build output, dist/node/cli.js (TypeScript compiled by
// `tsc -p tsconfig.build.json`, see ./build-dist.js). dist/ is built by `npm install` / `npm ci` (the `prepare`
// script); when it is missing or older than the sources (installed with --ignore-scripts, a checkout changed since),
// it is built here first, after one line on stderr naming the source file that made it stale (~30 s of tsc); if that
// build fails, nothing runs (never stale code).
// Stack traces name TypeScript lines (dist/ has source maps).
require("./operatorPackages").requireOperatorPackages("ats-node");
require("./build-dist").prepareDistOrExit("ats-node");

require("../dist/node/cli.js").main(process.argv.slice(2));
