#!/usr/bin/env node
"use strict";
// Runs the catalog's command line from the build output, dist/catalog/cli.js; dist/ is built here first when it
// is missing or stale, as bin/ats-node.js does (see ./build-dist.js).
require("./operatorPackages").requireOperatorPackages("ats-catalog");
require("./build-dist").prepareDistOrExit("ats-catalog");

require("../dist/catalog/cli.js")
  .main(process.argv.slice(2))
  .then((code) => {
    process.exitCode = code;
  });
