/**
 * `npm start`: the local network as the main job (scripts/network.ts): a 4-node attesting mesh, two chains with
 * the contracts deployed, the relayer; then the tour (scripts/tour.ts), every endpoint and address printed and
 * written to .ats/network.json; then it stays up until Ctrl-C, which stops everything cleanly.
 *
 *   npm start                 run until Ctrl-C
 *   npm start -- --once       run the tour and exit (CI)
 *   npm start -- --nodes 1    one attesting node instead of a mesh of 4
 *   npm start -- --chain anvil  the two chains on anvil instead of Hardhat node (scripts/chainProcess.ts)
 */
import { rmSync } from "node:fs";
import { join } from "node:path";
import { parseArgs } from "node:util";
import pino from "pino";
import { waitForSignal } from "../lib/signals";
import { CHAIN_KINDS, isChainKind } from "./chainProcess";
import type { LocalNetwork, NetworkProgram } from "./network";

/** Where the network file, the relayer's config and its database go: .ats/, or ATS_NETWORK_DIR (tests). */
const DIR = process.env.ATS_NETWORK_DIR ?? join(__dirname, "..", ".ats");

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
  log(`Attested Time: a local network on 127.0.0.1 (${meshNodes === 1 ? "1 attesting node" : `a mesh of ${meshNodes} attesting nodes`}, 2 chains, the relayer)`);
  // Loaded after the banner: the network's and the tour's modules are TypeScript transpiled as they load
  // (bin/register-ts.js), seconds of silence before anything was printed when they were static imports.
  log("   loading the network's code");
  const { LOCAL_RELAYER_API_KEY, startLocalNetwork } = await import("./network");
  const { runTour } = await import("./tour");
  // Compiled here, before anything starts; the Hardhat runtime is loaded only now (it reads hardhat.config.ts).
  log("   compiling the contracts (skipped when nothing changed)");
  const hre = (await import("hardhat")).default;
  await hre.run("compile", { quiet: true });
  rmSync(DIR, { recursive: true, force: true });
  let network: LocalNetwork | undefined;
  try {
    network = await startLocalNetwork({ hre, dir: DIR, meshNodes, chainKind, nodeLogger: pino({ level: "error" }, pino.destination(2)), log: (line) => log(`   ${line}`) });
    log("   starting the relayer");
    const relayer = await network.startRelayer();
    log("");
    for (const line of endpointLines(network.programs)) log(line);
    log(`   relayer: x-api-key ${LOCAL_RELAYER_API_KEY} for its operator routes, signer Hardhat account #1`);
    log(`   network file: ${network.networkFile}; manifest: ${network.manifestFile} (npx ats-node manifest verify <it>)`);
    log("");
    await runTour(network, log);
    log("");
    log(`The network is up. Endpoints and addresses: ${network.networkFile}`);
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
