#!/usr/bin/env node
"use strict";
// Runs the temporal gateway's command line from the build output, dist/gateway/cli.js; dist/ is built here first
// when it is missing or stale, as bin/ats-node.js does (see ./build-dist.js).
require("./operatorPackages").requireOperatorPackages("ats-gateway");
require("./build-dist").prepareDistOrExit("ats-gateway");

require("../dist/gateway/cli.js").main(process.argv.slice(2));
