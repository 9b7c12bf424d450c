#!/usr/bin/env node
/**
 * A `solc` executable for forge made of the npm `solc` package (solcjs, a devDependency), so that `forge build`
 * and `forge test` run offline: `forge test --offline --use scripts/solcWrapper.js`. A test-environment detail only
 * (npm test has no internet); real projects let forge fetch its native solc.
 *
 * forge asks a compiler two things: `--version` (it parses the `Version: x.y.z+commit.hash` line) and
 * `--standard-json` (the input on stdin, the output on stdout). Any other flags forge adds (`--base-path`,
 * `--allow-paths`, `--include-path`) only matter for imports the input leaves out; forge includes every source,
 * so the import callback below reads files relative to the working directory as a fallback.
 */
"use strict";
const { readFileSync } = require("node:fs");
const solc = require("solc");

const args = process.argv.slice(2);
if (args.includes("--version")) {
  process.stdout.write(`solc, the solidity compiler commandline interface\nVersion: ${solc.version()}\n`);
} else if (args.includes("--standard-json")) {
  const input = readFileSync(0, "utf8");
  const findImports = (path) => {
    try {
      return { contents: readFileSync(path, "utf8") };
    } catch (error) {
      return { error: `${path}: ${error.message}` };
    }
  };
  process.stdout.write(solc.compile(input, { import: findImports }));
} else {
  process.stderr.write(`solcWrapper: only --version and --standard-json are supported, got ${JSON.stringify(args)}\n`);
  process.exitCode = 2;
}
