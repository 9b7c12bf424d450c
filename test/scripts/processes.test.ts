/**
 * `npm start` runs every program as a process of its own (issue 31.2): scripts/start.ts as a child, left running;
 * its network file names each process and its endpoints. One mesh member is killed (SIGKILL, a crash): the others
 * keep serving proofs with consensus, co-signed by the survivors only, and report the dead member absent. Ctrl-C
 * (SIGINT) then stops every process, marks the network file stopped and removes the manifest. On a failure the
 * start process is SIGKILLed, and its children stop with it (bin/stopWithParent.js).
 */
import { expect } from "chai";
import { spawn, type ChildProcess } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { NetworkFileJson } from "../../relayer/network";
import { parseManifest } from "../../wire/manifest";

const ROOT = join(__dirname, "..", "..");

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

async function until<T>(read: () => Promise<T | undefined> | T | undefined, what: string, timeoutMs: number): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await read();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`${what} did not happen within ${timeoutMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
}

describe("npm start: every program a process of its own (scripts/start.ts)", function () {
  this.timeout(600_000);
  let dir: string;
  let start: ChildProcess | undefined;
  let stdout = "";
  let stderr = "";

  before(() => {
    dir = mkdtempSync(join(tmpdir(), "ats-processes-"));
    start = spawn(process.execPath, ["-r", "./bin/register-ts.js", "scripts/start.ts"], {
      cwd: ROOT,
      env: { ...process.env, ATS_NETWORK_DIR: dir },
      stdio: ["ignore", "pipe", "pipe"],
    });
    start.stdout!.on("data", (chunk: Buffer) => (stdout += chunk.toString()));
    start.stderr!.on("data", (chunk: Buffer) => (stderr = (stderr + chunk.toString()).slice(-20_000)));
  });

  after(async () => {
    if (start !== undefined && start.exitCode === null && start.signalCode === null) {
      const exited = new Promise((resolve) => start!.once("exit", resolve));
      start.kill("SIGKILL"); // its children notice and stop on their own
      await exited;
    }
    rmSync(dir, { recursive: true, force: true });
  });

  it("keeps serving proofs with consensus after one member's process is killed, reports it absent, and Ctrl-C stops everything", async () => {
    await until(() => (stdout.includes("Press Ctrl-C to stop.") ? true : start!.exitCode !== null ? Promise.reject(new Error(`npm start exited:\n${stdout}\n${stderr}`)) : undefined), "the network", 400_000);
    const networkFile = join(dir, "network.json");
    const network = JSON.parse(readFileSync(networkFile, "utf8")) as NetworkFileJson;
    expect(network.status).to.equal("running");
    const programs = network.programs!;
    expect(programs.map((program) => program.name)).to.deep.equal(["chain alpha", "chain beta", "node 1", "node 2", "node 3", "node 4", "gateway", "relayer"]);
    expect(new Set(programs.map((program) => program.pid)).size, "one process each").to.equal(programs.length);
    for (const program of programs) expect(stdout, program.name).to.include(`${program.program} (pid ${program.pid}):`);
    const nodes = programs.filter((program) => program.program === "ats-node");
    for (const node of nodes) expect(Object.keys(node.endpoints)).to.include.members(["rest", "metrics", "ws", "grpc", "ntp", "mesh"]);
    const manifest = parseManifest(JSON.parse(readFileSync(join(dir, "manifest.json"), "utf8")));
    expect(manifest.chain.evmChainId).to.equal(31337);
    expect(manifest.chain.ntsVerified).to.equal(false);
    expect(manifest.meshPeers).to.have.length(4);
    const gateway = programs.find((program) => program.name === "gateway")!;
    expect(manifest.services.time).to.equal(gateway.endpoints.rpc);
    expect(manifest.services["time-ws"]).to.equal(gateway.endpoints.ws);
    expect(manifest.services["time-host"]).to.equal(nodes[0]!.endpoints.ntp);
    expect(manifest.services["node-1-grpc"]).to.equal(`http://${nodes[0]!.endpoints.grpc}`);
    expect(manifest.services["node-4-ws"]).to.equal(nodes[3]!.endpoints.ws);

    // A crash of node 2's process.
    const victim = nodes[1]!;
    const victimId = manifest.meshPeers.find((peer) => peer.endpoint === victim.endpoints.rest)!.nodeId;
    process.kill(victim.pid, "SIGKILL");
    await until(() => (alive(victim.pid) ? undefined : true), "node 2's death", 10_000);

    // Node 1 reports it absent, and the three others keep serving co-signed proofs without it.
    const rest = nodes[0]!.endpoints.rest;
    await until(async () => {
      const state = (await (await fetch(`${rest}/mesh/state`)).json()) as { peers: { nodeId: string; absent: boolean }[] };
      return state.peers.find((peer) => peer.nodeId === victimId)?.absent === true ? true : undefined;
    }, "node 2 reported absent", 60_000);
    const survivors = manifest.meshPeers.filter((peer) => peer.nodeId !== victimId).map((peer) => peer.nodeId.toLowerCase());
    const served = await until(async () => {
      const response = await fetch(`${rest}/time/current`);
      if (response.status !== 200) return undefined;
      return (await response.json()) as { consensus: { members: number; responders: number; readings: { nodeId: string }[] } };
    }, "a proof after the crash", 60_000);
    expect(served.consensus.members).to.equal(4);
    expect(served.consensus.responders).to.be.at.least(3);
    for (const reading of served.consensus.readings) expect(survivors).to.include(reading.nodeId.toLowerCase());

    // Ctrl-C: every process stops, the network file says so, the manifest is gone.
    const exited = new Promise<number | null>((resolve) => start!.once("exit", (code) => resolve(code)));
    start!.kill("SIGINT");
    expect(await exited, stderr.slice(-3_000)).to.equal(0);
    for (const program of programs) expect(alive(program.pid), program.name).to.equal(false);
    expect((JSON.parse(readFileSync(networkFile, "utf8")) as NetworkFileJson).status).to.equal("stopped");
    expect(existsSync(join(dir, "manifest.json"))).to.equal(false);
  });
});
