"use strict";
/**
 * The packages only the programs need (the node, the relayer, the catalog): optional peer dependencies of `attested-time`, so
 * that a dApp's install does not pull a server, a database and a native build (docs/solidity.md "Installing"). A program
 * started without them stops here with the one command that fixes it, instead of a stack trace from deep inside.
 */
const OPERATOR_PACKAGES = ["fastify", "@fastify/static", "better-sqlite3", "multiformats", "pino", "prom-client"];

/**
 * Exits with code 1 and a one-line reason when an operator package cannot be resolved from this installation.
 * `resolve` is require.resolve; a test passes another.
 */
function requireOperatorPackages(program, resolve = require.resolve) {
  const missing = OPERATOR_PACKAGES.filter((name) => {
    try {
      resolve(name);
      return false;
    } catch {
      return true;
    }
  });
  if (missing.length === 0) return;
  process.stderr.write(
    `${program}: needs ${missing.join(", ")} (node-operator packages a dApp install leaves out): npm install ${missing.join(" ")}\n`,
  );
  process.exit(1);
}

module.exports = { OPERATOR_PACKAGES, requireOperatorPackages };
