#!/usr/bin/env node
"use strict";
// Runs the node upgrade agent's command line from the build output, dist/upgrade/cli.js; dist/ is built here first
// when it is missing or stale, as bin/ats-node.js does (see ./build-dist.js). docs/upgrade.md describes it.
require("./build-dist").prepareDistOrExit("ats-upgrade");

require("../dist/upgrade/cli.js")
  .main(process.argv.slice(2))
  .then((code) => {
    process.exitCode = code;
  });
