/**
 * The real user path (`npm run test:example`, the last step of `npm test`): packs this repository with `npm pack`
 * (what a registry would serve), copies examples/dapp to a temporary folder, installs the tarball and the
 * example's own dependencies there (from the npm cache when it has them), then checks what a dApp team sees:
 *
 * 1. the tarball holds exactly what `files` says (built JavaScript with types, the contracts dApps import, the
 *    bins), and no tests, sources or stray files;
 * 2. the install leaves out what only node operators need (fastify, better-sqlite3, pino, prom-client);
 * 3. every JavaScript entry loads in plain Node, from CommonJS and from an ES module;
 * 4. `tsc` type-checks the example against the package's declarations, with the tsconfig of Hardhat's TypeScript
 *    template (CommonJS, node10 resolution: the package's `typesVersions` map its subpaths there);
 * 5. `hardhat test` compiles the example's auction (TimeConsumer imported from the package) and tests it with
 *    `attested-time/testing`, which deploys from bytecode shipped in the package;
 * 6. examples/foundry-dapp, the same auction in a Foundry project, installs the same tarball and runs `forge test`
 *    (the npm `@foundry-rs/forge`) with the Solidity kit, `attested-time/contracts/testing/TimeTestKit.sol`, through
 *    the remapping `attested-time/=node_modules/attested-time/`; then its verify gas report is printed. forge runs
 *    offline with scripts/solcWrapper.js as its solc (the npm `solc`): a detail of this test, not of the example.
 *
 * The temporary folder is removed at the end, also on failure (ATS_KEEP_EXAMPLE=1 keeps it for a look).
 */
import { execFileSync } from "node:child_process";
import { cpSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

const ROOT = join(__dirname, "..");
const NPM = process.platform === "win32" ? "npm.cmd" : "npm";
const NPX = process.platform === "win32" ? "npx.cmd" : "npx";

/** Paths every tarball must hold, and prefixes none may. */
const REQUIRED = [
  "package.json",
  "LICENSE",
  "README.md",
  "dist/client/index.js",
  "dist/client/index.d.ts",
  "dist/client/browser.js",
  "dist/protocol/index.d.ts",
  "dist/testing/index.js",
  "dist/abi/index.d.ts",
  "contracts/TimeConsumer.sol",
  "contracts/interfaces/ITimeOracle.sol",
  "contracts/testing/TimeTestKit.sol",
  "bin/ats-node.js",
];
const FORBIDDEN_PREFIXES = ["test/", "scripts/", "dist/scripts/", "contracts/test/", "examples/", "node_modules/", ".ats/", "artifacts/", "cache/", "protocol/", "client/", "node/"];
const OPERATOR_PACKAGES = ["fastify", "better-sqlite3", "pino", "prom-client"];

/** Runs a command; its stdout is returned, and on failure it is part of the error (tsc and mocha report there). */
function run(command: string, args: string[], cwd: string): string {
  process.stderr.write(`$ ${command} ${args.join(" ")}   (in ${cwd})\n`);
  try {
    return execFileSync(command, args, { cwd, encoding: "utf8", stdio: ["ignore", "pipe", "inherit"], env: { ...process.env, npm_config_audit: "false", npm_config_fund: "false" } });
  } catch (error) {
    const stdout = (error as { stdout?: string }).stdout ?? "";
    throw new Error(`${command} ${args.join(" ")} failed:\n${stdout.slice(-6_000)}`, { cause: error });
  }
}

function main(): void {
  const dir = mkdtempSync(join(tmpdir(), "ats-example-"));
  try {
    const [packed] = JSON.parse(run(NPM, ["pack", "--json", "--pack-destination", dir], ROOT)) as { filename: string; files: { path: string }[] }[];
    if (packed === undefined) throw new Error("npm pack printed no package");
    const paths = packed.files.map((file) => file.path);
    const missing = REQUIRED.filter((path) => !paths.includes(path));
    const stray = paths.filter((path) => FORBIDDEN_PREFIXES.some((prefix) => path.startsWith(prefix)));
    if (missing.length > 0 || stray.length > 0) throw new Error(`the tarball is wrong: missing ${JSON.stringify(missing)}, stray ${JSON.stringify(stray.slice(0, 20))}`);
    process.stderr.write(`${packed.filename}: ${paths.length} files, as \`files\` says\n`);

    const app = join(dir, "dapp");
    cpSync(join(ROOT, "examples", "dapp"), app, {
      recursive: true,
      filter: (source) => !["node_modules", "artifacts", "cache", "typechain-types"].some((name) => source.endsWith(`/${name}`)),
    });
    run(NPM, ["install", "--prefer-offline", "--no-audit", "--no-fund"], app);
    const installed = readdirSync(join(app, "node_modules"));
    const heavy = OPERATOR_PACKAGES.filter((name) => installed.includes(name) || existsSync(join(app, "node_modules", name)));
    if (heavy.length > 0) throw new Error(`a dApp install pulled node-operator packages: ${heavy.join(", ")}`);

    // Plain Node, CommonJS and ESM, outside Hardhat: each entry loads and exports what its name says.
    const entries = `const checks = [["attested-time/protocol", "verifyTimeProof"], ["attested-time/client", "createTimeClient"], ["attested-time/client/browser", "createBrowserTimeClient"], ["attested-time/abi", "timeOracleAbi"], ["attested-time/testing", "createTimeTestKit"]];`;
    run(process.execPath, ["-e", `${entries} for (const [entry, name] of checks) if (typeof require(entry)[name] === "undefined") throw new Error(entry + " lacks " + name);`], app);
    run(process.execPath, ["--input-type=module", "-e", `${entries} for (const [entry, name] of checks) if (typeof (await import(entry))[name] === "undefined") throw new Error(entry + " lacks " + name);`], app);
    run(NPX, ["hardhat", "compile"], app); // the contract types tsc reads (artifacts/**/*.d.ts)
    run(NPX, ["tsc", "-p", "."], app);
    process.stdout.write(run(NPX, ["hardhat", "test"], app));
    testFoundryExample(dir);
  } finally {
    if (process.env.ATS_KEEP_EXAMPLE === "1") process.stderr.write(`kept ${dir}\n`);
    else rmSync(dir, { recursive: true, force: true });
  }
}

/** Step 6: the Foundry example in `dir` (where the tarball is), forge from its own install. */
function testFoundryExample(dir: string): void {
  const example = join(ROOT, "examples", "foundry-dapp");
  // One auction, two test suites: the Foundry copy may not drift from the Hardhat one.
  const auction = "SealedBidAuction.sol";
  if (!readFileSync(join(example, "src", auction)).equals(readFileSync(join(ROOT, "examples", "dapp", "contracts", auction)))) {
    throw new Error(`examples/foundry-dapp/src/${auction} differs from examples/dapp/contracts/${auction}`);
  }
  const app = join(dir, "foundry-dapp");
  cpSync(example, app, { recursive: true, filter: (source) => !["node_modules", "out", "cache"].some((name) => source.endsWith(`/${name}`)) });
  run(NPM, ["install", "--prefer-offline", "--no-audit", "--no-fund"], app);
  const forge = join(app, "node_modules", ".bin", "forge");
  const offline = ["--offline", "--use", join(ROOT, "scripts", "solcWrapper.js")];
  process.stdout.write(run(forge, ["test", ...offline], app));
  process.stdout.write(run(forge, ["test", ...offline, "--gas-report", "--match-contract", "VerifyGasTest"], app));
}

try {
  main();
} catch (error) {
  process.stderr.write(`test:example failed: ${error instanceof Error ? error.message : String(error)}\n`);
  process.exitCode = 1;
}
