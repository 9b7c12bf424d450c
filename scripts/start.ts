/**
 * `npm start`: the local network as the main job (scripts/network.ts): a 4-node attesting mesh, two chains with
 * the contracts deployed, the relayer, the catalog (time explorer, downloads of the network's own release, evidence
 * gateway, faucet); then the tour (scripts/tour.ts), every endpoint and address printed and written to
 * .ats/network.json; then it stays up until Ctrl-C, which stops everything cleanly.
 *
 * The release the downloads service serves is this checkout's (scripts/localRelease.ts), kept in
 * .ats/network-release/ (ATS_RELEASES_DIR) across starts and built, in the background while the network starts, only when the sources
 * changed.
 *
 *   npm start                 run until Ctrl-C
 *   npm start -- --once       run the tour and exit (CI)
 *   npm start -- --nodes 1    one attesting node instead of a mesh of 4
 *   npm start -- --chain anvil  the two chains on anvil instead of Hardhat node (scripts/chainProcess.ts)
 */
import { existsSync, readdirSync, rmSync } from "node:fs";
import { join, resolve } from "node:path";
import { parseArgs } from "node:util";
import pino from "pino";
import { waitForSignal } from "../lib/signals";
import { CHAIN_KINDS, isChainKind } from "./chainProcess";
import type { LocalNetwork, NetworkProgram } from "./network";

/** Where the network file, the relayer's config and its database go: .ats/, or ATS_NETWORK_DIR (tests). */
const DIR = process.env.ATS_NETWORK_DIR ?? join(__dirname, "..", ".ats");
/**
 * The network's own release, which the downloads service serves: .ats/network-release/, or ATS_RELEASES_DIR. Not
 * under ATS_NETWORK_DIR: the release is the checkout's, and tests reuse it as `npm start` does.
 */
const RELEASES_DIR = process.env.ATS_RELEASES_DIR ?? join(__dirname, "..", ".ats", "network-release");

/** One line per program: its name, process id and every endpoint it serves, by name. */
function endpointLines(programs: readonly NetworkProgram[]): string[] {
  const width = Math.max(...programs.map((program) => program.name.length));
  return programs.map(
    (program) =>
      `   ${program.name.padEnd(width)}  ${program.program} (pid ${program.pid}): ${Object.entries(program.endpoints)
        .map(([name, url]) => `${name} ${url}`)
        .join("  ")}`,
  );
}

async function main(): Promise<number> {
  const { values } = parseArgs({ options: { once: { type: "boolean", default: false }, nodes: { type: "string", default: "4" }, chain: { type: "string", default: "hardhat" } } });
  const chainKind = values.chain;
  if (!isChainKind(chainKind)) {
    process.stderr.write(`--chain must be one of ${CHAIN_KINDS.join(", ")}, got ${chainKind}\n`);
    return 2;
  }
  const meshNodes = Number(values.nodes);
  if (!Number.isInteger(meshNodes) || meshNodes < 1 || meshNodes > 16) {
    process.stderr.write(`--nodes must be an integer from 1 to 16, got ${values.nodes}\n`);
    return 2;
  }
  const log = (line: string) => process.stdout.write(`${line}\n`);
  log(`Attested Time: a local network on 127.0.0.1 (${meshNodes === 1 ? "1 attesting node" : `a mesh of ${meshNodes} attesting nodes`}, 2 chains, the relayer, the catalog)`);
  // The release is made in a child process meanwhile; the catalog waits for it.
  const { ensureLocalRelease } = await import("./localRelease");
  const stopReleaseBuild = new AbortController();
  const release = ensureLocalRelease({
    releasesDir: RELEASES_DIR,
    signal: stopReleaseBuild.signal,
    onPlan: (plan) => log(plan.reuse ? `   the network's release ${plan.releaseId}: reused (${plan.why})` : `   building the network's release ${plan.releaseId} in the background (npm run release: ${plan.why})`),
  });
  release.catch(() => undefined); // awaited below; a failure is reported there
  // Loaded after the banner: the network's and the tour's modules are TypeScript transpiled as they load
  // (bin/register-ts.js), seconds of silence before anything was printed when they were static imports.
  log("   loading the network's code");
  const { LOCAL_RELAYER_API_KEY, startLocalNetwork } = await import("./network");
  const { runTour } = await import("./tour");
  // Compiled here, before anything starts; the Hardhat runtime is loaded only now (it reads hardhat.config.ts).
  log("   compiling the contracts (skipped when nothing changed)");
  const hre = (await import("hardhat")).default;
  await hre.run("compile", { quiet: true });
  // A fresh network each time. Its release stays (the checkout's, reused while the sources are unchanged), and so do
  // the releases `npm run release` wrote to .ats/releases/.
  const kept = new Set([resolve(RELEASES_DIR), resolve(DIR, "releases")]);
  for (const name of existsSync(DIR) ? readdirSync(DIR) : []) if (!kept.has(resolve(DIR, name))) rmSync(join(DIR, name), { recursive: true, force: true });
  let network: LocalNetwork | undefined;
  try {
    network = await startLocalNetwork({ hre, dir: DIR, meshNodes, chainKind, nodeLogger: pino({ level: "error" }, pino.destination(2)), log: (line) => log(`   ${line}`) });
    log("   starting the relayer");
    const relayer = await network.startRelayer();
    const { releaseId } = await release;
    log("   starting the catalog (time explorer, downloads, evidence gateway, faucet)");
    const catalog = await network.startCatalog({ releasesDir: RELEASES_DIR });
    log("");
    for (const line of endpointLines(network.programs)) log(line);
    log(`   relayer: x-api-key ${LOCAL_RELAYER_API_KEY} for its operator routes, signer Hardhat account #1`);
    log(`   catalog: downloads serve release ${releaseId}; the faucet pays from Hardhat account #3 on ${network.chains[0]!.name} (a public test key: development only)`);
    log(`   network file: ${network.networkFile}; manifest: ${network.manifestFile} (npx ats-node manifest verify <it>)`);
    log("");
    await runTour(network, log);
    log("");
    log(`The network is up. Endpoints and addresses: ${network.networkFile}`);
    if (catalog.services.explorer !== null) log(`   time explorer: open ${catalog.services.explorer} in a browser (blocks with ns timestamps, the mesh, the relayer)`);
    log(`   relayer items: curl ${relayer.api}/items   metrics: ${relayer.api}/metrics`);
    log(`   temporal JSON-RPC (alpha): ${network.temporalRpc[0]}   e.g. curl -s -d '{"jsonrpc":"2.0","id":1,"method":"temporal_getConsensusTime"}' ${network.temporalRpc[0]}`);
    if (values.once) {
      await network.close();
      log(`The network was up and has been stopped (--once): the URLs above are closed; ${network.networkFile} says "stopped". Run npm start to keep it up.`);
      return 0;
    }
    log("Press Ctrl-C to stop.");
    await waitForSignal();
    log("Stopping…");
    await network.close();
    log(`Stopped: ${network.networkFile} says "stopped", the manifest is removed.`);
    return 0;
  } catch (error) {
    process.stderr.write(`npm start failed: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
    if (network?.relayer !== undefined) process.stderr.write(`relayer log (tail):\n${network.relayer.stderrTail()}\n`);
    return 1;
  } finally {
    stopReleaseBuild.abort();
    await network?.close();
  }
}

main().then(
  (code) => process.exit(code),
  (error: unknown) => {
    process.stderr.write(`${String(error)}\n`);
    process.exit(1);
  },
);
