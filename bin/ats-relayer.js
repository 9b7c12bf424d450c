#!/usr/bin/env node
"use strict";
// Runs the relayer's command line from the build output, dist/relayer/cli.js; dist/ is built here first when it
// is missing or stale, as bin/ats-node.js does (see ./build-dist.js).
require("./operatorPackages").requireOperatorPackages("ats-relayer");
try {
  require("./build-dist").ensureBuilt({ stdio: ["ignore", 2, 2] });
} catch (error) {
  process.stderr.write(`ats-relayer: cannot build dist/: ${error instanceof Error ? error.message : String(error)}\n`);
  process.exit(1);
}
process.setSourceMapsEnabled(true);

require("../dist/relayer/cli.js")
  .main(process.argv.slice(2))
  .then((code) => {
    process.exitCode = code;
  });
