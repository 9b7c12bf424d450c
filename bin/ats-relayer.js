#!/usr/bin/env node
"use strict";
// Runs the relayer's command line from the build output, dist/relayer/cli.js; dist/ is built here first when it
// is missing or stale, as bin/ats-node.js does (see ./build-dist.js).
require("./operatorPackages").requireOperatorPackages("ats-relayer");
require("./build-dist").prepareDistOrExit("ats-relayer");

require("../dist/relayer/cli.js")
  .main(process.argv.slice(2))
  .then((code) => {
    process.exitCode = code;
  });
