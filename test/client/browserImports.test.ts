/**
 * The browser client (client/browser.ts) must run in a browser as it is: nothing it loads, directly or through any
 * module or package below it, may be a Node built-in or a package that needs Node. The graph is read statically
 * (test/client/importGraph.ts), so a new import anywhere below the entry that breaks this fails here, with the chain
 * of imports that reached it.
 */
import { expect } from "chai";
import { join } from "node:path";
import { importGraph, runtimeSpecifiers, type ReachedModule } from "./importGraph";

const ROOT = join(__dirname, "..", "..");

/** Packages that need Node (native addons, servers, Node's network or file APIs), also when no built-in shows. */
const NODE_ONLY_PACKAGES = [
  "ws",
  "@grpc/grpc-js",
  "@grpc/proto-loader",
  "better-sqlite3",
  "pino",
  "fastify",
  "secp256k1",
  "keccak",
  "node-gyp-build",
  "prom-client",
  "hardhat",
  "ts-node",
];

/**
 * What makes a reached module unfit for a browser, with the chain that reached it; empty when fit. A package that
 * is not installed counts too: what it would load cannot be checked.
 */
function nodeOnlyFindings(modules: readonly ReachedModule[]): string[] {
  return modules
    .filter(
      (module) =>
        module.builtin ||
        module.unresolved ||
        (module.packageName !== null && NODE_ONLY_PACKAGES.includes(module.packageName)) ||
        module.id.endsWith(".node"),
    )
    .map((module) => module.chain.join(" → "));
}

describe("client/browser.ts imports nothing that needs Node", function () {
  this.timeout(60_000);

  it("reaches no Node built-in and no Node-only package, through every module and package below it", function () {
    const modules = importGraph(join(ROOT, "client", "browser.ts"), ROOT);
    expect(nodeOnlyFindings(modules)).to.deep.equal([]);
    // The walk went where the client's logic is: the shared REST and stream modules, the strict proof reader, the
    // packages they use (so a finding below them would have been seen).
    const ids = modules.map((module) => module.id);
    for (const expected of ["client/restCaller.ts", "client/streamSession.ts", "protocol/json.ts", "wire/httpStatus.ts", "wire/rest.ts"]) {
      expect(ids, expected).to.include(expected);
    }
    const packages = new Set(modules.map((module) => module.packageName).filter((name) => name !== null));
    expect([...packages].sort()).to.include.members(["@sinclair/typebox", "lossless-json"]);
  });

  it("would report the Node client's built-ins and Node-only packages, with the chain that reached them", function () {
    const findings = nodeOnlyFindings(importGraph(join(ROOT, "client", "index.ts"), ROOT));
    expect(findings).to.include("client/index.ts → client/rest.ts → node:https");
    // Packages are named by their real path: "node_modules/ws/…", or "../…/node_modules/ws/…" when node_modules is a link.
    expect(findings.some((chain) => /^client\/index\.ts → client\/ws\.ts → (?:\S*\/)?node_modules\/ws\//.test(chain))).to.equal(true);
    expect(findings.some((chain) => /→ (?:\S*\/)?node_modules\/@grpc\/grpc-js\//.test(chain))).to.equal(true);
  });

  it("follows what runs and skips what the compiler erases", function () {
    const source = [
      'import type { A } from "erased-1";',
      'import { type B, type C } from "erased-2";',
      'export type { D } from "erased-3";',
      'export type * from "erased-4";',
      'import { type E, f } from "kept-1";',
      'import "kept-2";',
      'export { g } from "kept-3";',
      'export * from "kept-4";',
      'const h = require("kept-5");',
      'const i = import("kept-6");',
      'import j = require("kept-7");',
    ].join("\n");
    expect(runtimeSpecifiers("example.ts", source)).to.deep.equal(["kept-1", "kept-2", "kept-3", "kept-4", "kept-5", "kept-6", "kept-7"]);
  });
});
